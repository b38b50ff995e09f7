"""Pipelines over HTTP: a running stage adds stages (``POST /jobs/{id}/stages``, with the pipeline's token), and a
pipeline's view, logs and artifacts cover its stages (``hades.http.stage_views``).

The token is the one the executor gave the stage in ``HADES_PIPELINE_TOKEN`` (``hades.adapters.nats.pipeline_tokens``);
it opens this route for this pipeline and nothing else (the other routes keep their Basic auth).
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from hades.adapters.nats.pipeline_tokens import token_matches
from hades.core.errors import ConcurrencyConflict, SpecError
from hades.core.events import StagesAdded
from hades.core.go_request import parse_stages_request
from hades.core.spec import validate_job_spec
from hades.core.stages import stages_problem
from hades.core.state import JobState
from hades.http.build import inputs_refused
from hades.http.jobs import is_job_id, not_found
from hades.http.services import ApiServices
from hades.http.wire.answers import TOO_LARGE, Error, json_answer
from hades.http.wire.bodies import STAGES_REQUEST, reads
from hades.http.wire.pipelines import StagesAccepted
from hades.workers.jobs import MAX_CONFLICT_RETRIES, JobHandle

_NO_TOKEN = "a pipeline token is required: Authorization: Bearer $HADES_PIPELINE_TOKEN, as the pipeline's stages get it"


def _error(status: int, message: str) -> Response[dict[str, Any]]:
    return Response(content={"error": message}, status_code=status)


def _bearer(request: Request[Any, Any, State]) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@post(
    "/jobs/{job_id:str}/stages",
    status_code=202,
    security=[{"pipeline_token": []}],
    operation_class=reads(STAGES_REQUEST),
    responses={
        202: json_answer(StagesAccepted, "The stages were added; they start as their needs allow"),
        400: json_answer(Error, "A bad stage, a duplicate name, unknown needs, or over MAX_PIPELINE_STAGES"),
        401: json_answer(Error, "No pipeline token, or not this pipeline's"),
        404: json_answer(Error, "No such job"),
        409: json_answer(Error, "Not a pipeline, ended, or being cancelled"),
        413: TOO_LARGE,
    },
)
async def add_stages(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """Add stages to a running pipeline (the "overwatch" pattern): ``{"stages": [...], "stage": "<adder>"}``."""
    services: ApiServices = request.app.state.services
    key, offered = services.pipeline_token_key, _bearer(request)
    if not is_job_id(job_id) or not key or not offered or not token_matches(key, job_id, offered):
        return _error(401, _NO_TOKEN)
    try:
        stages, adder = parse_stages_request(await request.body())
    except SpecError as error:
        return _error(400, str(error))
    job = await JobHandle.load(services.store, services.clock, job_id)
    for _ in range(MAX_CONFLICT_RETRIES):
        state = job.state
        if state is None:
            return not_found(job_id)
        refusal = _refusal(services, state, stages)
        if refusal is not None:
            return refusal
        added = services.timeouts.capped_stages(stages)  # fixed here, as a submitted job's are
        event = StagesAdded(job_id=job_id, at=services.clock.now(), stages=added, by=f"stage:{adder or '?'}")
        try:
            seq = await services.store.append(job_id, [event], job.seq)
        except ConcurrencyConflict:
            await job.reload(job_id)
            continue
        await services.projections.wait_for(seq)
        names = [stage.name for stage in stages]
        return Response(content={"job_id": job_id, "stages": names, "status": state.status.value}, status_code=202)
    return _error(409, f"pipeline {job_id} kept moving; try again")


def _refusal(services: ApiServices, state: JobState, stages: Any) -> Response[dict[str, Any]] | None:
    progress = state.progress
    if progress is None:
        return _error(409, f"job {state.job_id} is not a pipeline")
    if state.status.is_terminal:
        return _error(409, f"pipeline {state.job_id} has ended already ({state.status.value})")
    if state.cancel_requested_by is not None:
        return _error(409, f"pipeline {state.job_id} is being cancelled")
    before = progress.stages(state.spec)
    problem = stages_problem(state.spec, stages, validate_job_spec, before, services.max_pipeline_stages)
    for index, stage in enumerate(stages):
        refused = inputs_refused(stage.inputs, services.callbacks)
        problem = problem or (f"Invalid stages[{index}].{refused.removeprefix('Invalid ')}" if refused else None)
    return _error(400, problem) if problem is not None else None
