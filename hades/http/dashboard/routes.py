"""The dashboard's ``/api`` routes (contract 1.3-1.5), the single-page app's files, and the switch that turns it off.

Every answer comes from the read models and the log store, which every API replica holds alike, so unlike the Go
dashboard (state in one process's memory) any number of replicas can serve it; only the login lockout is per
process. The guards and helpers every route shares are in ``access``, the log routes in ``log_routes``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from litestar import Request, Response, get, post, route
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery
from litestar.response import File, ServerSentEvent, ServerSentEventMessage
from litestar.static_files import create_static_files_router

from hades.core.ports import Recorded
from hades.http.cancel import reason_from_body, request_cancel
from hades.http.dashboard.access import (
    DashboardError,
    checked_job_id,
    dashboard_of,
    same_origin_guard,
    services_of,
    session_guard,
)
from hades.http.dashboard.feed import stream_frames
from hades.http.dashboard.log_routes import log_stream, logs
from hades.http.dashboard.session import COOKIE, check_password, client_address
from hades.http.dashboard.summaries import job_detail, job_summary, metrics, recent_jobs, unknown_job
from hades.http.deliveries import delivery_rows
from hades.http.jobs import whole_job
from hades.http.stage_views import pipeline_fields
from hades.http.views import event_row, parse_moment
from hades.http.wire.answers import (
    EVENT_STREAM,
    INVALID_JOB_ID,
    JOB_NOT_FOUND,
    Conflict,
    Error,
    json_answer,
    text_answer,
)
from hades.http.wire.bodies import CANCEL_REQUEST, LOGIN, reads
from hades.http.wire.dashboard import DASHBOARD_REFUSALS, DashboardDeliveries, DashboardJobs, LoggedOut, Session
from hades.http.wire.jobs import CancelAccepted, Events

STATIC = Path(__file__).parent / "static"
MAX_JOBS = 500


# --- auth -----------------------------------------------------------------------------------------------------


@post(
    "/api/login",
    status_code=200,
    guards=[same_origin_guard],
    operation_class=reads(LOGIN),
    responses={
        200: json_answer(Session, "Logged in; the session cookie is set"),
        400: json_answer(Error, "invalid request"),
        401: json_answer(Error, "invalid credentials"),
        403: json_answer(Error, "cross-origin request refused"),
        413: json_answer(Error, "The body is larger than MAX_REQUEST_BYTES"),
        429: json_answer(Error, "too many failed attempts, try again later"),
        503: DASHBOARD_REFUSALS[503],
    },
)
async def login(request: Request[Any, Any, State]) -> Response[dict[str, str]]:
    """Lockout first (429 even with the right password), then 400 / 401 / 200 with the session cookie."""
    dashboard = dashboard_of(request)
    client = client_address(
        request.client.host if request.client else None,
        request.headers.get("x-forwarded-for"),
        dashboard.config.trusted_proxies,
    )
    now = time.time()
    if dashboard.lockout.locked(client, now):
        raise DashboardError(status_code=429, detail="too many failed attempts, try again later")
    try:
        body = json.loads(await request.body())
        username, password = body["username"], body["password"]
        if not isinstance(username, str) or not isinstance(password, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise DashboardError(status_code=400, detail="invalid request") from None
    config = dashboard.config
    # bcrypt takes a quarter of a second on purpose: off the event loop, so other requests go on meanwhile
    if not await asyncio.to_thread(check_password, config.password_hash, username, password, config.username):
        dashboard.lockout.failed(client, time.time())
        raise DashboardError(status_code=401, detail="invalid credentials")
    dashboard.lockout.succeeded(client)
    response = Response(content={"username": username, "version": config.version})
    ttl = int(config.session_ttl.total_seconds())
    response.set_cookie(
        COOKIE,
        dashboard.session_token(username, int(now) + ttl),
        path="/",
        max_age=ttl,
        expires=ttl,
        secure=config.cookie_secure,
        httponly=True,
        samesite="strict",
    )
    return response


@post(
    "/api/logout",
    status_code=200,
    guards=[session_guard, same_origin_guard],
    responses={
        200: json_answer(LoggedOut, "The cookie is cleared"),
        403: json_answer(Error, "cross-origin request refused"),
        **DASHBOARD_REFUSALS,
    },
)
async def logout(request: Request[Any, Any, State]) -> Response[dict[str, str]]:
    """Clears the cookie; the token itself stays valid until it expires (there is no session store)."""
    config = dashboard_of(request).config
    response = Response(content={"status": "ok"})
    response.set_cookie(COOKIE, "", path="/", max_age=-1, secure=config.cookie_secure, httponly=True, samesite="strict")
    return response


@get(
    "/api/session",
    guards=[session_guard],
    sync_to_thread=False,
    responses={200: json_answer(Session, "Who is logged in"), **DASHBOARD_REFUSALS},
)
def session(request: Request[Any, Any, State]) -> dict[str, str]:
    """Who is logged in, and the version."""
    return {"username": request.state.user, "version": dashboard_of(request).config.version}


# --- jobs -----------------------------------------------------------------------------------------------------


@get(
    "/api/jobs",
    guards=[session_guard],
    sync_to_thread=False,
    responses={
        200: json_answer(DashboardJobs, "JobSummary objects"),
        400: json_answer(Error, "invalid limit"),
        **DASHBOARD_REFUSALS,
    },
)
def list_jobs(
    request: Request[Any, Any, State], status: FromQuery[str | None] = None, limit: FromQuery[int] = MAX_JOBS
) -> Response[dict[str, Any]]:
    """Newest first (by finished, else started, else queued time), ``?status=`` case-insensitive."""
    if limit < 1 or limit > 10_000:
        raise DashboardError(status_code=400, detail="invalid limit: must be between 1 and 10000")
    dashboard, services = dashboard_of(request), services_of(request)
    now = services.clock.now()
    jobs, total = recent_jobs(services.jobs.jobs.values(), now, dashboard.config.job_retention, status, limit)
    redactor = dashboard.config.redactor
    return Response(content={"jobs": [job_summary(job, now, redactor) for job in jobs], "total": total})


@get(
    "/api/jobs/{job_id:str}",
    guards=[session_guard],
    responses={
        200: json_answer(dict[str, Any], "The redacted detail (status Unknown for a job never seen)"),
        400: json_answer(Error, "?at= is not an ISO 8601 time with a zone"),
        **DASHBOARD_REFUSALS,
    },
)
async def job(request: Request[Any, Any, State], job_id: FromPath[str], at: FromQuery[str | None] = None) -> Any:
    """The redacted detail; with ``?at=<ISO time>`` the job as it was then, folded from its history."""
    dashboard, services = dashboard_of(request), services_of(request)
    moment = None
    if at is not None:
        moment = parse_moment(at)
        if moment is None:
            raise DashboardError(status_code=400, detail=f"invalid at: {at!r} is not an ISO 8601 time with a zone")
    found = await whole_job(services, job_id, moment)
    if found is None:
        return unknown_job(job_id)
    state, timing = found
    detail = job_detail(state, timing, moment or services.clock.now(), dashboard.config.redactor)
    return {**detail, **pipeline_fields(services, state)}


@get(
    "/api/jobs/{job_id:str}/events",
    guards=[session_guard],
    responses={
        200: json_answer(Events, "The history, redacted"),
        400: INVALID_JOB_ID,
        404: JOB_NOT_FOUND,
        **DASHBOARD_REFUSALS,
    },
)
async def events(request: Request[Any, Any, State], job_id: FromPath[str]) -> dict[str, Any]:
    """The job's history, oldest first, free-text fields redacted and the payload left out."""
    rows = [event_row(recorded) for recorded in await _history(request, job_id)]
    return {"events": _redacted(request, rows, ("reason", "error"))}


@get(
    "/api/jobs/{job_id:str}/deliveries",
    guards=[session_guard],
    responses={
        200: json_answer(DashboardDeliveries, "Every delivery attempt, redacted"),
        400: INVALID_JOB_ID,
        404: JOB_NOT_FOUND,
        **DASHBOARD_REFUSALS,
    },
)
async def deliveries(request: Request[Any, Any, State], job_id: FromPath[str]) -> dict[str, Any]:
    """Every attempt to tell the client (webhook and log forwarding), oldest first."""
    rows = delivery_rows(await _history(request, job_id))
    return {"job_id": job_id, "deliveries": _redacted(request, rows, ("url", "error"))}  # a URL may hold credentials


async def _history(request: Request[Any, Any, State], job_id: str) -> list[Recorded]:
    history = await services_of(request).store.history(checked_job_id(job_id))
    if not history:
        raise DashboardError(status_code=404, detail=f"job not found: {job_id}")
    return history


def _redacted(
    request: Request[Any, Any, State], rows: list[dict[str, Any]], keys: tuple[str, ...]
) -> list[dict[str, Any]]:
    """The rows with their free-text ``keys`` scrubbed of inline secrets."""
    redactor = dashboard_of(request).config.redactor
    for row in rows:
        for key in keys:
            if isinstance(row.get(key), str):
                row[key] = redactor.text(row[key])
    return rows


@post(
    "/api/jobs/{job_id:str}/cancel",
    guards=[session_guard, same_origin_guard],
    status_code=202,
    operation_class=reads(CANCEL_REQUEST, required=False),
    responses={
        202: json_answer(CancelAccepted, "Cancel requested"),
        403: json_answer(Error, "cross-origin request refused"),
        404: JOB_NOT_FOUND,
        409: json_answer(Conflict, "The job has ended already"),
        413: json_answer(Error, "The body is larger than MAX_REQUEST_BYTES"),
        415: json_answer(Error, "send the cancel request as application/json"),
        **DASHBOARD_REFUSALS,
    },
)
async def cancel(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """Cancel as ``POST /jobs/{id}/cancel`` does, recorded as requested by the dashboard's user."""
    if "application/json" not in request.headers.get("content-type", ""):
        raise DashboardError(status_code=415, detail="send the cancel request as application/json")
    user = f"dashboard:{request.state.user}"
    return await request_cancel(services_of(request), job_id, user, reason_from_body(await request.body()))


# --- metrics and the live feed --------------------------------------------------------------------------------


@get(
    "/api/metrics",
    guards=[session_guard],
    sync_to_thread=False,
    responses={200: json_answer(dict[str, Any], "The Metrics object"), **DASHBOARD_REFUSALS},
)
def api_metrics(request: Request[Any, Any, State]) -> dict[str, Any]:
    """Counts per status, queue depth, durations, throughput, connected stream clients."""
    dashboard, services = dashboard_of(request), services_of(request)
    return metrics(services.views, services.clock.now(), len(dashboard.feed.subscribers))


@get(
    "/api/stream",
    guards=[session_guard],
    responses={200: text_answer("metrics and job frames", EVENT_STREAM), **DASHBOARD_REFUSALS},
)
async def stream(request: Request[Any, Any, State]) -> ServerSentEvent:
    """A metrics frame, then job frames as jobs change and metrics every 5 s, ``: ping`` every 25 s."""
    dashboard, services = dashboard_of(request), services_of(request)

    def current() -> dict[str, Any]:
        return metrics(services.views, services.clock.now(), len(dashboard.feed.subscribers))

    async def frames() -> AsyncGenerator[ServerSentEventMessage, None]:
        with dashboard.feed.subscribe() as subscriber:
            async for frame in stream_frames(subscriber, current, dashboard.metrics_every, dashboard.heartbeat):
                if frame is None:
                    yield ServerSentEventMessage(comment="ping", data=None)
                else:
                    yield ServerSentEventMessage(data=frame)

    return ServerSentEvent(frames(), headers={"Connection": "keep-alive"})


# --- when off, and the app itself -----------------------------------------------------------------------------


@route(
    "/api/{path:path}",
    http_method=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
    include_in_schema=False,  # not a route of its own: what every other /api path answers
)
async def api_unknown(request: Request[Any, Any, State], path: FromPath[str]) -> Response[dict[str, str]]:
    """503 for every ``/api`` path while the dashboard is off; 404 for unknown ones while it is on."""
    dashboard_of(request)
    raise DashboardError(status_code=404, detail="not found")


def index_html() -> File:
    """The single-page app's shell (it routes ``/login``, ``/jobs``, ``/jobs/<id>`` itself)."""
    return File(
        STATIC / "index.html",
        media_type="text/html",  # litestar adds the charset
        content_disposition_type="inline",
        headers={"Cache-Control": "no-cache"},
    )


STATIC_FILES = create_static_files_router(path="/static", directories=[STATIC], name="dashboard-static")

ROUTES = [
    login,
    logout,
    session,
    list_jobs,
    job,
    events,
    deliveries,
    cancel,
    logs,
    log_stream,
    api_metrics,
    stream,
    api_unknown,
]
