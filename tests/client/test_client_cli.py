"""The client commands through the real console script (``.venv/bin/hades``) against a real Hades: exit codes for a
succeeding, a failing and a bad job, ``--json`` that parses, plain text when piped and colour on a terminal."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hades.client import AsyncHades
from tests.client.conftest import Api, gated, job
from tests.conftest import free_port

pytestmark = pytest.mark.timeout(60)

HADES = Path(sys.executable).parent / "hades"


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def environment(url: str, key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HADES_", "API_", "AUTH_", "NO_COLOR"))}
    return env | {"HADES_API_URL": url, "AUTH_KEY": key}


async def hades(api: Api, *args: str, url: str | None = None, key: str | None = None) -> Ran:
    """``hades ARGS`` with its output piped; run beside the Hades in this loop."""
    process = await asyncio.create_subprocess_exec(
        str(HADES),
        *args,
        env=environment(url or api.url, api.key if key is None else key),
        cwd=api.gates,  # no .env of the checkout
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 45)
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(), err.decode())


def job_file(api: Api, body: dict[str, Any]) -> str:
    path = api.gates / f"{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(body))
    return str(path)


def assert_plain(ran: Ran) -> None:
    assert "\x1b" not in ran.out + ran.err


async def test_submit_follow_of_a_succeeding_job_exits_0_with_its_lines(api: Api) -> None:
    ran = await hades(api, "submit", job_file(api, job("echo one; echo two >&2", "echo three")), "--follow")

    assert ran.code == 0, ran.err
    job_id, *output = ran.lines
    assert str(uuid.UUID(job_id)) == job_id
    assert output == ["one", "three", "Succeeded"]
    assert ran.err.splitlines() == ["two"]
    assert_plain(ran)


async def test_a_failing_job_exits_1_from_submit_follow_and_logs_follow(api: Api) -> None:
    submitted = await hades(api, "submit", job_file(api, job("echo before; exit 3")), "--follow")
    job_id = submitted.lines[0]
    followed = await hades(api, "logs", job_id, "-f")

    for ran in (submitted, followed):
        assert ran.code == 1, ran.err
        assert ran.lines[-2:] == ["before", "Failed"]
        assert ran.err.startswith("reason: ") and "3" in ran.err
        assert_plain(ran)


async def test_a_bad_job_exits_2_with_the_servers_message(api: Api) -> None:
    ran = await hades(api, "submit", job_file(api, {"steps": []}), "--follow")

    assert ran.code == 2
    assert ran.out == ""
    assert ran.err == 'hades: 400: Invalid request payload: "name" is required\n'


async def test_submitting_again_with_an_idempotency_key_prints_the_same_job(api: Api) -> None:
    path, key = job_file(api, job("echo keyed")), f"cli-{uuid.uuid4()}"
    first = await hades(api, "submit", path, "--idempotency-key", key)
    again = await hades(api, "submit", path, "--idempotency-key", key)
    other = await hades(api, "submit", path)

    assert first.code == again.code == other.code == 0
    assert first.out == again.out != other.out


async def test_refusals_exit_2_and_no_answer_exits_3(api: Api) -> None:
    unknown = str(uuid.uuid4())
    missing, no_key, wrong_key, nowhere, no_file = await asyncio.gather(
        hades(api, "status", unknown),
        hades(api, "events", unknown, key=""),
        hades(api, "events", unknown, key="not-the-key"),
        hades(api, "timing", unknown, url=f"http://127.0.0.1:{free_port()}"),
        hades(api, "submit", str(api.gates / "no-such-file.json")),
    )

    assert (missing.code, missing.err) == (2, f"hades: 404: job not found: {unknown}\n")
    hint = "hades: 401: Unauthorized (this Hades needs its key: set AUTH_KEY to the one it was started with)\n"
    assert (no_key.code, no_key.err) == (2, hint)
    assert wrong_key.code == 2 and "the AUTH_KEY set here is not the one this Hades was started with" in wrong_key.err
    assert nowhere.code == 3 and nowhere.err.startswith("hades: cannot reach http://127.0.0.1:")
    assert no_file.code == 2 and "no-such-file.json" in no_file.err


async def test_json_output_parses_for_every_command(api: Api) -> None:
    submitted = await hades(api, "submit", job_file(api, job("echo one", "echo two")), "--follow", "--json")
    assert submitted.code == 0, submitted.err
    records = [json.loads(line) for line in submitted.lines]
    job_id = records[0]["job_id"]
    status, events, timing, logs = await asyncio.gather(
        *(hades(api, command, job_id, "--json") for command in ("status", "events", "timing", "logs"))
    )

    assert records[-1] == {"end": {"status": "Succeeded", "reason": None}}
    assert [m["message"] for r in records[1:-1] for m in r["log"]["logs"] or []] == ["one", "two"]
    assert json.loads(status.out) == {"status": "Succeeded"}
    assert [e["type"] for e in json.loads(events.out)][-1] == "succeeded"
    assert set(json.loads(timing.out)["phases"]) >= {"queue_wait"}
    assert [[m["message"] for m in log["logs"]] for log in json.loads(logs.out)["logs"]] == [["one"], ["two"]]
    for ran in (submitted, status, events, timing, logs):
        assert ran.code == 0, ran.err
        assert_plain(ran)


async def test_cancel_stops_a_job_and_a_second_cancel_is_refused(api: Api) -> None:
    async with AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(job(gated(api.gates / uuid.uuid4().hex)))
        cancelled = await hades(api, "cancel", job_id, "--reason", "from the CLI", "--json")
        assert await client.wait(job_id, timeout=30) == "Stopped"
        again = await hades(api, "cancel", job_id)
        reasons = [e.row.get("reason") for e in await client.events(job_id) if e.type == "cancel_requested"]

    assert cancelled.code == 0, cancelled.err
    assert json.loads(cancelled.out)["cancel_requested"] is True
    assert reasons == ["from the CLI"]
    assert again.code == 2 and again.err == f"hades: 409: job {job_id} has ended already (Stopped)\n"


def on_a_terminal(api: Api, *args: str) -> tuple[int, str]:
    """``hades ARGS`` with stdout and stderr on a pseudo-terminal: its exit code and what the terminal showed."""
    leader, follower = pty.openpty()
    try:
        env = environment(api.url, api.key) | {"TERM": "xterm"}
        process = subprocess.run(
            [str(HADES), *args], env=env, cwd=api.gates, stdout=follower, stderr=follower, timeout=45
        )
    finally:
        os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: everything written has been read
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return process.returncode, shown.decode()


async def test_a_terminal_gets_colour_and_a_progress_line(api: Api) -> None:
    code, shown = await asyncio.to_thread(on_a_terminal, api, "submit", job_file(api, job("echo hi")), "--follow")

    assert code == 0, shown
    assert "\x1b[32mSucceeded\x1b[0m" in shown
    assert "● " in shown  # the progress line
    assert "\r\x1b[K" in shown  # cleared before the lines below it
    assert "hi" in shown
