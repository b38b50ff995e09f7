"""Folding a job's events into its state: ``evolve(state, event)`` for one event, ``fold(events)`` for a history.

Pure, and on the hottest path Hades has: replay and every projection fold each event of the log through here, so
it avoids the slow parts of Python 3.11 it can (enum members read as module globals, states copied from a template
with ``replace`` rather than built). The decisions that append events are in :mod:`hades.core.lifecycle`.
"""

from __future__ import annotations

from typing import assert_never

from hades.core.delivery import evolve_delivery
from hades.core.errors import InvalidTransition
from hades.core.events import (
    ArtifactsStored,
    Event,
    JobCancelRequested,
    JobFailed,
    JobMarkedSchedulable,
    JobMarkedUnschedulable,
    JobPrepared,
    JobQueued,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    LogsForwarded,
    LogsForwardFailed,
    StageEnded,
    StageLaunched,
    StagesAdded,
    StepFinished,
    StepOutcome,
    StepStarted,
    WebhookDelivered,
    WebhookFailed,
)
from hades.core.pipeline import PipelineEventError, PipelineProgress, evolve_pipeline
from hades.core.state import PENDING_STEP, UNSUBMITTED, AttemptRun, JobState, Status, StepStatus, replace

# The members evolve sets, as module globals: ``Status.RUNNING`` is an ``EnumType`` lookup of ~130 ns on Python
# 3.11 (a global ~8 ns), and replay folds every event of the log through here.
_QUEUED, _RUNNING = Status.QUEUED, Status.RUNNING
_STEP_RUNNING, _STEP_SUCCEEDED, _STEP_FAILED = StepStatus.RUNNING, StepStatus.SUCCEEDED, StepStatus.FAILED
_OUTCOME_SUCCEEDED = StepOutcome.SUCCEEDED


def evolve(state: JobState | None, event: Event) -> JobState:
    """Fold one event into the job's state."""
    if state is not None:
        return _evolve_existing(state, event, state.events + 1)
    if isinstance(event, JobSubmitted):
        return replace(  # JobState(...) with every required field, a copy of the defaults for the rest
            UNSUBMITTED,
            job_id=event.job_id,
            spec=event.spec,
            priority=event.priority,
            status=_QUEUED,
            submitted_at=event.at,
            events=1,
            pipeline=event.pipeline,
            progress=PipelineProgress() if event.spec.is_pipeline else None,
            max_attempts=event.max_attempts,
            requested_timeout_seconds=event.requested_timeout_seconds,
        )
    raise InvalidTransition(f"job {event.job_id}: {event.type} before submitted")


def _evolve_existing(state: JobState, event: Event, n: int) -> JobState:  # noqa: C901 - flat dispatch
    """The next state, its event count ``n`` set in the same copy (the fold copies the state once an event).

    The kinds are matched most frequent first (each case is an isinstance check): a job's steps, then its attempt.
    """
    match event:
        case StepStarted():
            return _with_step(state, n, event.step_index, status=_STEP_RUNNING, started_at=event.at)
        case StepFinished():
            return _with_step(
                state,
                n,
                event.step_index,
                status=_STEP_SUCCEEDED if event.outcome is _OUTCOME_SUCCEEDED else _STEP_FAILED,
                exit_code=event.exit_code,
                reason=event.reason,
                finished_at=event.at,
                last_log_seq=event.last_log_seq,
            )
        case JobQueued():
            return replace(
                state,
                status=_QUEUED,
                attempt=event.attempt,
                priority=event.priority,
                queued_at=event.at,
                executor_id=None,
                reason=event.reason,
                started_at=None,
                steps=(),
                events=n,
            )
        case JobStarted():
            return _started(state, event, n)
        case JobPrepared():
            return replace(state, events=n)
        case JobSucceeded() | JobFailed() | JobStopped():
            return _ended(state, event, n)
        case LogsForwarded() | LogsForwardFailed() | WebhookDelivered() | WebhookFailed():
            return replace(evolve_delivery(state, event), events=n)
        case JobMarkedUnschedulable() | JobMarkedSchedulable():
            return _placement_marked(state, event, n)
        case JobCancelRequested():
            return replace(state, cancel_requested_by=event.by, cancel_reason=event.reason or None, events=n)
        case ArtifactsStored():
            return replace(state, events=n)  # the list is read from the history; the status stays
        case StageLaunched() | StagesAdded() | StageEnded():
            return _pipeline_moved(state, event, n)
        case JobSubmitted():
            raise InvalidTransition(f"job {event.job_id} was submitted twice")
        case _:
            assert_never(event)


def _started(state: JobState, event: JobStarted, n: int) -> JobState:
    steps = tuple(replace(PENDING_STEP, index=i, step_id=s.id) for i, s in enumerate(state.spec.steps))
    labels = event.executor_labels or {}
    run = AttemptRun(attempt=event.attempt, executor_id=event.executor_id, executor_labels=labels, started_at=event.at)
    return replace(
        state,
        status=_RUNNING,
        started_at=event.at,
        executor_id=event.executor_id,
        executor_labels=event.executor_labels,
        runs=(*state.runs, run),
        unschedulable_since=None,
        steps=steps,
        reason=None,
        events=n,
    )


def _pipeline_moved(state: JobState, event: StageLaunched | StagesAdded | StageEnded, n: int) -> JobState:
    """A pipeline's own event; the first stage launched makes it Running."""
    if state.progress is None or state.status.is_terminal:
        raise InvalidTransition(f"job {state.job_id}: {event.type} on a job that is not a running pipeline")
    try:
        progress = evolve_pipeline(state.progress, state.spec, event)
    except PipelineEventError as error:
        raise InvalidTransition(f"pipeline {state.job_id}: {error}") from error
    if isinstance(event, StageLaunched) and state.status is _QUEUED:
        return replace(state, progress=progress, status=_RUNNING, started_at=event.at, events=n)
    return replace(state, progress=progress, events=n)


def _placement_marked(state: JobState, event: JobMarkedUnschedulable | JobMarkedSchedulable, n: int) -> JobState:
    if isinstance(event, JobMarkedSchedulable):
        return replace(state, reason=None, unschedulable_since=None, events=n)
    since = state.unschedulable_since or event.at  # a changed reason keeps the first moment, for the timeout
    return replace(state, reason=event.reason, unschedulable_since=since, events=n)


_ENDS = {"succeeded": Status.SUCCEEDED, "failed": Status.FAILED, "stopped": Status.STOPPED}


def _ended(state: JobState, event: JobSucceeded | JobFailed | JobStopped, n: int) -> JobState:
    """The job's end; a step still running then (killed by the timeout or a cancel) ended with it."""
    steps = state.steps
    for step in steps:  # a loop, not any() over a generator: a job has a few steps
        if step.status is _STEP_RUNNING:
            steps = tuple(
                replace(step, status=_STEP_FAILED, reason=event.reason, finished_at=event.at)
                if step.status is _STEP_RUNNING
                else step
                for step in steps
            )
            break
    return replace(state, status=_ENDS[event.type], finished_at=event.at, reason=event.reason, steps=steps, events=n)


def _with_step(state: JobState, n: int, index: int, **changes: object) -> JobState:
    steps = state.steps
    if not 0 <= index < len(steps):
        raise InvalidTransition(f"job {state.job_id} has no step index {index}")
    return replace(state, steps=(*steps[:index], replace(steps[index], **changes), *steps[index + 1 :]), events=n)


def fold(events: list[Event]) -> JobState | None:
    """The state after a whole history (None for an empty one)."""
    state: JobState | None = None
    for event in events:
        state = evolve(state, event)
    return state
