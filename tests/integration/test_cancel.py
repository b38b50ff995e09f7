"""Cancel: a queued job stops at once and never starts; a running one is stopped within seconds."""

from __future__ import annotations

import time
import uuid

import pytest

from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.integration.test_docker_jobs import no_leftovers

pytestmark = pytest.mark.docker

SLEEPER = {"name": "sleeper", "steps": [{"id": 1, "image": "alpine:latest", "script": "echo up; sleep 120"}]}


async def test_a_queued_job_stops_at_once_and_never_starts(docker_images: list[str], start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    job_id = await api.submit(SLEEPER)

    response = await api.client.post(f"/jobs/{job_id}/cancel", json={"reason": "wrong commit"})

    assert response.status_code == 202
    assert response.json() == {"job_id": job_id, "status": "Stopped", "cancel_requested": True}
    executor = await start_hades(Roles(executor=True))
    events = (await api.client.get(f"/jobs/{job_id}/events")).json()["events"]
    assert [e["type"] for e in events][-2:] == ["cancel_requested", "stopped"]
    assert events[-2]["reason"] == "wrong commit"
    assert events[-1]["reason"] == "cancelled by api: wrong commit"  # what the request said, in the end too
    # The executor drains the queue without starting it: a job submitted after it runs, this one never does.
    later = await api.submit({"name": "after", "steps": [{"id": 1, "image": "alpine:latest", "script": "true"}]})
    assert (await api.wait_terminal(later))["status"] == "Succeeded"
    assert "started" not in [e["type"] for e in (await api.client.get(f"/jobs/{job_id}/events")).json()["events"]]
    await executor.stop()


async def test_a_running_job_is_stopped_within_seconds(docker_images: list[str], start_hades: StartHades) -> None:
    hades = await start_hades()
    job_id = await hades.submit(SLEEPER)

    async def running() -> bool:
        logs = (await hades.client.get(f"/jobs/{job_id}/logs")).json()["logs"]
        return bool(logs and logs[0]["logs"])

    await eventually(running)
    began = time.monotonic()
    response = await hades.client.post(f"/jobs/{job_id}/cancel")
    assert response.status_code == 202 and response.json()["status"] == "Running"

    detail = await hades.wait_terminal(job_id, timeout=30)
    latency = time.monotonic() - began

    assert detail["status"] == "Stopped"
    assert detail["reason"] == "cancelled by api"
    assert latency < 10, latency
    print(f"\ncancel of a running job -> Stopped: {latency * 1000:.0f} ms")
    await eventually(lambda: no_leftovers(job_id))  # cleanup follows the terminal event
    again = await hades.client.post(f"/jobs/{job_id}/cancel")
    assert again.status_code == 409
    assert again.json()["status"] == "Stopped"


async def test_cancel_of_an_unknown_or_malformed_job_is_404(start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True))
    for job_id in (str(uuid.uuid4()), "*"):
        response = await api.client.post(f"/jobs/{job_id}/cancel")
        assert response.status_code == 404
        assert response.json() == {"error": f"job not found: {job_id}"}


async def test_a_cancel_survives_a_restart_of_the_executor(docker_images: list[str], start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    executor = await start_hades(Roles(executor=True), SHUTDOWN_GRACE_SECONDS=0)
    job_id = await api.submit(SLEEPER)

    async def started() -> bool:
        return (await api.client.get(f"/jobs/{job_id}/status")).json()["status"] == "Running"

    await eventually(started)
    await executor.stop()  # no grace: hands the attempt back at once, queued again as attempt 2
    assert (await api.client.post(f"/jobs/{job_id}/cancel")).status_code == 202
    restarted = await start_hades(Roles(executor=True))

    detail = await api.wait_terminal(job_id)

    assert detail["status"] == "Stopped"
    types = [e["type"] for e in (await api.client.get(f"/jobs/{job_id}/events")).json()["events"]]
    assert types.count("started") == 1
    await restarted.stop()
