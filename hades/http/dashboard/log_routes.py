"""The dashboard's log routes: a job's logs at once (``/api/jobs/{id}/logs``) and followed live as Server-Sent
Events (``/api/jobs/{id}/logs/stream``)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath
from litestar.response import ServerSentEvent, ServerSentEventMessage
from nats.errors import ConnectionClosedError

from hades.http.dashboard.access import DashboardError, checked_job_id, dashboard_of, services_of, session_guard
from hades.http.dashboard.feed import EMPTY_JOB
from hades.http.follow import Batch, Heartbeat, log_items
from hades.http.log_views import attempt_headers, job_logs
from hades.http.services import ApiServices
from hades.http.stage_views import pipeline_logs, pipeline_state
from hades.http.wire.answers import EVENT_STREAM, INVALID_JOB_ID, JOB_NOT_FOUND, json_answer, text_answer
from hades.http.wire.dashboard import DASHBOARD_REFUSALS
from hades.http.wire.jobs import Logs


@get(
    "/api/jobs/{job_id:str}/logs",
    guards=[session_guard],
    responses={
        200: json_answer(Logs, "One Log per step of the attempt named in X-Hades-Attempt"),
        400: INVALID_JOB_ID,
        404: JOB_NOT_FOUND,
        **DASHBOARD_REFUSALS,
    },
)
async def logs(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """``{"logs": [Log...]}``, one per step of the attempt the job is at (``X-Hades-Attempt``) in order, verbatim
    (logs are not redacted, as in the Go dashboard); 404 for a job the event log does not know (unlike the Go
    route, which answers such a job with no logs)."""
    services = services_of(request)
    pipeline = await pipeline_state(services, checked_job_id(job_id))
    if pipeline is not None:
        return Response({"logs": await pipeline_logs(services, pipeline)})
    attempt, shown = await job_logs(services, job_id)
    if attempt is None:
        raise DashboardError(status_code=404, detail=f"job not found: {job_id}")
    return Response({"logs": [log.wire() for log in shown]}, headers=attempt_headers(attempt))


@get(
    "/api/jobs/{job_id:str}/logs/stream",
    guards=[session_guard],
    responses={
        200: text_answer("log frames, then an end frame", EVENT_STREAM),
        400: INVALID_JOB_ID,
        404: JOB_NOT_FOUND,
        **DASHBOARD_REFUSALS,
    },
)
async def log_stream(request: Request[Any, Any, State], job_id: FromPath[str]) -> ServerSentEvent:
    """The job's batches from the first, then live; an ``end`` frame once it has ended and all were sent."""
    services = services_of(request)
    if services.jobs.get(checked_job_id(job_id)) is None:
        raise DashboardError(status_code=404, detail=f"job not found: {job_id}")
    frames = _log_frames(services, job_id, dashboard_of(request).heartbeat)
    return ServerSentEvent(frames, headers={"Connection": "keep-alive"})


async def _log_frames(
    services: ApiServices, job_id: str, heartbeat: float
) -> AsyncGenerator[ServerSentEventMessage, None]:
    try:
        async for frame in _follow(services, job_id, heartbeat):
            yield frame
    except ConnectionClosedError:
        return  # the server is shutting down: the browser reconnects to another replica or later


async def _follow(services: ApiServices, job_id: str, heartbeat: float) -> AsyncGenerator[ServerSentEventMessage, None]:
    async for item in log_items(services, job_id, heartbeat):
        if isinstance(item, Batch):
            frame = {"type": "log", "job": EMPTY_JOB, "log": item.log.wire()}
            yield ServerSentEventMessage(data=json.dumps(frame))
        elif isinstance(item, Heartbeat):
            yield ServerSentEventMessage(comment="ping", data=None)
        else:
            yield ServerSentEventMessage(data=json.dumps({"type": "end", "job": {"id": job_id, "status": item.status}}))
