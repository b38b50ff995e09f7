"""How jobs and events look on the wire: ISO 8601 UTC times, the Go Hades's names where it has them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hades.core.lifecycle import JobState, StepState
from hades.core.ports import Recorded
from hades.core.state import AttemptRun
from hades.projections.timing import JobTiming


def iso(moment: datetime | None) -> str | None:
    """``2026-12-02T17:00:00.123456Z``, or None."""
    if moment is None:
        return None
    offset = moment.utcoffset()
    if offset is None or offset:  # events are stored in UTC: converting is rarely needed, and it is the slow part
        moment = moment.astimezone(UTC)
    return moment.isoformat()[:-6] + "Z"


def parse_moment(text: str) -> datetime | None:
    """An ISO 8601 time with a zone (``Z`` or an offset), as UTC; None otherwise."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "+"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None


def job_detail(job: JobState, timing: JobTiming | None = None) -> dict[str, Any]:
    """``GET /jobs/{id}``: ``timeout_seconds`` is the one the job runs with, and ``requested_timeout_seconds``,
    present only where the deployment's timeout policy changed it, what its client asked."""
    requested = job.requested_timeout_seconds
    return {
        "id": job.job_id,
        "name": job.spec.name,
        "status": job.status.value,
        "reason": job.reason,
        "priority": job.priority.value,
        "attempt": job.attempt,
        "executor_id": job.executor_id,
        "executor_labels": job.executor_labels,
        "attempts": [_run(run) for run in job.runs],
        "submitted_at": iso(job.submitted_at),
        "queued_at": iso(job.queued_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "timeout_seconds": job.spec.timeout_seconds,
        "steps": [_step(job, step) for step in _steps(job)],
        "cancel_requested_by": job.cancel_requested_by,
        "logs_delivery": job.logs_delivery,
        "webhook_delivery": job.webhook_delivery,
        "timing": timing.summary() if timing is not None else None,
        **({"requested_timeout_seconds": requested} if requested is not None else {}),
    }


def _run(run: AttemptRun) -> dict[str, Any]:
    """Which executor took one attempt, with the labels it advertised (executor pools)."""
    return {
        "attempt": run.attempt,
        "executor_id": run.executor_id,
        "executor_labels": run.executor_labels,
        "started_at": iso(run.started_at),
    }


def _steps(job: JobState) -> list[StepState]:
    if job.steps:
        return list(job.steps)
    return [StepState(index=i, step_id=s.id) for i, s in enumerate(job.spec.steps)]


def _step(job: JobState, step: StepState) -> dict[str, Any]:
    spec = job.spec.steps[step.index]
    return {
        "index": step.index,
        "id": spec.id,
        "name": spec.name,
        "image": spec.image,
        "status": step.status.value,
        "exit_code": step.exit_code,
        "reason": step.reason,
        "started_at": iso(step.started_at),
        "finished_at": iso(step.finished_at),
    }


def event_row(recorded: Recorded) -> dict[str, Any]:
    """One entry of ``GET /jobs/{id}/events``: sequence, type, time, then the event's own fields."""
    body = recorded.event.model_dump(mode="json", exclude={"job_id", "at", "type", "version"}, exclude_none=True)
    if recorded.event.type == "submitted":
        body.pop("spec", None)
    return {"seq": recorded.seq, "type": recorded.event.type, "at": iso(recorded.event.at), **body}
