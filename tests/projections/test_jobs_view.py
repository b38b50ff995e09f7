"""The jobs view keeps ended jobs small (``EndedJob``) and still folds what comes after their end."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta

from hades.core.codec import decode_event, encode_event
from hades.core.events import Event, LogsForwarded, WebhookFailed
from hades.core.lifecycle import FinishStep, MarkPrepared, QueueJob, StartAttempt, StartStep, SubmitJob, decide, evolve
from hades.core.ports import Recorded
from hades.core.spec import JobSpec, Step
from hades.projections.jobs import EndedJob, JobsView
from hades.projections.views import ReadModels

SCRIPT = "set -e\ncd /shared\n./gradlew test --no-daemon\ncp build/test-results/*.xml /shared/results/\n"
SPEC = JobSpec(
    name="student-build",
    metadata={"REPO": "https://git.example.com/course/exercise-7.git", "BRANCH": "main"},
    steps=tuple(Step(id=i, name=f"step {i}", image="builder:2026", script=SCRIPT, memory_limit="2G") for i in (1, 2)),
)
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def finished_job() -> list[Event]:
    """A real two-step job's events, from submission to success, then two deliveries."""
    job_id = str(uuid.uuid4())
    events = decide(None, SubmitJob(job_id=job_id, spec=SPEC), NOW)
    state = evolve(None, events[0])
    commands = [QueueJob(), StartAttempt(1, "exec-1"), MarkPrepared(1, {"volume": 0.01})]
    for index in (0, 1):
        commands += [StartStep(1, index), FinishStep(1, index, 0, phases={"run": 1.0})]
    for command in commands:
        for event in decide(state, command, NOW):
            state = evolve(state, event)
            events.append(event)
    later = NOW + timedelta(seconds=5)
    events.append(
        WebhookFailed(job_id=job_id, at=later, url="http://x", delivery_attempt=1, duration_ms=3, error="boom")
    )
    events.append(LogsForwarded(job_id=job_id, at=later, url="http://y", delivery_attempt=1, duration_ms=4))
    return events


def records(events: list[Event], start: int = 1) -> list[Recorded]:
    return [Recorded(seq=n, event=event) for n, event in enumerate(events, start=start)]


def test_an_ended_job_is_kept_as_a_summary_that_agrees_with_the_whole_state() -> None:
    history = records(finished_job())
    compact = JobsView()
    for recorded in history:
        compact.apply(recorded)
    whole = ReadModels.folded(history).jobs
    job_id = history[0].event.job_id
    kept, state = compact.get(job_id), whole.state(job_id)
    assert isinstance(kept, EndedJob)
    assert state is not None
    assert compact.state(job_id) is None
    assert kept == EndedJob.of(state)  # the deliveries after the end were folded into the summary too
    assert (kept.logs_delivery, kept.webhook_delivery_attempts, kept.events) == ("forwarded", 1, len(history))
    assert (kept.name, kept.step_count) == ("student-build", 2)
    assert compact.unfinished() == []


def test_an_ended_job_costs_far_less_than_its_payload() -> None:
    # stored events, decoded while folding as a replay does: a payload the view kept would show as held memory
    logs = [[encode_event(event) for event in finished_job()] for _ in range(500)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        views = ReadModels()
        seq = 0
        for history in logs:
            for data in history:
                seq += 1
                views.apply(Recorded(seq=seq, event=decode_event(data)))
        gc.collect()
        per_job = (tracemalloc.get_traced_memory()[0] - before) / len(logs)
    finally:
        tracemalloc.stop()
    assert per_job < 1024, f"{per_job:.0f} bytes a finished job"
    assert not views.timing.jobs and not views.metrics.jobs  # counted, then let go
