"""Snapshots of the read models: everything folded up to a stream sequence, as JSON, so a restart can resume
from there instead of replaying the whole log.

A snapshot is only a shortcut: it is valid state at its sequence whoever wrote it, an unreadable or older-format
one is ignored (the caller replays from the start), and the log stays the truth.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from pydantic import BaseModel, ConfigDict, TypeAdapter

from hades.core.spec import Priority
from hades.core.state import JobState
from hades.projections.distributions import PhaseDistributions
from hades.projections.jobs import EndedJob, JobsView
from hades.projections.metrics import MetricsView, TrackedJob
from hades.projections.timing import JobTiming, TimingView
from hades.projections.views import ReadModels

#: Bump when the shape of a view changes: older snapshots are then ignored and the log is replayed.
SNAPSHOT_FORMAT = 6


class _Metrics(BaseModel):
    jobs: dict[str, TrackedJob]
    statuses: dict[str, int]
    queued: dict[Priority, int]
    durations_ms: list[float]
    finished_at: list[datetime]


class Snapshot(BaseModel):
    """The read models at ``seq``."""

    model_config = ConfigDict(arbitrary_types_allowed=False)

    format: int = SNAPSHOT_FORMAT
    seq: int
    jobs: dict[str, JobState | EndedJob]
    skipped: int = 0
    timing: dict[str, JobTiming]
    metrics: _Metrics
    distributions: PhaseDistributions


_SNAPSHOT = TypeAdapter(Snapshot)


def take(views: ReadModels) -> bytes:
    """The views as JSON (call between two events: the fold is not re-entrant, so this is consistent)."""
    metrics = views.metrics
    snapshot = Snapshot(
        seq=views.jobs.last_seq,
        jobs=views.jobs.jobs,
        skipped=views.jobs.skipped,
        timing=views.timing.jobs,
        metrics=_Metrics(
            jobs=metrics.jobs,
            statuses=dict(metrics.statuses),
            queued=dict(metrics.queued),
            durations_ms=metrics.durations_ms,
            finished_at=metrics.finished_at,
        ),
        distributions=views.distributions,
    )
    return snapshot.model_dump_json().encode()


def restore(data: bytes) -> ReadModels | None:
    """The views a snapshot holds, or None when it is of another format or damaged."""
    try:
        snapshot = _SNAPSHOT.validate_json(data)
    except ValueError:
        return None
    if snapshot.format != SNAPSHOT_FORMAT:
        return None
    seq = snapshot.seq
    jobs = JobsView(jobs=snapshot.jobs, last_seq=seq, skipped=snapshot.skipped)
    jobs.active = {job_id for job_id, state in snapshot.jobs.items() if not state.status.is_terminal}
    m = snapshot.metrics
    metrics = MetricsView(
        jobs=m.jobs,
        statuses=Counter(m.statuses),
        queued=Counter(m.queued),
        durations_ms=m.durations_ms,
        finished_at=m.finished_at,
        last_seq=seq,
    )
    timing = TimingView(jobs=snapshot.timing, last_seq=seq)
    return ReadModels(jobs=jobs, timing=timing, metrics=metrics, distributions=snapshot.distributions)
