"""``/metrics`` of a role that is not the API: a real ``hades executor`` process serves its own families on
``METRICS_PORT``, and the API's process shows only what that process did."""

from __future__ import annotations

from pathlib import Path

import httpx

from hades.runtime import Roles
from tests.conftest import SpawnRole, StartHades, eventually, free_port
from tests.http.test_prometheus import Samples, append_counts, samples, shell_job


async def test_an_executor_process_serves_its_slots_attempts_and_appends_on_metrics_port(
    start_hades: StartHades, spawn_role: SpawnRole, tmp_path: Path
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    port = free_port()
    executor = spawn_role(
        "executor",
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path / "work"),
        CONCURRENCY="2",
        METRICS_PORT=str(port),
    )
    jobs = [await api.submit(shell_job()) for _ in range(3)]
    for job_id in jobs:
        detail = await api.wait_terminal(job_id)
        assert (detail["status"], detail["executor_id"]) == ("Succeeded", executor.executor_id)

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:

        async def idle() -> Samples | None:
            values = samples((await client.get("/metrics")).text)
            busy = values.get(("hades_executor_slots", (("state", "busy"),)))
            free = values.get(("hades_executor_slots", (("state", "free"),)))
            return values if (busy, free) == (0, 2) else None

        scraped: Samples = await eventually(idle, timeout=10)

    assert scraped[("hades_executor_attempts_started_total", ())] >= 3
    assert scraped[("hades_executor_attempts_finished_total", (("status", "Succeeded"),))] >= 3
    counts = append_counts(scraped)
    for kind in ("started", "step_started", "step_finished"):
        assert counts.get(kind, 0) >= 3, (kind, counts)
    assert "submitted" not in counts and "queued" not in counts  # the API's and the scheduler's, not this process's
    assert not any(name.startswith("hades_jobs") for name, _ in scraped)  # no read models in an executor

    own = samples((await api.client.get("/metrics")).text)
    assert append_counts(own).get("submitted", 0) >= 3 and append_counts(own).get("queued", 0) >= 3
    assert "started" not in append_counts(own)
    assert not any(name == "hades_executor_slots" for name, _ in own)  # that process runs no executor
