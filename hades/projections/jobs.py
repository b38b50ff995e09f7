"""The jobs read model: every job's current state, for the job list, status and detail routes.

The fold is the lifecycle's own ``evolve``, so the view can never disagree with what the workers decide. An
event that does not fit (a history damaged by hand) is counted and skipped rather than stopping the view.

A process following the log for months holds every job it ever saw, so an ended job is kept as an ``EndedJob``:
what lists and status answers need, without its payload (scripts, metadata, per-step states), which is most of a
job's size. Routes that show an ended job in full fold its history, which the event store keeps.
"""

from __future__ import annotations

import logging
import operator
import sys
from dataclasses import dataclass, field, fields
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
        kept = _kept(state)  # name and step_count are JobState properties
        if state.executor_id:  # a few executors, many jobs: one string each
            kept = (*kept[:_EXECUTOR], sys.intern(state.executor_id), *kept[_EXECUTOR + 1 :])
        return cls(*kept)

    def revived(self) -> JobState:
        """A JobState to fold later events into (deliveries): right in every field but the payload's content."""
        spec = JobSpec.model_construct(name=self.name, steps=(_ANY_STEP,) * self.step_count)
        carried = {name: getattr(self, name) for name in _KEPT if name not in ("name", "step_count")}
        return JobState(spec=spec, **carried)


_KEPT = tuple(f.name for f in fields(EndedJob))
_kept = operator.attrgetter(*_KEPT)  # the kept values in field order, in one call
_EXECUTOR = _KEPT.index("executor_id")

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
        job_id = event.job_id
        current = self.jobs.get(job_id)
        try:
            state = evolve(current.revived() if isinstance(current, EndedJob) else current, event)
        except InvalidTransition as error:
            self.skipped += 1
            log.warning("jobs view skipped event %d: %s", recorded.seq, error)
            return
        if state.status.is_terminal:
            self.active.discard(job_id)
            self.jobs[job_id] = state if self.retain_ended else EndedJob.of(state)
        else:
            self.active.add(job_id)
            self.jobs[job_id] = state

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
