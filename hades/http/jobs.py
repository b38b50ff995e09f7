"""Reading jobs: the Go Log Manager's routes (``/jobs``, status, logs, health) and our detail and history."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.enums import MediaType
from litestar.params import FromPath, FromQuery
from litestar.response import ServerSentEvent, ServerSentEventMessage

from hades.core.lifecycle import JobState
from hades.http.auth import basic_auth_guard
from hades.http.follow import follow_logs
from hades.http.log_views import ERROR_HEADER, attempt_headers, attempt_logs, current_attempt
from hades.http.services import ApiServices
from hades.http.stage_views import follow_pipeline, pipeline_fields, pipeline_logs, pipeline_state
from hades.http.views import event_row, job_detail, parse_moment
from hades.http.wire.answers import (
    GUARDED,
    JOB_NOT_FOUND,
    AlsoStreams,
    Error,
    Health,
    Unhealthy,
    json_answer,
    text_answer,
)
from hades.http.wire.jobs import Events, JobDetail, JobStatus, Logs
from hades.projections.timing import JobTiming
from hades.projections.views import ReadModels


def _services(request: Request[Any, Any, State]) -> ApiServices:
    services: ApiServices = request.app.state.services
    return services


def not_found(job_id: str) -> Response[dict[str, str]]:
    return Response(content={"error": f"job not found: {job_id}"}, status_code=404)


def no_attempt(job_id: str, attempt: int) -> Response[dict[str, str]]:
    return Response(content={"error": f"job {job_id} has no attempt {attempt}"}, status_code=404)


def is_job_id(job_id: str) -> bool:
    """Job ids are UUIDs; anything else (``*``, ``>``, dots) must never reach a NATS subject."""
    try:
        return str(uuid.UUID(job_id)) == job_id
    except ValueError:
        return False


@get("/jobs", guards=[basic_auth_guard], sync_to_thread=False, security=[{"basic": []}], responses=GUARDED)
def list_jobs(request: Request[Any, Any, State]) -> dict[str, list[str]]:
    """Every job id, oldest first."""
    return {"jobs": _services(request).jobs.ids()}


@get(
    "/jobs/{job_id:str}",
    guards=[basic_auth_guard],
    security=[{"basic": []}],
    responses={
        200: json_answer(JobDetail, "The job"),
        400: text_answer("?at= is not an ISO 8601 time with a zone"),
        404: JOB_NOT_FOUND,
        **GUARDED,
    },
)
async def get_job(
    request: Request[Any, Any, State], job_id: FromPath[str], at: FromQuery[str | None] = None
) -> Response[Any]:
    """Status, reason, priority, attempt, times, each step's status, exit code and times, and the phase timing.

    With ``?at=<ISO 8601 time>``, the job as it was at that moment, folded from its history.
    """
    services = _services(request)
    moment = None
    if at is not None:
        moment = parse_moment(at)
        if moment is None:
            message = f"invalid at: {at!r} is not an ISO 8601 time with a zone"
            return Response(content=message, status_code=400, media_type=MediaType.TEXT)
    found = await whole_job(services, job_id, moment)
    if found is None:
        return not_found(job_id)
    return Response(content={**job_detail(*found), **pipeline_fields(services, found[0])})


async def whole_job(
    services: ApiServices, job_id: str, at: datetime | None = None
) -> tuple[JobState, JobTiming | None] | None:
    """The job in full: from the views while it runs; folded from its history once it ended (the views keep
    only a summary of ended jobs) or as it was at a past moment."""
    if at is None:
        state = services.jobs.state(job_id)
        if state is not None:
            return state, services.views.timing.get(job_id)
        if services.jobs.get(job_id) is None:
            return None
    history = await services.store.history(job_id) if is_job_id(job_id) else []
    views = ReadModels.folded([r for r in history if at is None or r.event.at <= at])
    state = views.jobs.state(job_id)
    return (state, views.timing.get(job_id)) if state is not None else None


@get(
    "/jobs/{job_id:str}/status",
    guards=[basic_auth_guard],
    sync_to_thread=False,
    security=[{"basic": []}],
    responses={200: json_answer(JobStatus, "The job's status"), 404: JOB_NOT_FOUND, **GUARDED},
)
def get_status(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, str]]:
    """``{"status": ...}``, 404 when the job is unknown."""
    job = _services(request).jobs.get(job_id)
    if job is None:
        return not_found(job_id)
    return Response(content={"status": job.status.value})


@get(
    "/jobs/{job_id:str}/logs",
    guards=[basic_auth_guard],
    security=[{"basic": []}],
    operation_class=AlsoStreams,
    responses={
        200: json_answer(
            Logs,
            "One Log per step of the attempt named in X-Hades-Attempt; with ?follow=true, "
            "text/event-stream: log events, then end",
        ),
        400: text_answer("?attempt= asked of a pipeline"),
        404: json_answer(Error, "?attempt= names an unknown job or an attempt it has not had"),
        **GUARDED,
    },
)
async def get_logs(
    request: Request[Any, Any, State],
    job_id: FromPath[str],
    follow: FromQuery[bool] = False,
    attempt: FromQuery[int | None] = None,
) -> Response[Any]:
    """One Log per step in step order (silent steps included), read from the log stream: the steps of the attempt
    the job is at (a retried job's earlier attempts are ``?attempt=N``), named in the ``X-Hades-Attempt`` header.

    A job the event log does not know answers ``{"logs": []}`` as the Go Log Manager does, with the header
    ``X-Hades-Error: job not found: <id>`` (what the status and events routes answer 404 for).

    With ``?follow=true``: Server-Sent Events, one ``log`` event per batch of the attempt the job is at as it is
    written (backlog first; a retry's batches follow on), then one ``end`` event with the job's final status once it
    has ended and all of its batches were sent. A client reconnecting with ``Last-Event-ID`` gets only the batches
    after that event.

    A pipeline's are its stages' logs, stage by stage in launch order, each Log naming its ``stage``; following
    one streams each stage in turn, then the pipeline's ``end``; its ``log`` events' ids are ``<stage>:<sequence>``,
    and a client reconnecting with ``Last-Event-ID`` gets what came after that event, as for a job.
    """
    services = _services(request)
    pipeline = await pipeline_state(services, job_id)
    if follow:
        resume = request.headers.get("last-event-id")
        if pipeline is not None:
            return ServerSentEvent(follow_pipeline(services, job_id, resume))
        return ServerSentEvent(follow_logs(services, job_id, resume) if is_job_id(job_id) else _unknown(job_id))
    if pipeline is not None:
        if attempt is not None:
            return Response(
                content="?attempt= is for a job, not a pipeline", status_code=400, media_type=MediaType.TEXT
            )
        return Response(content={"logs": await pipeline_logs(services, pipeline)})
    return await _job_logs(services, job_id, attempt)


async def _job_logs(services: ApiServices, job_id: str, attempt: int | None) -> Response[Any]:
    """The Logs of ``attempt``, else of the attempt the job is at; an unknown job's as the Go contract has them."""
    known = await current_attempt(services, job_id) if is_job_id(job_id) else None
    if attempt is not None:
        if known is None:
            return not_found(job_id)
        if not 1 <= attempt <= known:
            return no_attempt(job_id, attempt)
    shown = attempt or known
    logs = await attempt_logs(services, job_id, shown) if is_job_id(job_id) else []
    if known is None and not logs:
        # a header is latin-1 on one line: an id that is no UUID is percent-encoded
        return Response(content={"logs": []}, headers={ERROR_HEADER: f"job not found: {quote(job_id, safe='')}"})
    return Response(content={"logs": [log.wire() for log in logs]}, headers=attempt_headers(shown))


async def _unknown(job_id: str) -> AsyncGenerator[ServerSentEventMessage, None]:
    yield ServerSentEventMessage(data=json.dumps({"error": f"job not found: {job_id}"}), event="error")


@get(
    "/jobs/{job_id:str}/events",
    guards=[basic_auth_guard],
    security=[{"basic": []}],
    responses={200: json_answer(Events, "The job's history"), 404: JOB_NOT_FOUND, **GUARDED},
)
async def get_events(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """The job's history, oldest first."""
    history = await _services(request).store.history(job_id) if is_job_id(job_id) else []
    if not history:
        return not_found(job_id)
    return Response(content={"events": [event_row(r) for r in history]})


@get(
    "/health",
    sync_to_thread=False,
    responses={
        200: json_answer(Health, "Always open: the process answers and its NATS connection is up"),
        503: json_answer(Unhealthy, "The NATS connection is down (reconnecting): readiness fails, liveness may not"),
    },
)
def health(request: Request[Any, Any, State]) -> Response[dict[str, str]]:
    """The Log Manager's health answer, and the API's readiness: 503 while this process cannot reach NATS, where
    it could neither accept nor read a job (``/ping`` stays the liveness answer: a reconnect is no reason to kill)."""
    if _services(request).connected():
        return Response(content={"status": "ok"})
    return Response(content={"status": "unavailable", "error": "not connected to NATS (reconnecting)"}, status_code=503)
