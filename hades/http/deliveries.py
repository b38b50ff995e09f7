"""The delivery log of a finished job and its manual redelivery.

``GET /jobs/{id}/deliveries`` lists every recorded attempt to tell the client about the job, of both kinds
(``webhook`` to ``status_callback_url``, ``logs`` to ``callback_url``), oldest first, straight from its history.
``POST /jobs/{id}/deliveries/redeliver`` sends the job-status webhook once more, at once, as the next attempt.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath

from hades.core.delivery import DeliveryEvent
from hades.core.errors import HadesError
from hades.core.events import LogsForwarded, LogsForwardFailed, WebhookDelivered, WebhookFailed
from hades.core.ports import Recorded
from hades.http.auth import USER, basic_auth_guard
from hades.http.jobs import is_job_id, not_found
from hades.http.services import ApiServices
from hades.http.views import iso
from hades.http.wire.answers import GUARDED, JOB_NOT_FOUND, Conflict, Error, json_answer
from hades.http.wire.jobs import Deliveries, Redelivered
from hades.workers.jobs import JobHandle


def delivery_row(event: DeliveryEvent) -> dict[str, Any]:
    """One attempt: ``final`` says that no automatic attempt follows it (a success, or the last failure)."""
    failed = event if isinstance(event, LogsForwardFailed | WebhookFailed) else None
    return {
        "kind": "webhook" if isinstance(event, WebhookDelivered | WebhookFailed) else "logs",
        "at": iso(event.at),
        "delivery_attempt": event.delivery_attempt,
        "url": event.url,
        "ok": failed is None,
        "status_code": event.status_code,
        "error": failed.error if failed else None,
        "duration_ms": event.duration_ms,
        "final": failed.final if failed else True,
        "redelivered_by": getattr(event, "redelivered_by", None),
    }


def delivery_rows(history: list[Recorded]) -> list[dict[str, Any]]:
    """The delivery attempts in a job's history, oldest first."""
    return [
        delivery_row(r.event)
        for r in history
        if isinstance(r.event, LogsForwarded | LogsForwardFailed | WebhookDelivered | WebhookFailed)
    ]


@get(
    "/jobs/{job_id:str}/deliveries",
    guards=[basic_auth_guard],
    security=[{"basic": []}],
    responses={200: json_answer(Deliveries, "Every delivery attempt"), 404: JOB_NOT_FOUND, **GUARDED},
)
async def list_deliveries(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """Every recorded delivery attempt of the job, oldest first; 404 when the job is unknown."""
    services: ApiServices = request.app.state.services
    history = await services.store.history(job_id) if is_job_id(job_id) else []
    if not history:
        return not_found(job_id)
    return Response(content={"job_id": job_id, "deliveries": delivery_rows(history)})


@post(
    "/jobs/{job_id:str}/deliveries/redeliver",
    guards=[basic_auth_guard],
    status_code=202,
    security=[{"basic": []}],
    responses={
        202: json_answer(Redelivered, "The attempt, made and recorded"),
        404: JOB_NOT_FOUND,
        409: json_answer(Conflict, "The job has not ended, or has no status_callback_url"),
        503: json_answer(Error, "This process sends no webhooks, or the attempt could not be recorded"),
        **GUARDED,
    },
)
async def redeliver_webhook(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """202 with the recorded attempt; 404 unknown; 409 not ended yet or no ``status_callback_url``; 503 when the
    attempt could not be recorded."""
    services: ApiServices = request.app.state.services
    if not is_job_id(job_id):
        return not_found(job_id)
    job = await JobHandle.load(services.store, services.clock, job_id)
    state = job.state
    if state is None:
        return not_found(job_id)
    if not state.status.is_terminal:
        return _conflict(f"job {job_id} has not ended ({state.status})", state.status)
    if not state.spec.status_callback_url:
        return _conflict(f"job {job_id} has no status_callback_url", state.status)
    if services.webhooks is None:
        return Response(content={"error": "this API process does not send webhooks"}, status_code=503)
    try:
        event = await services.webhooks.redeliver(job, USER if services.auth_key else "api")
    except HadesError as error:  # the event log refused or is unreachable: the attempt could not be recorded
        return Response(content={"error": f"the redelivery could not be recorded: {error}"}, status_code=503)
    return Response(content={"job_id": job_id, **delivery_row(event)}, status_code=202)


def _conflict(error: str, status: str) -> Response[dict[str, Any]]:
    return Response(content={"error": error, "status": status}, status_code=409)
