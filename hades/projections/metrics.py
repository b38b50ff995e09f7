"""The metrics read model: jobs per status, queue depth per priority, durations and throughput.

Durations are running time (started → finished) of finished jobs, with nearest-rank percentiles as the Go
dashboard computes them; throughput counts jobs that finished in the minute before the moment asked about.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hades.core.events import TERMINAL_TYPES, JobQueued, JobStarted, JobSubmitted
from hades.core.ports import Recorded
from hades.core.spec import Priority

THROUGHPUT_WINDOW = timedelta(minutes=1)  # only end times this close to the newest are kept
_STATUS_BY_TYPE = {"succeeded": "Succeeded", "failed": "Failed", "stopped": "Stopped"}


@dataclass
class TrackedJob:
    status: str
    priority: Priority
    started_at: datetime | None = None


@dataclass
class MetricsView:
    """Counters folded from the log; ``snapshot(now)`` answers the dashboard's questions."""

    jobs: dict[str, TrackedJob] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)
    queued: Counter[Priority] = field(default_factory=Counter)
    durations_ms: list[float] = field(default_factory=list)
    finished_at: list[datetime] = field(default_factory=list)
    last_seq: int = 0

    def apply(self, recorded: Recorded) -> None:
        """Fold one stored event (events at or below ``last_seq`` are ignored)."""
        if recorded.seq <= self.last_seq:
            return
        self.last_seq = recorded.seq
        event = recorded.event
        if isinstance(event, JobSubmitted):
            self.jobs[event.job_id] = TrackedJob(status="", priority=event.priority)
            self._move(event.job_id, "Queued")
            return
        job = self.jobs.get(event.job_id)
        if job is None:
            return
        if isinstance(event, JobQueued):
            self._move(event.job_id, "Queued", event.priority)
        elif isinstance(event, JobStarted):
            job.started_at = event.at
            self._move(event.job_id, "Running")
        elif event.type in TERMINAL_TYPES and job.status in ("Queued", "Running"):
            if job.started_at is not None:
                # appended, sorted when asked for: an insort into 100k durations moved the whole list per job
                self.durations_ms.append((event.at - job.started_at).total_seconds() * 1000)
            bisect.insort(self.finished_at, event.at)
            del self.finished_at[: bisect.bisect_left(self.finished_at, self.finished_at[-1] - THROUGHPUT_WINDOW)]
            self._move(event.job_id, _STATUS_BY_TYPE[event.type])
            del self.jobs[event.job_id]  # its status is counted; nothing later changes it

    def _move(self, job_id: str, status: str, priority: Priority | None = None) -> None:
        job = self.jobs[job_id]
        if job.status:
            self.statuses[job.status] -= 1
        if job.status == "Queued":
            self.queued[job.priority] -= 1
        job.status, job.priority = status, priority or job.priority
        self.statuses[status] += 1
        if status == "Queued":
            self.queued[job.priority] += 1

    def snapshot(self, now: datetime) -> dict[str, Any]:
        """Counts, queue depth, durations (avg, p50, p95) and jobs finished in the last minute."""
        minute_ago = bisect.bisect_right(self.finished_at, now - THROUGHPUT_WINDOW)
        by_priority = {p.value: self.queued[p] for p in (Priority.HIGH, Priority.MEDIUM, Priority.LOW)}
        self.durations_ms.sort()  # nearly sorted already (timsort: linear), and a no-op between two new jobs
        count = len(self.durations_ms)
        return {
            "statusCounts": {status: n for status, n in self.statuses.items() if n},
            "queueDepth": {"total": sum(by_priority.values()), "byPriority": by_priority},
            "durations": {
                "count": count,
                "avgMs": round(sum(self.durations_ms) / count, 1) if count else 0,
                "p50Ms": round(_nearest_rank(self.durations_ms, 0.50), 1),
                "p95Ms": round(_nearest_rank(self.durations_ms, 0.95), 1),
            },
            "throughputPerMin": len(self.finished_at) - minute_ago,
        }


def _nearest_rank(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return 0.0
    return ordered[max(math.ceil(fraction * len(ordered)), 1) - 1]
