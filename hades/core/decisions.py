"""The decisions that produce one event from a job's state alone, and the guards every decision shares.

``decide`` in :mod:`hades.core.lifecycle` dispatches to them; the decisions after which the job's end may be due
(starting an attempt, finishing a step, asking for a cancel) stay there, with ``conclusion``, because they fold
their event to see.
"""

from __future__ import annotations

from datetime import datetime

from hades.core.commands import (
    FailJob,
    MarkSchedulable,
    MarkUnschedulable,
    PromoteJob,
    RecordArtifacts,
    RequeueJob,
    StartStep,
    StopJob,
)
from hades.core.errors import InvalidTransition
from hades.core.events import (
    ArtifactsStored,
    Event,
    FollowUps,
    JobFailed,
    JobMarkedSchedulable,
    JobMarkedUnschedulable,
    JobQueued,
    JobStopped,
    StepStarted,
)
from hades.core.reasons import cap_reason
from hades.core.spec import Priority
from hades.core.state import JobState, Status, StepStatus


def queued(state: JobState, now: datetime, attempt: int, priority: Priority, reason: str | None) -> JobQueued:
    """Every queued event of a job carries its pool, so each of its attempts waits for the same executors."""
    placement = state.spec.placement
    pool = placement.key if placement is not None else None
    return JobQueued(job_id=state.job_id, at=now, attempt=attempt, priority=priority, reason=reason, pool=pool)


def queue(state: JobState, now: datetime) -> JobQueued:
    if state.progress is not None:
        raise InvalidTransition(f"job {state.job_id} is a pipeline: its stages are queued, never itself")
    if not state.awaiting_queue:
        raise InvalidTransition(f"job {state.job_id} is queued already (attempt {state.attempt})")
    return queued(state, now, state.attempt + 1, state.priority, None)


def placement_verdict(
    state: JobState, command: MarkUnschedulable | MarkSchedulable, now: datetime
) -> JobMarkedUnschedulable | JobMarkedSchedulable:
    """Record whether a live executor can take the queued attempt; only a change is recorded."""
    require_queued(state, command.attempt)
    marked = state.unschedulable_since is not None
    if isinstance(command, MarkSchedulable):
        if not marked:
            raise InvalidTransition(f"job {state.job_id} is not marked unschedulable")
        return JobMarkedSchedulable(job_id=state.job_id, at=now, attempt=command.attempt)
    reason = cap_reason(command.reason)
    if marked and state.reason == reason:
        raise InvalidTransition(f"job {state.job_id} is marked unschedulable already: {reason}")
    return JobMarkedUnschedulable(job_id=state.job_id, at=now, attempt=command.attempt, reason=reason)


def promote(state: JobState, command: PromoteJob, now: datetime) -> JobQueued:
    require_queued(state, command.attempt)
    if command.priority.as_int <= state.priority.as_int:
        raise InvalidTransition(f"job {state.job_id} is {state.priority} already, not below {command.priority}")
    return queued(state, now, command.attempt, command.priority, command.reason)


def _cancel_reason(by: str, said: str | None) -> str:
    return cap_reason(f"cancelled by {by}: {said}" if said else f"cancelled by {by}")


def end_attempt(state: JobState, command: RequeueJob | FailJob | StopJob, now: datetime) -> Event:
    require_attempt(state, command.attempt)
    job_id, attempt, reason = state.job_id, command.attempt, cap_reason(command.reason)
    if isinstance(command, RequeueJob) and state.cancel_requested_by is not None:
        # Handed back after a cancel was asked for: the job stops rather than run again.
        reason = cancel_reason(state)
        return JobStopped(job_id=job_id, at=now, attempt=attempt, reason=reason, follow_ups=follow_ups(state))
    if isinstance(command, RequeueJob):
        return queued(state, now, attempt + 1, state.priority, reason)
    if isinstance(command, FailJob):
        return JobFailed(job_id=job_id, at=now, attempt=attempt, reason=reason, follow_ups=follow_ups(state))
    return JobStopped(job_id=job_id, at=now, attempt=attempt, reason=reason, follow_ups=follow_ups(state))


def record_artifacts(state: JobState, command: RecordArtifacts, now: datetime) -> ArtifactsStored:
    """What the ended attempt kept; recorded after the job's end, so its terminal event is never held up."""
    if not state.status.is_terminal:
        raise InvalidTransition(f"job {state.job_id} is {state.status}: artifacts are kept once it has ended")
    require_attempt(state, command.attempt)
    return ArtifactsStored(
        job_id=state.job_id, at=now, attempt=command.attempt, files=command.files, skipped=command.skipped
    )


def follow_ups(state: JobState) -> FollowUps:
    """What the job's end sets going, for its terminal event: from its spec and its pipeline."""
    spec = state.spec
    pipeline = state.pipeline.id if state.pipeline is not None else None
    return FollowUps(logs=bool(spec.callback_url), webhook=bool(spec.status_callback_url), pipeline=pipeline)


def cancel_reason(state: JobState) -> str:
    """The reason a cancelled job's ``stopped`` event gives."""
    return _cancel_reason(state.cancel_requested_by or "unknown", state.cancel_reason)


def require_queued(state: JobState, attempt: int) -> None:
    if state.status is not Status.QUEUED or state.queued_at is None or state.attempt != attempt:
        raise InvalidTransition(f"job {state.job_id} is not queued for attempt {attempt}")


def require_running(state: JobState, attempt: int) -> None:
    if state.status is not Status.RUNNING or state.attempt != attempt:
        raise InvalidTransition(f"job {state.job_id} is not running attempt {attempt}")


def require_attempt(state: JobState, attempt: int) -> None:
    if state.attempt != attempt:
        raise InvalidTransition(f"job {state.job_id} is on attempt {state.attempt}, not {attempt}")


def start_step(state: JobState, command: StartStep, now: datetime) -> StepStarted:
    require_running(state, command.attempt)
    if state.cancel_requested_by is not None:
        raise InvalidTransition(f"job {state.job_id}: cancel requested by {state.cancel_requested_by}")
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
        prepare=command.prepare,
    )
