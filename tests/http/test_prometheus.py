"""``GET /metrics``: the exposition parses, and its numbers are the read models' (jobs per status, queue depth,
phase histograms of finished jobs)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from hades.adapters.nats.event_store import NatsEventStore
from hades.core.lifecycle import QueueJob
from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.integration.test_replay import executor_script, play


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_expose_the_read_models(event_store: NatsEventStore, start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True), HADES_SNAPSHOT_SECONDS="0")
    before = samples((await api.client.get("/metrics")).text)
    await play(event_store, [QueueJob(), *executor_script(1, [0, 0])])
    await play(event_store, [QueueJob()])
    job_id = await play(event_store, [QueueJob(), *executor_script(1, [3])])

    async def failed() -> bool:  # appended straight to the store: the API's views follow a moment later
        return bool((await api.client.get(f"/jobs/{job_id}/status")).json() == {"status": "Failed"})

    await eventually(failed)

    response = await api.client.get("/metrics")

    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    after = samples(response.text)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after[key] - before.get(key, 0.0)

    assert grew("hades_jobs_total", status="Succeeded") == 1
    assert grew("hades_jobs_total", status="Failed") == 1
    assert grew("hades_jobs", status="Queued") == 1
    assert grew("hades_queue_depth", priority="high") == 1
    assert grew("hades_phase_seconds_count", phase="run") == 2  # the two jobs that ran steps and ended
    assert grew("hades_phase_seconds_sum", phase="run") == 1.5  # 0.5 s per step as the executor reported
    assert grew("hades_job_duration_seconds_count") == 2
    assert (
        after[("hades_phase_seconds_bucket", (("le", "+Inf"), ("phase", "run")))]
        == after[("hades_phase_seconds_count", (("phase", "run"),))]
    )
