"""``POST /jobs/{id}/cancel``: a queued job stops at once; a running one once its executor reacts (seconds)."""

from __future__ import annotations

import json
from typing import Any

from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from hades.core.errors import InvalidTransition
from hades.core.lifecycle import RequestCancel
from hades.http.auth import USER, basic_auth_guard
from hades.http.jobs import is_job_id, not_found
from hades.http.services import ApiServices
from hades.http.wire.answers import GUARDED, JOB_NOT_FOUND, TOO_LARGE, Conflict, json_answer
from hades.http.wire.bodies import CANCEL_REQUEST, reads
from hades.http.wire.jobs import CancelAccepted
from hades.workers.jobs import JobHandle


def reason_from_body(body: bytes) -> str:
    try:
        parsed = json.loads(body) if body.strip() else {}
    except ValueError:
        return ""
    reason = parsed.get("reason") if isinstance(parsed, dict) else None
    return reason[:500] if isinstance(reason, str) else ""


@post(
    "/jobs/{job_id:str}/cancel",
    guards=[basic_auth_guard],
    status_code=202,
    security=[{"basic": []}],
    operation_class=reads(CANCEL_REQUEST, required=False),
    responses={
        202: json_answer(CancelAccepted, "Cancel requested"),
        404: JOB_NOT_FOUND,
        409: json_answer(Conflict, "The job has ended already"),
        413: TOO_LARGE,
        **GUARDED,
    },
)
async def cancel_job(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """202 with the job's status after the request; 404 unknown; 409 when it has ended already."""
    services: ApiServices = request.app.state.services
    by = USER if services.auth_key else "api"
    return await request_cancel(services, job_id, by, reason_from_body(await request.body()))


async def request_cancel(services: ApiServices, job_id: str, by: str, reason: str) -> Response[dict[str, Any]]:
    """Append ``cancel_requested`` (or refuse): the answer of every cancel route."""
    if not is_job_id(job_id):
        return not_found(job_id)
    job = await JobHandle.load(services.store, services.clock, job_id)
    if job.state is None:
        return not_found(job_id)
    try:
        await job.run(job_id, RequestCancel(by=by, reason=reason))
    except InvalidTransition:
        assert job.state is not None
        return Response(
            content={"error": f"job {job_id} has ended already ({job.state.status})", "status": job.state.status},
            status_code=409,
        )
    await services.projections.wait_for(job.seq)
    assert job.state is not None
    return Response(content={"job_id": job_id, "status": job.state.status, "cancel_requested": True}, status_code=202)
