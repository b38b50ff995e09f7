"""The README's path through the real entry point: ``hades up``, ``hades submit --follow``, ``hades events``,
a stop with SIGTERM and a restart from the same data folder (the embedded nats-server restarts from disk too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
HADES = [sys.executable, "-m", "hades.cli"]


@pytest.fixture
def hades_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "HADES_", "API_", "AUTH_"))}
    port = free_port()
    env.update(
        HADES_DATA_DIR=str(tmp_path / "data"),
        API_PORT=str(port),
        NATS_PORT=str(free_port()),
        HADES_API_URL=f"http://127.0.0.1:{port}",
    )
    return env


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"hades up exited with {process.returncode}"
        try:
            if httpx.get(f"{url}/ping", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("hades up did not answer /ping")


@pytest.fixture
def hades_up(hades_env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]]]:
    process = subprocess.Popen([*HADES, "up"], env=hades_env, cwd=REPO)
    try:
        wait_until_up(hades_env["HADES_API_URL"], process)
        yield process, hades_env
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HADES, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_readme_path_submit_follow_events_stop_and_restart(
    docker_images: list[str], hades_up: tuple[subprocess.Popen[bytes], dict[str, str]]
) -> None:
    process, env = hades_up

    submitted = run_cli(env, "submit", "examples/multi-step.json", "--follow")

    assert submitted.returncode == 0, submitted.stderr
    lines = submitted.stdout.splitlines()
    job_id = lines[0]
    assert lines[1:] == [
        "Setting up environment...",
        "Setting up environment...",
        "Processing data...",
        "Setting up environment...",
        "Processing data...",
        "Finalizing...",
        "Succeeded",
    ]
    events = run_cli(env, "events", job_id, "--json")
    assert events.returncode == 0, events.stderr
    assert [e["type"] for e in json.loads(events.stdout)][-1] == "succeeded"

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0

    restarted = subprocess.Popen([*HADES, "up"], env=env, cwd=REPO)
    try:
        wait_until_up(env["HADES_API_URL"], restarted)
        status = httpx.get(f"{env['HADES_API_URL']}/jobs/{job_id}/status", timeout=5).json()
        assert status == {"status": "Succeeded"}
        logs = httpx.get(f"{env['HADES_API_URL']}/jobs/{job_id}/logs", timeout=5).json()["logs"]
        assert len(logs) == 3
    finally:
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(timeout=30) == 0


def test_submit_follow_exits_non_zero_when_the_job_fails(
    docker_images: list[str], hades_up: tuple[subprocess.Popen[bytes], dict[str, str]], tmp_path: Path
) -> None:
    _, env = hades_up
    job = tmp_path / "fail.json"
    job.write_text(json.dumps({"name": "f", "steps": [{"id": 1, "image": "alpine:latest", "script": "exit 3"}]}))

    result = run_cli(env, "submit", str(job), "--follow")

    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "Failed"
    assert "reason: container exited with status 3" in result.stderr


def test_submit_reports_a_bad_job_with_the_servers_message(
    docker_images: list[str], hades_up: tuple[subprocess.Popen[bytes], dict[str, str]], tmp_path: Path
) -> None:
    _, env = hades_up
    job = tmp_path / "bad.json"
    job.write_text(json.dumps({"steps": []}))

    result = run_cli(env, "submit", str(job))

    assert result.returncode == 2
    assert 'Invalid request payload: "name" is required' in result.stderr


def servers_using(data_dir: str) -> list[int]:
    """Pids of nats-server processes whose command line names this data folder."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="ignore")
            except OSError:
                continue
            if "nats-server" in cmdline and data_dir in cmdline:
                pids.append(int(proc.name))
    return pids


def test_the_embedded_server_does_not_outlive_a_killed_hades(
    docker_images: list[str], hades_up: tuple[subprocess.Popen[bytes], dict[str, str]]
) -> None:
    process, env = hades_up
    assert servers_using(env["HADES_DATA_DIR"])

    process.kill()
    process.wait()

    deadline = time.monotonic() + 10
    while servers_using(env["HADES_DATA_DIR"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert servers_using(env["HADES_DATA_DIR"]) == []
