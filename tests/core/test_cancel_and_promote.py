"""The lifecycle's cancel and priority-ageing decisions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from hades.core.errors import InvalidTransition
from hades.core.events import Event, JobCancelRequested, JobQueued, JobStopped
from hades.core.lifecycle import (
    PromoteJob,
    QueueJob,
    RequestCancel,
    RequeueJob,
    StartAttempt,
    StartStep,
    Status,
    StopJob,
    SubmitJob,
    cancel_reason,
    decide,
    fold,
)
from hades.core.spec import JobSpec, Priority, Step

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)


def history(*commands: object, priority: int = 1) -> list[Event]:
    job_id = str(uuid.uuid4())
    spec = JobSpec(name="j", priority=priority, steps=(Step(id=1, image="a"), Step(id=2, image="a")))
    events: list[Event] = decide(None, SubmitJob(job_id=job_id, spec=spec), NOW)
    for command in commands:
        events += decide(fold(events), command, NOW)  # type: ignore[arg-type]
    return events


def test_cancelling_a_queued_job_stops_it_in_the_same_decision() -> None:
    events = history(QueueJob())
    new = decide(fold(events), RequestCancel(by="alice", reason="typo"), NOW)
    assert [type(e) for e in new] == [JobCancelRequested, JobStopped]
    assert isinstance(new[1], JobStopped) and new[1].reason == "cancelled by alice: typo"  # what the request said
    state = fold(events + new)
    assert state is not None and state.status is Status.STOPPED


def test_cancelling_a_job_not_yet_queued_stops_it_too() -> None:
    events = history()
    new = decide(fold(events), RequestCancel(by="bob"), NOW)
    assert fold(events + new).status is Status.STOPPED  # type: ignore[union-attr]


def test_cancelling_a_running_job_only_records_the_request_and_blocks_further_steps() -> None:
    events = history(QueueJob(), StartAttempt(attempt=1, executor_id="e"), StartStep(attempt=1, step_index=0))
    new = decide(fold(events), RequestCancel(by="alice"), NOW)
    assert [type(e) for e in new] == [JobCancelRequested]
    state = fold(events + new)
    assert state is not None and state.status is Status.RUNNING and state.cancel_requested_by == "alice"
    assert decide(state, RequestCancel(by="carol"), NOW) == []  # the first request stands
    stopped = decide(state, StopJob(attempt=1, reason="cancelled by alice"), NOW)
    assert fold(events + new + stopped).status is Status.STOPPED  # type: ignore[union-attr]


def test_a_running_job_stops_with_what_its_cancel_request_said() -> None:
    events = history(QueueJob(), StartAttempt(attempt=1, executor_id="e"), StartStep(attempt=1, step_index=0))
    events += decide(fold(events), RequestCancel(by="api", reason="student resubmitted"), NOW)
    state = fold(events)
    assert state is not None and cancel_reason(state) == "cancelled by api: student resubmitted"
    handed_back = decide(state, RequeueJob(attempt=1, reason="shutdown"), NOW)  # the executor let go meanwhile
    assert [(type(e), e.reason) for e in handed_back] == [(JobStopped, "cancelled by api: student resubmitted")]  # type: ignore[union-attr]
    unsaid = history(QueueJob(), StartAttempt(attempt=1, executor_id="e"), RequestCancel(by="api"))
    assert cancel_reason(fold(unsaid)) == "cancelled by api"  # type: ignore[arg-type]


def test_a_cancelled_job_handed_back_stops_instead_of_running_again() -> None:
    events = history(QueueJob(), StartAttempt(attempt=1, executor_id="e"), RequestCancel(by="alice"))
    handed_back = decide(fold(events), RequeueJob(attempt=1, reason="shutdown"), NOW)
    assert [type(e) for e in handed_back] == [JobStopped]


def test_a_step_cannot_start_after_a_cancel() -> None:
    events = history(QueueJob(), StartAttempt(attempt=1, executor_id="e"), RequestCancel(by="alice"))
    with pytest.raises(InvalidTransition, match="cancel requested"):
        decide(fold(events), StartStep(attempt=1, step_index=0), NOW)


def test_cancelling_a_finished_job_is_refused() -> None:
    events = history(QueueJob(), RequestCancel(by="a"))
    with pytest.raises(InvalidTransition):
        decide(fold(events), RequestCancel(by="b"), NOW)


def test_promotion_moves_a_queued_job_up_without_using_an_attempt() -> None:
    events = history(QueueJob(), priority=1)
    new = decide(fold(events), PromoteJob(attempt=1, priority=Priority.MEDIUM, reason="waited 60 s"), NOW)
    assert new == [
        JobQueued(job_id=events[0].job_id, at=NOW, attempt=1, priority=Priority.MEDIUM, reason="waited 60 s")
    ]
    state = fold(events + new)
    assert state is not None and state.priority is Priority.MEDIUM and state.attempt == 1


@pytest.mark.parametrize("target", [Priority.LOW, Priority.MEDIUM])
def test_promotion_never_moves_down_or_sideways(target: Priority) -> None:
    events = history(QueueJob(), priority=2)
    with pytest.raises(InvalidTransition):
        decide(fold(events), PromoteJob(attempt=1, priority=target, reason=""), NOW)


def test_a_running_job_is_not_promoted() -> None:
    events = history(QueueJob(), StartAttempt(attempt=1, executor_id="e"))
    with pytest.raises(InvalidTransition):
        decide(fold(events), PromoteJob(attempt=1, priority=Priority.HIGH, reason=""), NOW)


def test_a_promoted_job_is_started_from_its_new_queue_only() -> None:
    events = history(QueueJob(), PromoteJob(attempt=1, priority=Priority.MEDIUM, reason="waited"), priority=1)
    state = fold(events)
    with pytest.raises(InvalidTransition, match="queued again at priority MEDIUM"):
        decide(state, StartAttempt(attempt=1, executor_id="e", priority=Priority.LOW), NOW)
    started = decide(state, StartAttempt(attempt=1, executor_id="e", priority=Priority.MEDIUM), NOW)
    assert [event.type for event in started] == ["started"]
    assert decide(state, StartAttempt(attempt=1, executor_id="e"), NOW)  # no queue named: any will do
