"""The metrics and timing folds on hand-made histories."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hades.core.events import Event
from hades.core.lifecycle import (
    FailJob,
    FinishStep,
    JobState,
    MarkPrepared,
    QueueJob,
    RequestCancel,
    RequeueJob,
    StartAttempt,
    StartStep,
    StopJob,
    SubmitJob,
    decide,
    evolve,
)
from hades.core.ports import Recorded
from hades.core.spec import JobSpec, Step
from hades.projections.metrics import MetricsView
from hades.projections.timing import TimingView

T0 = datetime(2026, 12, 2, 12, tzinfo=UTC)


def history(
    priority: int, steps: int, run_seconds: float, start_after: float = 1.0, older: bool = False
) -> list[Event]:
    """A job submitted at T0, queued 10 ms later, started ``start_after`` s later, prepared in 0.6 s, each step
    running for ``run_seconds`` (as the executor measured it), finishing when its step ends. The preparation is
    on the first ``step_started``, or (``older``) a ``prepared`` of its own, as executors wrote it before."""
    spec = JobSpec(name="j", priority=priority, steps=tuple(Step(id=i + 1, image="a") for i in range(steps)))
    moves: list[tuple[object, float]] = [(QueueJob(), 0.01)]
    if steps:
        moves.append((StartAttempt(1, "e"), start_after))
        prepare = {"volume": 0.005, "images": 0.5}
        if older:
            moves.append((MarkPrepared(1, prepare), 0.6))
        for index in range(steps):
            first = index == 0 and not older
            moves.append((StartStep(1, index, prepare=prepare if first else None), 0.001 + (0.6 if first else 0)))
            phases = {"create": 0.1, "start": 0.05, "run": run_seconds, "logs": 0.001, "teardown": 0.02}
            moves.append((FinishStep(1, index, 0, phases=phases), 0.2 + run_seconds))
    return decided(spec, moves)


def decided(spec: JobSpec, moves: list[tuple[object, float]]) -> list[Event]:
    """The events of a job submitted at T0 with ``spec``, then each command decided the seconds after the last."""
    job_id = str(uuid.uuid4())
    clock = T0
    events: list[Event] = decide(None, SubmitJob(job_id=job_id, spec=spec), clock)
    state: JobState | None = evolve(None, events[0])
    for command, seconds in moves:
        clock += timedelta(seconds=seconds)
        for event in decide(state, command, clock):  # type: ignore[arg-type]
            state = evolve(state, event)
            events.append(event)
    return events


def fold_into(view: MetricsView | TimingView, *histories: list[Event]) -> None:
    seq = 0
    for events in histories:
        for event in events:
            seq += 1
            view.apply(Recorded(seq=seq, event=event))


@pytest.mark.parametrize("older", [False, True], ids=["prepare-on-step-started", "prepared-event"])
def test_timing_splits_a_job_into_its_phases_and_overhead(older: bool) -> None:
    events = history(priority=3, steps=2, run_seconds=2.0, older=older)
    assert ("prepared" in [e.type for e in events]) is older
    view = TimingView(retain_ended=True)
    fold_into(view, events)

    summary = view.get(events[0].job_id).summary()  # type: ignore[union-attr]

    phases = summary["phases"]
    assert phases["scheduling"] == 0.01 and phases["queue_wait"] == 1.0
    assert phases["images"] == 0.5 and phases["volume"] == 0.005
    assert phases["run"] == 4.0 and phases["create"] == 0.2 and phases["teardown"] == 0.04
    assert summary["total"] == round(0.01 + 1.0 + 0.6 + 2 * (0.001 + 2.2), 6)
    assert summary["overhead"] == round(summary["total"] - 4.0, 6)
    assert summary["overhead_pct"] == round(100 * summary["overhead"] / summary["total"], 1)
    assert [s["index"] for s in summary["steps"]] == [0, 1]


def test_timing_of_a_job_still_queued_has_no_totals_yet() -> None:
    events = history(priority=1, steps=0, run_seconds=0)[:2]
    view = TimingView(retain_ended=True)
    fold_into(view, events)
    summary = view.get(events[0].job_id).summary()  # type: ignore[union-attr]
    assert summary["total"] is None and summary["overhead_pct"] is None
    assert summary["phases"]["scheduling"] == 0.01 and summary["phases"]["queue_wait"] is None


def test_metrics_count_statuses_queue_depth_durations_and_throughput() -> None:
    finished = [history(3, 1, seconds) for seconds in (1.0, 2.0, 3.0, 10.0)]
    queued_low, queued_medium = history(1, 0, 0)[:2], history(2, 0, 0)[:2]
    view = MetricsView()
    fold_into(view, *finished, queued_low, queued_medium)

    last_finish = max(e.at for events in finished for e in events)
    snapshot = view.snapshot(last_finish + timedelta(seconds=30))

    assert snapshot["statusCounts"] == {"Succeeded": 4, "Queued": 2}
    assert snapshot["queueDepth"] == {"total": 2, "byPriority": {"high": 0, "medium": 1, "low": 1}}
    durations = snapshot["durations"]
    assert durations["count"] == 4
    assert durations["p50Ms"] == 2801.0  # nearest rank: the 2nd of 4 (started → finished: 0.6 + 0.001 + 2.2 s)
    assert durations["p95Ms"] == 10801.0
    assert snapshot["throughputPerMin"] == 4
    assert view.snapshot(last_finish + timedelta(minutes=2))["throughputPerMin"] == 0


def test_metrics_ignore_events_seen_twice() -> None:
    events = history(3, 1, 1.0)
    view = MetricsView()
    fold_into(view, events)
    fold_into(view, events)  # the same sequences again, as a re-subscribed follower would see them
    assert view.snapshot(T0)["statusCounts"] == {"Succeeded": 1}


def timing_of(events: list[Event]) -> dict[str, Any]:
    view = TimingView(retain_ended=True)
    fold_into(view, events)
    return view.get(events[0].job_id).summary()  # type: ignore[union-attr]


ONE_STEP = JobSpec(name="j", steps=(Step(id=1, image="a"),))
#: Queued 10 ms after submission, started 0.5 s later, its step started 0.2 s after that.
UNTIL_THE_STEP: list[tuple[object, float]] = [(QueueJob(), 0.01), (StartAttempt(1, "e"), 0.5), (StartStep(1, 0), 0.2)]


def test_a_step_the_timeout_killed_ran_until_the_deadline_and_its_kill_is_overhead() -> None:
    spec = ONE_STEP.model_copy(update={"timeout_seconds": 3})
    # the deadline is 3 s after started, 2.8 s into the step; the job's end is recorded 0.25 s after it
    summary = timing_of(decided(spec, [*UNTIL_THE_STEP, (FailJob(1, "job timed out after 3 seconds"), 3.05)]))

    assert summary["phases"]["run"] == summary["steps"][0]["run"] == 2.8
    assert summary["total"] == round(0.01 + 0.5 + 0.2 + 3.05, 6)
    assert summary["overhead"] == round(0.01 + 0.5 + 0.2 + 0.25, 6)


def test_a_step_a_cancel_stopped_ran_until_the_cancel_request() -> None:
    moves = [*UNTIL_THE_STEP, (RequestCancel("api"), 1.5), (StopJob(1, "cancelled by api"), 0.1)]
    summary = timing_of(decided(ONE_STEP, moves))

    assert summary["phases"]["run"] == summary["steps"][0]["run"] == 1.5
    assert summary["overhead"] == round(0.01 + 0.5 + 0.2 + 0.1, 6)


def test_a_job_cancelled_while_queued_ran_nothing() -> None:
    events = decided(ONE_STEP, [(QueueJob(), 0.01), (RequestCancel("api"), 2.0)])
    assert events[-1].type == "stopped"

    summary = timing_of(events)

    assert summary["phases"]["run"] is None and summary["steps"] == []
    assert summary["overhead"] == summary["total"] == 2.01


def test_a_step_its_attempt_left_behind_is_not_counted_when_the_job_ends_later() -> None:
    moves = [*UNTIL_THE_STEP, (RequeueJob(1, "executor shut down"), 1.0), (StartAttempt(2, "e"), 0.5)]
    summary = timing_of(decided(ONE_STEP, [*moves, (FailJob(2, "executor error: boom"), 0.3)]))

    assert summary["phases"]["run"] is None and summary["overhead"] == summary["total"]
