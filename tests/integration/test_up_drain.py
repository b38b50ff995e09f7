"""SIGTERM to ``hades up`` while a job runs: the executor drains while the API keeps answering, so a client polling
the job and one following its logs both see it end before the process exits cleanly (real processes, the process
executor)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx

from tests.integration.test_cli import wait_until_up
from tests.integration.test_up_safety import Hades, env_for, processes, start, until

__all__ = ["processes"]  # the fixture, used by name

JOB = {"name": "drained", "steps": [{"id": 1, "image": "alpine", "script": "echo before; sleep 2; echo after"}]}


class Follower:
    """``GET /jobs/{id}/logs?follow=true`` read on a thread: its lines, and whether the stream broke."""

    def __init__(self, url: str) -> None:
        self.lines: list[str] = []
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        try:
            with httpx.stream("GET", url, params={"follow": "true"}, timeout=60) as response:
                self.lines.extend(response.iter_lines())
        except httpx.HTTPError as error:
            self.error = error

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def status(url: str, job_id: str) -> str | None:
    try:
        return str(httpx.get(f"{url}/jobs/{job_id}/status", timeout=2).json()["status"])
    except httpx.HTTPError:
        return None


def test_a_job_running_at_sigterm_is_seen_to_end_by_pollers_and_followers_before_a_clean_exit(
    tmp_path: Path, processes: list[Hades]
) -> None:
    env = env_for(tmp_path / "data", HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(tmp_path / "work"))
    hades = start(processes, env, "up")
    url = env["HADES_API_URL"]
    wait_until_up(url, hades.process)
    job_id = httpx.post(f"{url}/build", json=JOB, timeout=5).json()["job_id"]
    follower = Follower(f"{url}/jobs/{job_id}/logs")
    until(lambda: any('"message":"before"' in line for line in follower.lines))  # the step runs, followed

    hades.process.send_signal(signal.SIGTERM)
    until(lambda: hades.said("draining: 1 attempts get 30 s to finish"))
    seen: list[str | None] = []
    while hades.process.poll() is None and "Succeeded" not in seen:
        seen.append(status(url, job_id))
        time.sleep(0.05)  # a polling client's pace, not a synchronisation: the loop ends on what it sees

    assert "Succeeded" in seen, f"the status polled while draining: {seen}; log:\n{hades.log}"
    assert hades.wait(timeout=30) == 0
    follower.join(timeout=10)
    assert follower.error is None, follower.error
    assert "event: end" in follower.lines, follower.lines
    assert 'data: {"status": "Succeeded", "reason": null}' in follower.lines
    assert any('"message":"after"' in line for line in follower.lines)
    assert "Traceback" not in hades.log, hades.log
    assert hades.lines[-1].endswith("INFO hades.runtime: hades stopped"), hades.log
