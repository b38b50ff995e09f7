"""``hades up`` never loses accepted jobs to a shared data folder or a dead embedded nats-server, through real
processes: one owner per ``HADES_DATA_DIR`` (a SIGKILLed owner does not block the next), an exit with an error when
the embedded server dies, and ``/health`` answering 503 while a role's NATS connection is down."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from hades.adapters.nats.server import start_nats
from tests.conftest import free_port
from tests.integration.test_cli import HADES, REPO, servers_using, stop, wait_until_up

pytestmark = pytest.mark.docker

_T = TypeVar("_T")


def until(condition: Callable[[], _T], timeout: float = 30) -> _T:
    """Poll ``condition`` until it returns something truthy; fail with the last value after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (last := condition()):
        assert time.monotonic() < deadline, f"condition not met within {timeout}s; last value: {last!r}"
        time.sleep(0.05)
    return last


def env_for(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "HADES_", "API_", "AUTH_"))}
    api_port = free_port()
    env.update(
        HADES_DATA_DIR=str(data_dir),
        API_PORT=str(api_port),
        NATS_PORT=str(free_port()),
        HADES_API_URL=f"http://127.0.0.1:{api_port}",
        **extra,
    )
    return env


class Hades:
    """A ``hades`` process whose stderr (its log) is read as it goes, so a test can wait for a line."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.process = subprocess.Popen([*HADES, *args], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def wait(self, timeout: float) -> int:
        """The exit status, with the whole log read."""
        status = self.process.wait(timeout)
        self._reader.join(timeout)
        return status

    @property
    def log(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def processes() -> Iterator[list[Hades]]:
    """Every process a test starts, stopped at its end."""
    started: list[Hades] = []
    yield started
    for hades in started:
        stop(hades.process)


def start(processes: list[Hades], env: dict[str, str], *args: str) -> Hades:
    hades = Hades(env, *args)
    processes.append(hades)
    return hades


def health(url: str) -> int | None:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code
    except httpx.HTTPError:
        return None


def running_up(processes: list[Hades], data: Path) -> tuple[Hades, dict[str, str]]:
    """A ``hades up`` on ``data``, answering; with its environment."""
    env = env_for(data)
    hades = start(processes, env, "up")
    wait_until_up(env["HADES_API_URL"], hades.process)
    return hades, env


def test_a_second_up_on_the_same_data_folder_refuses_at_once_naming_it_and_the_holder(
    tmp_path: Path, processes: list[Hades]
) -> None:
    data = tmp_path / "data"
    first, first_env = running_up(processes, data)
    (owned,) = servers_using(str(data))

    second = start(processes, env_for(data), "up")

    assert second.wait(timeout=30) == 1
    assert f"HADES_DATA_DIR {data} is in use by another `hades up` (pid {first.process.pid})" in second.log
    assert servers_using(str(data)) == [owned]  # the second never started a nats-server on the store
    assert health(first_env["HADES_API_URL"]) == 200


def test_a_sigkilled_owner_does_not_block_the_next_start(tmp_path: Path, processes: list[Hades]) -> None:
    data = tmp_path / "data"
    first, _ = running_up(processes, data)

    first.process.kill()
    first.wait(timeout=10)
    until(lambda: servers_using(str(data)) == [])  # its server, the store's last writer, is gone too

    _, second_env = running_up(processes, data)
    assert health(second_env["HADES_API_URL"]) == 200


def test_up_exits_with_one_clear_error_when_its_embedded_nats_server_dies(
    tmp_path: Path, processes: list[Hades]
) -> None:
    data = tmp_path / "data"
    hades, _ = running_up(processes, data)
    (server,) = servers_using(str(data))

    os.kill(server, signal.SIGKILL)

    assert hades.wait(timeout=10) == 1
    assert (
        hades.log.count("ERROR hades.runtime: the embedded nats-server exited unexpectedly (status -9; its log: ") == 1
    )
    assert "Traceback" not in hades.log, hades.log


def test_the_api_is_not_ready_while_its_nats_is_down_and_ready_again_when_it_returns(
    tmp_path: Path, processes: list[Hades]
) -> None:
    nats_port = free_port()
    server = start_nats(tmp_path / "nats", port=nats_port)
    try:
        env = env_for(tmp_path / "data", NATS_URL=f"nats://127.0.0.1:{nats_port}")
        assert subprocess.run([*HADES, "streams", "apply"], env=env, cwd=REPO, timeout=60).returncode == 0
        api = start(processes, env, "api")
        wait_until_up(env["HADES_API_URL"], api.process)
        assert health(env["HADES_API_URL"]) == 200

        server.process.kill()
        server.process.wait()

        until(lambda: health(env["HADES_API_URL"]) == 503)
        answer = httpx.get(f"{env['HADES_API_URL']}/health", timeout=1)
        assert answer.json() == {"status": "unavailable", "error": "not connected to NATS (reconnecting)"}
        assert httpx.get(f"{env['HADES_API_URL']}/ping", timeout=1).status_code == 200  # alive: not to be killed
        assert api.process.poll() is None

        server = start_nats(tmp_path / "nats", port=nats_port)
        until(lambda: health(env["HADES_API_URL"]) == 200)
    finally:
        server.stop()


def test_a_second_signal_while_draining_stops_at_once(
    docker_images: list[str], tmp_path: Path, processes: list[Hades]
) -> None:
    env = env_for(tmp_path / "data", SHUTDOWN_GRACE_SECONDS="600")
    hades = start(processes, env, "up")
    url = env["HADES_API_URL"]
    wait_until_up(url, hades.process)
    job = {"name": "long", "steps": [{"id": 1, "image": "alpine:latest", "script": "sleep 600"}]}
    job_id = httpx.post(f"{url}/build", json=job, timeout=5).json()["job_id"]
    try:
        until(lambda: containers_of(job_id, running=True))

        hades.process.send_signal(signal.SIGTERM)
        until(lambda: hades.said("draining: 1 attempts get 600 s to finish"))
        hades.process.send_signal(signal.SIGINT)

        assert hades.wait(timeout=10) == 128 + signal.SIGINT
        assert hades.said("SIGINT again while stopping: stopping at once, without waiting for running jobs")
        assert not hades.said("hades stopped")
        assert containers_of(job_id, running=True)  # left as a crash leaves it, for the executors' sweep
    finally:
        remove_containers_of(job_id)


def containers_of(job_id: str, running: bool = False) -> list[str]:
    every = [] if running else ["--all"]
    listed = subprocess.run(
        ["docker", "ps", "--quiet", *every, "--filter", f"label=hades.job_id={job_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def remove_containers_of(job_id: str) -> None:
    """What the sweep of a next start would remove, removed now: the test starts none."""
    if containers := containers_of(job_id):
        subprocess.run(["docker", "rm", "-f", *containers], capture_output=True, check=True)
    subprocess.run(["docker", "volume", "rm", "--force", f"hades-{job_id}-1"], capture_output=True)


def test_a_clean_stop_says_so_last(tmp_path: Path, processes: list[Hades]) -> None:
    env = env_for(tmp_path / "data")
    hades = start(processes, env, "up")
    wait_until_up(env["HADES_API_URL"], hades.process)

    hades.process.send_signal(signal.SIGTERM)

    assert hades.wait(timeout=30) == 0
    assert hades.lines[-1].endswith("INFO hades.runtime: hades stopped"), hades.log
