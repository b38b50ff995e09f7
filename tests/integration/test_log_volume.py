"""A step that floods its output loses nothing: every line reaches the log store, in order, before the job ends.

The engine streams a fast producer's output long after the container exited (a million lines took ~10 s behind
it here); the executor must follow the stream to its end rather than cut it after a fixed drain time.
"""

from __future__ import annotations

import pytest

from hades.adapters.docker import logs as docker_logs
from tests.conftest import StartHades

pytestmark = pytest.mark.docker

LINES = 100_000


@pytest.mark.timeout(180)
async def test_every_line_of_a_flooding_step_is_stored_in_order(
    docker_images: list[str], start_hades: StartHades, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A drain window far shorter than the stream's backlog after the container exits: a fixed drain would cut it.
    monkeypatch.setattr(docker_logs, "LOG_DRAIN_SECONDS", 1.5)
    hades = await start_hades()
    job = {"name": "flood", "steps": [{"id": 1, "name": "seq", "image": "alpine:latest", "script": f"seq 1 {LINES}"}]}
    job_id = await hades.submit(job)
    assert (await hades.wait_terminal(job_id, timeout=150))["status"] == "Succeeded"
    logs = (await hades.client.get(f"/jobs/{job_id}/logs", timeout=60)).json()["logs"]
    assert len(logs) == 1
    messages = [line["message"] for line in logs[0]["logs"]]
    assert messages == [str(n) for n in range(1, LINES + 1)]
