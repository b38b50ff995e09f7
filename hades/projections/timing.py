"""The timing read model: where each job's wall-clock time went, phase by phase, and how much was overhead.

Phases of a job (seconds): ``scheduling`` (submitted → first queued), ``queue_wait`` (queued → started, for the
attempt that finished), ``volume`` and ``images`` (preparing the attempt), and for each step ``create``,
``start``, ``run``, ``logs`` (draining its output) and ``teardown`` (removing the step's container where that
holds the job up: older histories have it; the Docker executor now removes containers after reporting the step,
off the job's path). ``run`` is the user's container executing; everything else is overhead, and ``overhead_pct``
is its share of submitted → finished.

A step the job's end interrupts (its timeout, a cancel, the executor failing it) has no ``step_finished``, so no
measured phases: it counts as ``run`` from its ``step_started`` until the job's end was decided, the earlier of the
timeout's deadline (the attempt's ``started`` plus ``timeout_seconds``), the first cancel request and the terminal
event. What follows, killing the step and recording the end, is Hades's: overhead. Its create and start (before the
user's code runs, unmeasured here) are counted in that run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hades.core.events import (
    JobCancelRequested,
    JobFailed,
    JobPrepared,
    JobQueued,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    StepFinished,
    StepStarted,
)
from hades.core.ports import Recorded

STEP_PHASES = ("create", "start", "run", "logs", "teardown")


@dataclass
class StepTiming:
    """One step of the timed attempt."""

    index: int
    step_id: int
    started_at: datetime | None = None
    finished_at: datetime | None = None
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class JobTiming:
    """The moments of one job and the phases the executor measured."""

    job_id: str
    submitted_at: datetime
    timeout_seconds: int = 0
    cancel_requested_at: datetime | None = None
    first_queued_at: datetime | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempt: int = 0
    prepare: dict[str, float] = field(default_factory=dict)
    steps: dict[int, StepTiming] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The phase breakdown as plain data (seconds; None where the job has not got that far)."""
        phases, total, overhead = self.breakdown()
        return {
            "total": total,
            "phases": phases,
            "overhead": overhead,
            "overhead_pct": None if not total or overhead is None else round(100 * overhead / total, 1),
            "steps": [
                {"index": s.index, "step_id": s.step_id, **{k: s.phases.get(k) for k in STEP_PHASES}}
                for s in sorted(self.steps.values(), key=lambda s: s.index)
            ],
        }

    def breakdown(self) -> tuple[dict[str, float | None], float | None, float | None]:
        """The phases, the total and the overhead of :meth:`summary` (what the phase histograms take of every
        job as it ends, without the per-step list)."""
        phases: dict[str, float | None] = {
            "scheduling": _span(self.submitted_at, self.first_queued_at),
            "queue_wait": _span(self.queued_at, self.started_at),
            "volume": self.prepare.get("volume"),
            "images": self.prepare.get("images"),
        }
        steps = [step.phases for step in self.steps.values()]
        for name in STEP_PHASES:
            values = [step[name] for step in steps if name in step]
            phases[name] = round(sum(values), 6) if values else None
        total = _span(self.submitted_at, self.finished_at)
        run = phases["run"] or 0.0
        overhead = None if total is None else round(max(total - run, 0.0), 6)
        return phases, total, overhead


def _span(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 6)


@dataclass
class TimingView:
    """Timing of every job, and the last stream sequence applied."""

    jobs: dict[str, JobTiming] = field(default_factory=dict)
    last_seq: int = 0
    #: Called with each job as it ends, in order (the phase histograms, the timing log line).
    on_finished: list[Callable[[JobTiming], None]] = field(default_factory=list, compare=False, repr=False)
    #: Keep ended jobs' timing (else it is handed to ``on_finished`` and dropped: a long-lived process would
    #: otherwise hold every job's phases; the detail routes fold an ended job's history instead).
    retain_ended: bool = False

    def apply(self, recorded: Recorded) -> None:
        """Fold one stored event (events at or below ``last_seq`` are ignored)."""
        if recorded.seq <= self.last_seq:
            return
        self.last_seq = recorded.seq
        event = recorded.event
        if isinstance(event, JobSubmitted):
            self.jobs[event.job_id] = JobTiming(
                job_id=event.job_id, submitted_at=event.at, timeout_seconds=event.spec.timeout_seconds
            )
            return
        timing = self.jobs.get(event.job_id)
        if timing is not None:
            was_finished = timing.finished_at is not None
            _fold(timing, event)
            if not was_finished and timing.finished_at is not None:
                for listener in self.on_finished:
                    listener(timing)
                if not self.retain_ended:
                    del self.jobs[event.job_id]

    def get(self, job_id: str) -> JobTiming | None:
        """One job's timing, or None."""
        return self.jobs.get(job_id)


def _fold(timing: JobTiming, event: object) -> None:
    # most frequent first: a job's steps, then its attempt
    if isinstance(event, StepStarted):
        timing.steps[event.step_index] = StepTiming(index=event.step_index, step_id=event.step_id, started_at=event.at)
        if event.prepare is not None:
            timing.prepare = dict(event.prepare)
    elif isinstance(event, StepFinished):
        step = timing.steps.get(event.step_index)
        if step is None:
            step = timing.steps[event.step_index] = StepTiming(index=event.step_index, step_id=event.step_id)
        step.finished_at, step.phases = event.at, dict(event.phases)
    elif isinstance(event, JobQueued):
        timing.first_queued_at = timing.first_queued_at or event.at
        timing.queued_at, timing.attempt = event.at, event.attempt
        timing.started_at, timing.prepare, timing.steps = None, {}, {}
    elif isinstance(event, JobStarted):
        timing.started_at = event.at
    elif isinstance(event, JobPrepared):
        timing.prepare = dict(event.phases)
    elif isinstance(event, JobCancelRequested):
        timing.cancel_requested_at = timing.cancel_requested_at or event.at
    elif isinstance(event, JobSucceeded | JobFailed | JobStopped):
        _ended(timing, event.at)


def _ended(timing: JobTiming, end: datetime) -> None:
    """The job ended: each step it interrupted (started, never finished) gets the run the module docstring says."""
    timing.finished_at = until = end
    if timing.timeout_seconds and timing.started_at is not None:
        until = min(until, timing.started_at + timedelta(seconds=timing.timeout_seconds))
    if timing.cancel_requested_at is not None:
        until = min(until, timing.cancel_requested_at)
    for step in timing.steps.values():
        if step.started_at is not None and step.finished_at is None:
            step.phases = {"run": max(round((until - step.started_at).total_seconds(), 6), 0.0)}
