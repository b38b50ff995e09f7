"""The jobs read model: every job's current state, for the job list, status and detail routes.

The fold is the lifecycle's own ``evolve``, so the view can never disagree with what the workers decide. An
event that does not fit (a history damaged by hand) is counted and skipped rather than stopping the view.

A process following the log for months holds every job it ever saw, so an ended job is kept as an ``EndedJob``:
what lists and status answers need, without its payload (scripts, metadata, per-step states), which is most of a
job's size. Routes that show an ended job in full fold its history, which the event store keeps.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from datetime import datetime

from hades.core.errors import InvalidTransition
from hades.core.lifecycle import JobState, evolve
from hades.core.ports import Recorded
from hades.core.spec import JobSpec, Priority, Step
from hades.core.state import Status

log = logging.getLogger(__name__)

_ANY_STEP = Step.model_construct()


@dataclass(frozen=True, slots=True)
class EndedJob:
    """An ended job as the view keeps it: a few hundred bytes instead of the whole payload."""

    job_id: str
    name: str
    step_count: int
    priority: Priority
    status: Status
    submitted_at: datetime
    attempt: int
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    executor_id: str | None
    reason: str | None
    events: int
    cancel_requested_by: str | None
    logs_delivery: str | None
    logs_delivery_attempts: int
    webhook_delivery: str | None
    webhook_delivery_attempts: int

    @classmethod
    def of(cls, state: JobState) -> EndedJob:
        """The parts of an ended job's state that outlive it in memory."""
        executor = sys.intern(state.executor_id) if state.executor_id else None  # a few executors, many jobs
        return cls(
            job_id=state.job_id,
            name=state.name,
            step_count=state.step_count,
            priority=state.priority,
            status=state.status,
            submitted_at=state.submitted_at,
            attempt=state.attempt,
            queued_at=state.queued_at,
            started_at=state.started_at,
            finished_at=state.finished_at,
            executor_id=executor,
            reason=state.reason,
            events=state.events,
            cancel_requested_by=state.cancel_requested_by,
            logs_delivery=state.logs_delivery,
            logs_delivery_attempts=state.logs_delivery_attempts,
            webhook_delivery=state.webhook_delivery,
            webhook_delivery_attempts=state.webhook_delivery_attempts,
        )

    def revived(self) -> JobState:
        """A JobState to fold later events into (deliveries): right in every field but the payload's content."""
        spec = JobSpec.model_construct(name=self.name, steps=(_ANY_STEP,) * self.step_count)
        return JobState(
            job_id=self.job_id,
            spec=spec,
            priority=self.priority,
            status=self.status,
            submitted_at=self.submitted_at,
            attempt=self.attempt,
            queued_at=self.queued_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            executor_id=self.executor_id,
            reason=self.reason,
            events=self.events,
            cancel_requested_by=self.cancel_requested_by,
            logs_delivery=self.logs_delivery,
            logs_delivery_attempts=self.logs_delivery_attempts,
            webhook_delivery=self.webhook_delivery,
            webhook_delivery_attempts=self.webhook_delivery_attempts,
        )


#: What the view holds for one job.
JobRecord = JobState | EndedJob


@dataclass
class JobsView:
    """Jobs by id, in submission order, and the last stream sequence applied.

    ``retain_ended`` keeps ended jobs whole (for folding one job's history, or a short one, where size does not
    matter and the full state is the point).
    """

    jobs: dict[str, JobRecord] = field(default_factory=dict)
    active: set[str] = field(default_factory=set)
    last_seq: int = 0
    skipped: int = 0
    retain_ended: bool = False

    def apply(self, recorded: Recorded) -> None:
        """Fold one stored event into the view (events at or below ``last_seq`` are ignored)."""
        if recorded.seq <= self.last_seq:
            return
        self.last_seq = recorded.seq
        event = recorded.event
        current = self.jobs.get(event.job_id)
        try:
            state = evolve(current.revived() if isinstance(current, EndedJob) else current, event)
        except InvalidTransition as error:
            self.skipped += 1
            log.warning("jobs view skipped event %d: %s", recorded.seq, error)
            return
        if state.status.is_terminal:
            self.active.discard(event.job_id)
            self.jobs[event.job_id] = state if self.retain_ended else EndedJob.of(state)
        else:
            self.active.add(event.job_id)
            self.jobs[event.job_id] = state

    def get(self, job_id: str) -> JobRecord | None:
        """One job, or None."""
        return self.jobs.get(job_id)

    def state(self, job_id: str) -> JobState | None:
        """One job's whole state, if the view holds it (unfinished jobs, or every job with ``retain_ended``)."""
        job = self.jobs.get(job_id)
        return job if isinstance(job, JobState) else None

    def unfinished(self) -> list[JobState]:
        """Jobs not yet Succeeded, Failed or Stopped."""
        return [job for job_id in self.active if isinstance(job := self.jobs[job_id], JobState)]

    def ids(self) -> list[str]:
        """Every job id, oldest first."""
        return list(self.jobs)
