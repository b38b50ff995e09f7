"""The job lifecycle as two pure functions: ``evolve(state, event)`` and ``decide(state, command, now)``.

``evolve`` folds one event into the job's state; ``decide`` turns a command into the events that should be
appended, or raises :class:`InvalidTransition`. Terminal states absorb: no command moves a finished job.
The state lives in :mod:`hades.core.state`, the fold in :mod:`hades.core.evolve`, the commands in
:mod:`hades.core.commands`, and the decisions that need no more than the state in :mod:`hades.core.decisions`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import assert_never

from hades.core.commands import (
    Command,
    ConcludeJob,
    FailJob,
    FinishStep,
    MarkPrepared,
    MarkSchedulable,
    MarkUnschedulable,
    PromoteJob,
    QueueJob,
    RecordArtifacts,
    RecordLogsDelivery,
    RecordWebhookDelivery,
    RequestCancel,
    RequeueJob,
    StartAttempt,
    StartStep,
    StopJob,
    SubmitJob,
    hand_back,
)
from hades.core.decisions import (
    cancel_reason,
    end_attempt,
    follow_ups,
    placement_verdict,
    promote,
    queue,
    record_artifacts,
    require_queued,
    require_running,
    start_step,
)
from hades.core.delivery import decide_delivery
from hades.core.errors import InvalidTransition
from hades.core.events import (
    Event,
    JobCancelRequested,
    JobFailed,
    JobPrepared,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    StepFinished,
    StepOutcome,
)
from hades.core.evolve import evolve, fold
from hades.core.reasons import MAX_REASON_CHARS, cap_reason
from hades.core.state import JobState, Status, StepState, StepStatus

__all__ = [
    "MAX_REASON_CHARS",
    "Command",
    "ConcludeJob",
    "FailJob",
    "FinishStep",
    "JobState",
    "MarkPrepared",
    "MarkSchedulable",
    "MarkUnschedulable",
    "PromoteJob",
    "QueueJob",
    "RecordArtifacts",
    "RecordLogsDelivery",
    "RecordWebhookDelivery",
    "RequestCancel",
    "RequeueJob",
    "StartAttempt",
    "StartStep",
    "Status",
    "StepState",
    "StepStatus",
    "StopJob",
    "SubmitJob",
    "cancel_reason",
    "cap_reason",
    "conclusion",
    "decide",
    "evolve",
    "fold",
    "hand_back",
]


# -- decide -----------------------------------------------------------------------------------------------------


def decide(state: JobState | None, command: Command, now: datetime) -> list[Event]:
    """The events a command produces in this state; raises InvalidTransition when it does not apply."""
    if isinstance(command, SubmitJob):
        if state is not None:
            raise InvalidTransition(f"job {command.job_id} exists already")
        spec, requested = command.timeouts.applied(command.spec)
        spec = spec.model_copy(update={"id": uuid.UUID(command.job_id)})
        return [
            JobSubmitted(
                job_id=command.job_id,
                at=now,
                spec=spec,
                priority=spec.priority_name,
                submitted_by=command.submitted_by,
                max_attempts=command.max_attempts,
                requested_timeout_seconds=requested,
            )
        ]
    if state is None:
        raise InvalidTransition(f"no such job for {type(command).__name__}")
    if isinstance(command, RecordLogsDelivery | RecordWebhookDelivery):
        return [decide_delivery(state, command, now)]
    if isinstance(command, RecordArtifacts):
        return [record_artifacts(state, command, now)]
    if state.status.is_terminal:
        raise InvalidTransition(f"job {state.job_id} is {state.status} already")
    return _decide_live(state, command, now)


def _decide_live(state: JobState, command: Command, now: datetime) -> list[Event]:  # noqa: C901 - flat dispatch
    match command:
        case SubmitJob():
            raise InvalidTransition(f"job {state.job_id} exists already")
        case QueueJob():
            return [queue(state, now)]
        case StartAttempt():
            return _start_attempt(state, command, now)
        case MarkUnschedulable() | MarkSchedulable():
            return [placement_verdict(state, command, now)]
        case MarkPrepared():
            require_running(state, command.attempt)
            return [JobPrepared(job_id=state.job_id, at=now, attempt=command.attempt, phases=command.phases)]
        case StartStep():
            return [start_step(state, command, now)]
        case FinishStep():
            return _finish_step(state, command, now)
        case PromoteJob():
            return [promote(state, command, now)]
        case RequestCancel():
            return _request_cancel(state, command, now)
        case RecordLogsDelivery() | RecordWebhookDelivery():
            return [decide_delivery(state, command, now)]
        case RecordArtifacts():
            return [record_artifacts(state, command, now)]
        case RequeueJob() | FailJob() | StopJob():
            return [end_attempt(state, command, now)]
        case ConcludeJob():
            due = conclusion(state, now)
            if due is None:
                raise InvalidTransition(f"job {state.job_id} has no end due")
            return [due]
        case _:
            assert_never(command)


def conclusion(state: JobState, now: datetime) -> JobSucceeded | JobFailed | JobStopped | None:
    """The end the job's events already imply but do not record, if any.

    A running attempt ends once its last step finished, or as soon as a step failed that may not; a job that
    waits ends when a cancel was asked for. The decisions that reach such a state return this end after their
    own event (so the rule is written once, here), and the two are appended one after the other: a writer that
    stops in between leaves the end due, and whoever finds the job next (the scheduler's watchdog) appends it.
    """
    if state.status is Status.QUEUED and state.cancel_requested_by is not None:
        return JobStopped(
            job_id=state.job_id,
            at=now,
            attempt=state.attempt,
            reason=cancel_reason(state),
            follow_ups=follow_ups(state),
        )
    if state.status is not Status.RUNNING or state.progress is not None:  # a pipeline's end is the reconcile's
        return None
    for step, spec in zip(state.steps, state.spec.steps, strict=True):
        if step.status is StepStatus.FAILED and not spec.continue_on_error:
            reason = step.reason or ""
            return JobFailed(
                job_id=state.job_id, at=now, attempt=state.attempt, reason=reason, follow_ups=follow_ups(state)
            )
        if step.status is not StepStatus.SUCCEEDED and step.status is not StepStatus.FAILED:
            return None
    return JobSucceeded(job_id=state.job_id, at=now, attempt=state.attempt, follow_ups=follow_ups(state))


def _concluded(state: JobState, event: Event, now: datetime) -> list[Event]:
    """``event``, followed by the end it makes due."""
    due = conclusion(evolve(state, event), now)
    return [event] if due is None else [event, due]


def _start_attempt(state: JobState, command: StartAttempt, now: datetime) -> list[Event]:
    require_queued(state, command.attempt)
    if command.priority is not None and state.priority is not command.priority:
        raise InvalidTransition(f"job {state.job_id} was queued again at priority {state.priority.name}")
    if state.cancel_requested_by is not None:  # its stop is due (``conclusion``); nothing is set up for it
        raise InvalidTransition(f"job {state.job_id}: cancel requested by {state.cancel_requested_by}")
    started = JobStarted(
        job_id=state.job_id,
        at=now,
        attempt=command.attempt,
        executor_id=command.executor_id,
        executor_labels=command.executor_labels,
        claim=command.claim,
    )
    return _concluded(state, started, now)  # a job without steps is done at once


def _request_cancel(state: JobState, command: RequestCancel, now: datetime) -> list[Event]:
    if state.cancel_requested_by is not None:
        return []  # asked already; the first request stands
    requested = JobCancelRequested(job_id=state.job_id, at=now, by=command.by, reason=command.reason)
    return _concluded(state, requested, now)  # a waiting job stops at once; a running one's executor stops it


def _finish_step(state: JobState, command: FinishStep, now: datetime) -> list[Event]:
    require_running(state, command.attempt)
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
        phases=command.phases,
    )
    return _concluded(state, finished, now)
