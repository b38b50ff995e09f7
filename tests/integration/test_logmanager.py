"""``hades logmanager``: the Go Log Manager's routes alone, as its own process, on LOG_MANAGER_PORT."""

from __future__ import annotations

import httpx

from hades.adapters.nats.event_store import NatsEventStore
from hades.core.lifecycle import QueueJob
from tests.conftest import SpawnRole, eventually, free_port
from tests.integration.test_replay import play


async def test_the_log_manager_serves_its_routes_alone(event_store: NatsEventStore, spawn_role: SpawnRole) -> None:
    job_id = await play(event_store, [QueueJob()])
    port = free_port()
    spawn_role("logmanager", LOG_MANAGER_PORT=str(port))

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:

        async def up() -> bool:
            try:
                return (await client.get("/health")).status_code == 200
            except httpx.HTTPError:
                return False

        await eventually(up, timeout=30)
        assert job_id in (await client.get("/jobs")).json()["jobs"]
        assert (await client.get(f"/jobs/{job_id}/status")).json() == {"status": "Queued"}
        assert (await client.get(f"/jobs/{job_id}/logs")).json() == {"logs": []}
        assert (await client.post("/build", json={"name": "x"})).status_code in (404, 405)
        assert (await client.get(f"/jobs/{job_id}")).status_code == 404  # only the Log Manager's routes
