"""``hades doctor`` through the real entry point against a real nats-server: PASS on a healthy setup (exit 0); each
problem a FAIL line with its fix (exit 1): a stream changed behind Hades's back, NATS unreachable, a bad setting,
no Docker socket, an unwritable workspace; WARN and INFO do not fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from hades import doctor_checks
from hades.adapters.nats.connection import connect
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.server import EmbeddedNats
from hades.adapters.nats.topology import LOGS_STREAM
from tests.conftest import free_port


def doctor(tmp_path: Path, nats_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m hades.cli doctor`` for the process executor, in an empty folder (no .env), plus ``env``."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "HADES_", "API_", "DOCKER_", "DASHBOARD_"))
    }
    clean.update(
        NATS_URL=nats_url,
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path / "work"),
        AUTH_KEY="doctor-test",
    )
    clean.update(env)
    command = [sys.executable, "-m", "hades.cli", "doctor", *args]
    return subprocess.run(command, env=clean, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def line(output: str, level: str, name: str) -> str:
    """The report's line for the check ``name`` at ``level`` (failing the test if there is none)."""
    found = [text for text in output.splitlines() if text.split()[:2] == [level, name]]
    assert found, f"no {level} {name} line in:\n{output}"
    return found[0]


async def test_a_healthy_setup_passes(js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path) -> None:
    nc = await connect(fresh_nats.url)
    try:
        await Heartbeats(nc).beat("exec-doctor-1", {"labels": {}})
    finally:
        await nc.close()

    done = doctor(tmp_path, fresh_nats.url)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "nats-server 2." in line(done.stdout, "PASS", "nats")
    line(done.stdout, "PASS", "jetstream")
    assert "match streams.yaml" in line(done.stdout, "PASS", "topology")
    assert "writable" in line(done.stdout, "PASS", "workspaces") or "will be created" in done.stdout
    assert "exec-doctor-1" in line(done.stdout, "INFO", "executors")
    assert "\x1b[" not in done.stdout  # piped: plain text
    report = json.loads(doctor(tmp_path, fresh_nats.url, "--json").stdout)
    assert report["ok"] is True and {check["level"] for check in report["checks"]} <= {"PASS", "INFO"}


async def test_a_stream_changed_behind_hades_back_fails_with_the_fix(
    js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path
) -> None:
    config = (await js.stream_info(LOGS_STREAM)).config
    config.max_age = 60
    await js.update_stream(config=config)
    await js.delete_consumer("HADES_EVENTS", "scheduler")

    done = doctor(tmp_path, fresh_nats.url)

    assert done.returncode == 1
    failed = line(done.stdout, "FAIL", "topology")
    assert "stream HADES_LOGS: max_age is 60 on the server, 604800 in streams.yaml" in failed
    assert "consumer HADES_EVENTS/scheduler is missing" in failed
    assert "fix: run `hades streams apply`" in done.stdout


def test_nats_unreachable_fails_with_the_fix(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"

    done = doctor(tmp_path, url)

    assert done.returncode == 1
    assert f"cannot connect to NATS at {url}" in line(done.stdout, "FAIL", "nats")
    assert "fix: start that NATS server, or correct NATS_URL" in done.stdout
    line(done.stdout, "PASS", "settings")  # the checks that need no NATS still ran


def test_a_bad_setting_names_its_variable(tmp_path: Path) -> None:
    done = doctor(tmp_path, "nats://127.0.0.1:1", CONCURRENCY="0")

    assert done.returncode == 1
    assert "CONCURRENCY='0'" in line(done.stdout, "FAIL", "settings")
    assert "fix: set CONCURRENCY to a valid value" in done.stdout


async def test_docker_without_a_socket_and_an_unwritable_workspace_fail(
    js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path
) -> None:
    docker = doctor(tmp_path, fresh_nats.url, HADES_EXECUTOR="docker", DOCKER_HOST=f"unix://{tmp_path}/docker.sock")
    assert docker.returncode == 1
    assert f"no Docker socket at {tmp_path}/docker.sock" in line(docker.stdout, "FAIL", "docker")
    assert "fix: start the Docker engine (dockerd), or set DOCKER_HOST" in docker.stdout

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    process = doctor(tmp_path, fresh_nats.url, HADES_PROCESS_WORKSPACES=str(blocker / "work"))
    assert process.returncode == 1
    assert "is not a folder" in line(process.stdout, "FAIL", "workspaces")
    assert "HADES_PROCESS_WORKSPACES" in process.stdout


async def test_dashboard_half_set_warns_and_a_short_secret_fails(
    js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path
) -> None:
    half = doctor(tmp_path, fresh_nats.url, DASHBOARD_USERNAME="admin")
    assert half.returncode == 0  # a warning is not a failure
    warned = line(half.stdout, "WARN", "dashboard")
    assert "DASHBOARD_PASSWORD_HASH, DASHBOARD_SESSION_SECRET unset" in warned

    bcrypt_hash = "$2b$12$" + "a" * 53
    short = doctor(
        tmp_path,
        fresh_nats.url,
        DASHBOARD_USERNAME="admin",
        DASHBOARD_PASSWORD_HASH=bcrypt_hash,
        DASHBOARD_SESSION_SECRET="too-short",
    )
    assert short.returncode == 1
    assert "DASHBOARD_SESSION_SECRET must be at least 32 characters" in line(short.stdout, "FAIL", "dashboard")


def test_a_docker_socket_without_permission_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root here, for whom every socket is open: the access check itself is what is replaced."""
    socket_path = tmp_path / "docker.sock"
    socket_path.touch()
    monkeypatch.setattr(doctor_checks.os, "access", lambda path, mode: False)

    check = doctor_checks._socket_problem(str(socket_path))

    assert check is not None and check.level == "FAIL"
    assert check.message == f"permission denied on the Docker socket {socket_path}"
    assert check.fix is not None and "docker group" in check.fix and "root" in check.fix
