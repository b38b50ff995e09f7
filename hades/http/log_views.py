"""A job's logs as the read routes and the notifier's answers show them: one attempt's, one Log per step.

A retried job's log stream holds every attempt's batches. Clients read the Logs positionally (the Artemis adapter
takes ``logs[1]`` as the execute step), so an answer mixing a dead attempt's steps with the final one's would put
the wrong output in each slot: the answers show the attempt the job is at, and an earlier one when asked for it.
"""

from __future__ import annotations

from hades.core.logs import Log, coalesce, of_attempt
from hades.http.services import ApiServices
from hades.projections.views import ReadModels

#: The response header naming the attempt a logs answer shows.
ATTEMPT_HEADER = "X-Hades-Attempt"
#: On a logs answer the Go contract makes ``200 {"logs": []}`` for an unknown job: what our other routes answer 404.
ERROR_HEADER = "X-Hades-Error"


def attempt_headers(attempt: int | None) -> dict[str, str]:
    """Which attempt a logs answer shows, for its headers (none when the event log does not know the job)."""
    return {ATTEMPT_HEADER: str(attempt)} if attempt is not None else {}


async def current_attempt(services: ApiServices, job_id: str) -> int | None:
    """The attempt the job is at: from the jobs view, else folded from its history (this replica's view behind
    the submission); None when the event log does not know the job. ``job_id`` must be a checked job id."""
    job = services.jobs.get(job_id)
    if job is None:
        job = ReadModels.folded(await services.store.history(job_id)).jobs.get(job_id)
    return job.attempt if job is not None else None


async def attempt_logs(services: ApiServices, job_id: str, attempt: int | None) -> list[Log]:
    """One Log per step of ``attempt`` in step order, silent steps included (every batch's step when ``attempt`` is
    None: a job the event log does not know)."""
    return coalesce(of_attempt(await services.logs.read(job_id), attempt))


async def job_logs(services: ApiServices, job_id: str) -> tuple[int | None, list[Log]]:
    """The attempt the job is at and its Logs."""
    attempt = await current_attempt(services, job_id)
    return attempt, await attempt_logs(services, job_id, attempt)
