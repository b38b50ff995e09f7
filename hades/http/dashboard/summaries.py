"""The dashboard's JSON shapes (contract 1.4, camelCase, empty fields omitted), built from the read models.

Everything a job's submitter wrote that may hold a secret (metadata, scripts, failure reasons) goes through the
redactor here, so no route can send it unredacted by forgetting to.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from hades.core.lifecycle import JobState, StepState
from hades.core.redact import Redactor
from hades.core.spec import Step
from hades.core.state import StepStatus
from hades.http.views import iso
from hades.projections.jobs import JobRecord
from hades.projections.timing import JobTiming
from hades.projections.views import ReadModels

ZERO_TIME = "0001-01-01T00:00:00Z"
STALE_UNFINISHED = timedelta(hours=24)


def updated_at(job: JobRecord) -> datetime:
    """When the job last changed state: finished, else started, else queued, else submitted."""
    return job.finished_at or job.started_at or job.queued_at or job.submitted_at


def _millis(job: JobRecord, now: datetime) -> int | None:
    if job.started_at is None:
        return None
    return int(((job.finished_at or now) - job.started_at).total_seconds() * 1000)


def job_summary(job: JobRecord, now: datetime, redactor: Redactor) -> dict[str, Any]:
    """JobSummary: id, name, priority, status, reason, stepCount, times, durationMs, attempt, updatedAt."""
    fields: dict[str, Any] = {
        "id": job.job_id,
        "name": job.name,
        "priority": job.priority.value,
        "status": job.status.value,
        "reason": redactor.text(job.reason) if job.reason else None,
        "stepCount": job.step_count,
        "queuedAt": iso(job.submitted_at),  # the Go tracker's "first Queued" is the enqueue, i.e. the submission
        "startedAt": iso(job.started_at),
        "finishedAt": iso(job.finished_at),
        "durationMs": _millis(job, now),
        "attempt": job.attempt,
        "updatedAt": iso(updated_at(job)),
    }
    return {key: value for key, value in fields.items() if value not in (None, "", 0)}


def unknown_job(job_id: str) -> dict[str, Any]:
    """The Go dashboard answers 200 for an id it does not track."""
    return {"id": job_id, "status": "Unknown", "timestamp": ZERO_TIME, "metadata": {}, "steps": [],
            "payloadAvailable": False}  # fmt: skip


def job_detail(job: JobState, timing: JobTiming | None, now: datetime, redactor: Redactor) -> dict[str, Any]:
    """The summary plus the redacted payload (metadata, steps with scripts), step progress and phase timing."""
    states = {state.index: state for state in job.steps}
    detail = {
        **job_summary(job, now, redactor),
        "timestamp": iso(job.spec.timestamp) or ZERO_TIME,
        "metadata": redactor.metadata(job.spec.metadata),
        "steps": [_step(step, states.get(index), redactor) for index, step in enumerate(job.spec.steps)],
        "payloadAvailable": True,
        "timing": timing.summary() if timing is not None else None,
    }
    extras = {
        "timeoutSeconds": job.spec.timeout_seconds,
        "executorId": job.executor_id,
        "executorLabels": job.executor_labels,
        "cancelRequestedBy": job.cancel_requested_by,
        "logsDelivery": job.logs_delivery,
        "webhookDelivery": job.webhook_delivery,
    }
    detail.update({key: value for key, value in extras.items() if value})
    return detail


def _step(step: Step, state: StepState | None, redactor: Redactor) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": step.id,
        "name": step.name,
        "image": step.image,
        "script": redactor.script(step.script),
        "continueOnError": step.continue_on_error,
        "metadata": redactor.metadata(step.metadata),
        "cpuLimit": step.cpu_limit,
        "memoryLimit": step.memory_limit,
        "status": (state.status if state is not None else StepStatus.PENDING).value,
    }
    optional = {"network": step.network, "memorySwap": step.memory_swap, "pidsLimit": step.pids_limit}
    if state is not None:
        optional |= {
            "reason": redactor.text(state.reason) if state.reason else None,
            "startedAt": iso(state.started_at),
            "finishedAt": iso(state.finished_at),
        }
    view.update({key: value for key, value in optional.items() if value not in (None, "", 0)})
    if state is not None and state.exit_code is not None:
        view["exitCode"] = state.exit_code  # 0 is an answer, not an absence
    return view


def recent_jobs(
    jobs: Iterable[JobRecord], now: datetime, retention: timedelta, status: str | None, limit: int
) -> tuple[list[JobRecord], int]:
    """Newest first, at most ``limit``, and how many matched.

    Ended jobs are listed for ``retention`` after they ended (``DASHBOARD_JOB_RETENTION``). Unfinished ones are
    listed however old: unlike the Go tracker's, this view is rebuilt from the log, so a job still Queued after a
    day really is still queued and hiding it would hide the problem.
    """
    oldest_ended = now - retention
    wanted = status.lower() if status else None
    matching = [
        job
        for job in jobs
        if (job.finished_at is None or job.finished_at >= oldest_ended)
        and (wanted is None or job.status.value.lower() == wanted)
    ]
    return heapq.nlargest(limit, matching, key=updated_at), len(matching)


def metrics(views: ReadModels, now: datetime, stream_clients: int) -> dict[str, Any]:
    """The dashboard's Metrics object; queue depth is counted from the log, so it is exact, not approximate."""
    snapshot = views.metrics.snapshot(now)
    snapshot["queueDepth"]["approximate"] = False
    return {**snapshot, "streamClients": stream_clients, "timestamp": iso(now.astimezone(UTC))}
