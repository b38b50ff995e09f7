"""``GET /metrics``: the exposition parses, and its numbers are the read models' (jobs per status, queue depth,
phase histograms of finished jobs) followed by the process's own (append latency, executor slots and attempts)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hades.adapters.nats.event_store import NatsEventStore
from hades.core.events import Event
from hades.core.lifecycle import QueueJob
from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.integration.test_replay import executor_script, play

#: Every event type tag: the only values ``kind`` may take.
EVENT_TYPES = {get_args(cls.model_fields["type"].annotation)[0] for cls in get_args(get_args(Event)[0])}


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
    assert after[("hades_views_sequence", ())] == await event_store.stream_last_seq()
    assert grew("hades_phase_seconds_count", phase="run") == 2  # the two jobs that ran steps and ended
    assert grew("hades_phase_seconds_sum", phase="run") == pytest.approx(1.5)  # 0.5 s per step as the executor reported
    assert grew("hades_job_duration_seconds_count") == 2
    assert (
        after[("hades_phase_seconds_bucket", (("le", "+Inf"), ("phase", "run")))]
        == after[("hades_phase_seconds_count", (("phase", "run"),))]
    )


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def shell_job(script: str = "true") -> dict[str, object]:
    return {"name": "metrics", "steps": [{"id": 1, "name": "s", "image": "-", "script": script}]}


def append_counts(values: Samples) -> dict[str, float]:
    """``hades_event_append_seconds_count`` per ``kind``."""
    name = "hades_event_append_seconds_count"
    return {dict(labels)["kind"]: value for (sample, labels), value in values.items() if sample == name}


async def test_a_whole_process_serves_its_own_families_beside_the_read_models(
    start_hades: StartHades, tmp_path: Path
) -> None:
    hades = await start_hades(
        Roles(api=True, scheduler=True, executor=True),
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path / "work"),
        CONCURRENCY=2,
    )

    async def slots_are(busy: float, free: float) -> Samples | None:
        response = await hades.client.get("/metrics")
        assert response.status_code == 200
        values = samples(response.text)
        now = (
            values[("hades_executor_slots", (("state", "busy"),))],
            values[("hades_executor_slots", (("state", "free"),))],
        )
        return values if now == (busy, free) else None

    marker = tmp_path / "go"
    waiting = await hades.submit(shell_job(f"while [ ! -f {marker} ]; do sleep 0.02; done"))
    await eventually(lambda: slots_are(1, 1))  # one slot busy while the job waits for the marker
    marker.touch()
    jobs = [waiting, *[await hades.submit(shell_job()) for _ in range(2)]]
    for job_id in jobs:
        assert (await hades.wait_terminal(job_id))["status"] == "Succeeded"

    after: Samples = await eventually(lambda: slots_are(0, 2))

    counts = append_counts(after)
    # This one process appended every event of the three jobs: the API the submits, the scheduler the queueing,
    # the executor the rest (step_finished and succeeded go in one batch, counted once under its first event).
    for kind in ("submitted", "queued", "started", "step_started", "step_finished"):
        assert counts.get(kind, 0) >= 3, (kind, counts)
    assert set(counts) <= EVENT_TYPES
    assert after[("hades_event_append_seconds_bucket", (("kind", "started"), ("le", "+Inf")))] == counts["started"]
    assert after[("hades_event_append_seconds_sum", (("kind", "started"),))] > 0
    started = after[("hades_executor_attempts_started_total", ())]
    assert started >= 3
    assert after[("hades_executor_attempts_finished_total", (("status", "Succeeded"),))] >= 3
    finished = sum(v for (name, _), v in after.items() if name == "hades_executor_attempts_finished_total")
    assert finished == started  # every attempt this executor started has ended
    assert after[("hades_jobs_total", (("status", "Succeeded"),))] >= 3  # the read models' families are still there
