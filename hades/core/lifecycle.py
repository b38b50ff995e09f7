"""The job lifecycle as two pure functions: ``evolve(state, event)`` and ``decide(state, command, now)``.

``evolve`` folds one event into the job's state; ``decide`` turns a command into the events that should be
appended, or raises :class:`InvalidTransition`. Terminal states absorb: no command moves a finished job.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import assert_never

from hades.core.errors import InvalidTransition
from hades.core.events import (
    Event,
    JobFailed,
    JobQueued,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    StepFinished,
    StepOutcome,
    StepStarted,
)
from hades.core.spec import JobSpec, Priority

MAX_REASON_CHARS = 500


class Status(StrEnum):
    """The Go Hades's job statuses."""

    QUEUED = "Queued"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPED = "Stopped"

    @property
    def is_terminal(self) -> bool:
        """Succeeded, Failed and Stopped absorb every later command."""
        return self in (Status.SUCCEEDED, Status.FAILED, Status.STOPPED)


class StepStatus(StrEnum):
    """Where one step of the current attempt stands."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class StepState:
    """One step of the current attempt."""

    index: int
    step_id: int
    status: StepStatus = StepStatus.PENDING
    exit_code: int | None = None
    reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_log_seq: int | None = None


@dataclass(frozen=True, slots=True)
class JobState:
    """Everything the lifecycle needs to know about one job, folded from its events."""

    job_id: str
    spec: JobSpec
    priority: Priority
    status: Status
    submitted_at: datetime
    attempt: int = 0
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    executor_id: str | None = None
    reason: str | None = None
    steps: tuple[StepState, ...] = ()
    events: int = 0

    @property
    def awaiting_queue(self) -> bool:
        """Submitted (or handed back) but not yet in a priority queue."""
        return self.status is Status.QUEUED and self.queued_at is None


# -- commands ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SubmitJob:
    """Accept a validated job."""

    job_id: str
    spec: JobSpec
    submitted_by: str | None = None


@dataclass(frozen=True, slots=True)
class QueueJob:
    """Put the job's next attempt into its priority queue."""


@dataclass(frozen=True, slots=True)
class StartAttempt:
    """An executor takes the queued attempt."""

    attempt: int
    executor_id: str


@dataclass(frozen=True, slots=True)
class StartStep:
    """The executor starts the next step."""

    attempt: int
    step_index: int


@dataclass(frozen=True, slots=True)
class FinishStep:
    """A step ended with an exit code, or an error that kept it from running (``error``)."""

    attempt: int
    step_index: int
    exit_code: int | None
    error: str | None = None
    last_log_seq: int | None = None


@dataclass(frozen=True, slots=True)
class RequeueJob:
    """Hand the attempt back to the queue as a new attempt (executor shutting down, executor lost)."""

    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class FailJob:
    """End the job as failed (set-up errors, timeouts, engine trouble)."""

    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class StopJob:
    """End the job as stopped (cancel)."""

    attempt: int
    reason: str


Command = SubmitJob | QueueJob | StartAttempt | StartStep | FinishStep | RequeueJob | FailJob | StopJob


# -- evolve -----------------------------------------------------------------------------------------------------


def evolve(state: JobState | None, event: Event) -> JobState:
    """Fold one event into the job's state."""
    if isinstance(event, JobSubmitted):
        if state is not None:
            raise InvalidTransition(f"job {event.job_id} was submitted twice")
        return JobState(
            job_id=event.job_id,
            spec=event.spec,
            priority=event.priority,
            status=Status.QUEUED,
            submitted_at=event.at,
            events=1,
        )
    if state is None:
        raise InvalidTransition(f"job {event.job_id}: {event.type} before submitted")
    return replace(_evolve_existing(state, event), events=state.events + 1)


def _evolve_existing(state: JobState, event: Event) -> JobState:
    match event:
        case JobSubmitted():
            raise InvalidTransition(f"job {event.job_id} was submitted twice")
        case JobQueued():
            return replace(
                state,
                status=Status.QUEUED,
                attempt=event.attempt,
                priority=event.priority,
                queued_at=event.at,
                executor_id=None,
                reason=event.reason,
                started_at=None,
                steps=(),
            )
        case JobStarted():
            steps = tuple(StepState(index=i, step_id=s.id) for i, s in enumerate(state.spec.steps))
            return replace(
                state,
                status=Status.RUNNING,
                started_at=event.at,
                executor_id=event.executor_id,
                steps=steps,
                reason=None,
            )
        case StepStarted():
            return _with_step(state, event.step_index, status=StepStatus.RUNNING, started_at=event.at)
        case StepFinished():
            status = StepStatus.SUCCEEDED if event.outcome is StepOutcome.SUCCEEDED else StepStatus.FAILED
            return _with_step(
                state,
                event.step_index,
                status=status,
                exit_code=event.exit_code,
                reason=event.reason,
                finished_at=event.at,
                last_log_seq=event.last_log_seq,
            )
        case JobSucceeded():
            return replace(state, status=Status.SUCCEEDED, finished_at=event.at, reason=event.reason)
        case JobFailed():
            return replace(state, status=Status.FAILED, finished_at=event.at, reason=event.reason)
        case JobStopped():
            return replace(state, status=Status.STOPPED, finished_at=event.at, reason=event.reason)
        case _:
            assert_never(event)


def _with_step(state: JobState, index: int, **changes: object) -> JobState:
    if not 0 <= index < len(state.steps):
        raise InvalidTransition(f"job {state.job_id} has no step index {index}")
    steps = list(state.steps)
    steps[index] = replace(steps[index], **changes)  # type: ignore[arg-type]
    return replace(state, steps=tuple(steps))


def fold(events: list[Event]) -> JobState | None:
    """The state after a whole history (None for an empty one)."""
    state: JobState | None = None
    for event in events:
        state = evolve(state, event)
    return state


# -- decide -----------------------------------------------------------------------------------------------------


def decide(state: JobState | None, command: Command, now: datetime) -> list[Event]:
    """The events a command produces in this state; raises InvalidTransition when it does not apply."""
    if isinstance(command, SubmitJob):
        if state is not None:
            raise InvalidTransition(f"job {command.job_id} exists already")
        spec = command.spec.model_copy(update={"id": uuid.UUID(command.job_id)})
        return [
            JobSubmitted(
                job_id=command.job_id,
                at=now,
                spec=spec,
                priority=spec.priority_name,
                submitted_by=command.submitted_by,
            )
        ]
    if state is None:
        raise InvalidTransition(f"no such job for {type(command).__name__}")
    if state.status.is_terminal:
        raise InvalidTransition(f"job {state.job_id} is {state.status} already")
    return _decide_live(state, command, now)


def _decide_live(state: JobState, command: Command, now: datetime) -> list[Event]:
    match command:
        case SubmitJob():
            raise InvalidTransition(f"job {state.job_id} exists already")
        case QueueJob():
            return [_queue(state, now)]
        case StartAttempt():
            return _start_attempt(state, command, now)
        case StartStep():
            return [_start_step(state, command, now)]
        case FinishStep():
            return _finish_step(state, command, now)
        case RequeueJob() | FailJob() | StopJob():
            return [_end_attempt(state, command, now)]
        case _:
            assert_never(command)


def _queue(state: JobState, now: datetime) -> JobQueued:
    if not state.awaiting_queue:
        raise InvalidTransition(f"job {state.job_id} is queued already (attempt {state.attempt})")
    return JobQueued(job_id=state.job_id, at=now, attempt=state.attempt + 1, priority=state.priority)


def _start_attempt(state: JobState, command: StartAttempt, now: datetime) -> list[Event]:
    _require_queued(state, command.attempt)
    started = JobStarted(job_id=state.job_id, at=now, attempt=command.attempt, executor_id=command.executor_id)
    if not state.spec.steps:
        return [started, JobSucceeded(job_id=state.job_id, at=now, attempt=command.attempt)]
    return [started]


def _end_attempt(state: JobState, command: RequeueJob | FailJob | StopJob, now: datetime) -> Event:
    _require_attempt(state, command.attempt)
    job_id, attempt, reason = state.job_id, command.attempt, cap_reason(command.reason)
    if isinstance(command, RequeueJob):
        return JobQueued(job_id=job_id, at=now, attempt=attempt + 1, priority=state.priority, reason=reason)
    if isinstance(command, FailJob):
        return JobFailed(job_id=job_id, at=now, attempt=attempt, reason=reason)
    return JobStopped(job_id=job_id, at=now, attempt=attempt, reason=reason)


def _require_queued(state: JobState, attempt: int) -> None:
    if state.status is not Status.QUEUED or state.queued_at is None or state.attempt != attempt:
        raise InvalidTransition(f"job {state.job_id} is not queued for attempt {attempt}")


def _require_running(state: JobState, attempt: int) -> None:
    if state.status is not Status.RUNNING or state.attempt != attempt:
        raise InvalidTransition(f"job {state.job_id} is not running attempt {attempt}")


def _require_attempt(state: JobState, attempt: int) -> None:
    if state.attempt != attempt:
        raise InvalidTransition(f"job {state.job_id} is on attempt {state.attempt}, not {attempt}")


def _start_step(state: JobState, command: StartStep, now: datetime) -> StepStarted:
    _require_running(state, command.attempt)
    index = command.step_index
    if any(s.status is StepStatus.RUNNING for s in state.steps):
        raise InvalidTransition(f"job {state.job_id}: a step is still running")
    pending = [s.index for s in state.steps if s.status is StepStatus.PENDING]
    if not pending or pending[0] != index:
        raise InvalidTransition(f"job {state.job_id}: step index {index} is not the next step")
    step = state.spec.steps[index]
    return StepStarted(
        job_id=state.job_id,
        at=now,
        attempt=command.attempt,
        step_index=index,
        step_id=step.id,
        image=step.image,
    )


def _finish_step(state: JobState, command: FinishStep, now: datetime) -> list[Event]:
    _require_running(state, command.attempt)
    index = command.step_index
    if not 0 <= index < len(state.steps) or state.steps[index].status is not StepStatus.RUNNING:
        raise InvalidTransition(f"job {state.job_id}: step index {index} is not running")
    step = state.spec.steps[index]
    reason = command.error or None
    if reason is None and command.exit_code not in (0, None):
        reason = f"container exited with status {command.exit_code}"
    succeeded = reason is None
    finished = StepFinished(
        job_id=state.job_id,
        at=now,
        attempt=command.attempt,
        step_index=index,
        step_id=step.id,
        outcome=StepOutcome.SUCCEEDED if succeeded else StepOutcome.FAILED,
        exit_code=command.exit_code,
        reason=cap_reason(reason) if reason else None,
        tolerated=not succeeded and step.continue_on_error,
        last_log_seq=command.last_log_seq,
    )
    events: list[Event] = [finished]
    if not succeeded and not step.continue_on_error:
        events.append(JobFailed(job_id=state.job_id, at=now, attempt=command.attempt, reason=finished.reason or ""))
    elif index == len(state.steps) - 1:
        events.append(JobSucceeded(job_id=state.job_id, at=now, attempt=command.attempt))
    return events


def cap_reason(reason: str) -> str:
    """Reasons are capped at 500 characters plus an ellipsis, as the Go Hades does."""
    return reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + "…"
