"""The jobs read model: every job's current state, for the job list, status and detail routes.

The fold is the lifecycle's own ``evolve``, so the view can never disagree with what the workers decide. An
event that does not fit (a history damaged by hand) is counted and skipped rather than stopping the view.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from hades.core.errors import InvalidTransition
from hades.core.lifecycle import JobState, evolve
from hades.core.ports import Recorded

log = logging.getLogger(__name__)


@dataclass
class JobsView:
    """Jobs by id, in submission order, and the last stream sequence applied."""

    jobs: dict[str, JobState] = field(default_factory=dict)
    active: set[str] = field(default_factory=set)
    last_seq: int = 0
    skipped: int = 0

    def apply(self, recorded: Recorded) -> None:
        """Fold one stored event into the view (events at or below ``last_seq`` are ignored)."""
        if recorded.seq <= self.last_seq:
            return
        self.last_seq = recorded.seq
        event = recorded.event
        try:
            state = evolve(self.jobs.get(event.job_id), event)
        except InvalidTransition as error:
            self.skipped += 1
            log.warning("jobs view skipped event %d: %s", recorded.seq, error)
            return
        self.jobs[event.job_id] = state
        if state.status.is_terminal:
            self.active.discard(event.job_id)
        else:
            self.active.add(event.job_id)

    def get(self, job_id: str) -> JobState | None:
        """One job, or None."""
        return self.jobs.get(job_id)

    def unfinished(self) -> list[JobState]:
        """Jobs not yet Succeeded, Failed or Stopped."""
        return [self.jobs[job_id] for job_id in self.active]

    def ids(self) -> list[str]:
        """Every job id, oldest first."""
        return list(self.jobs)
