"""``POST /build``: validate as the Go Hades does (and refuse what it would accept but never run as meant), append
``submitted``, answer with the job id."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.enums import MediaType
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from hades.core.artifacts import Input
from hades.core.errors import ConcurrencyConflict, EventTooLarge, HadesError, SpecError
from hades.core.events import Event, JobSubmitted
from hades.core.go_request import parse_job_request
from hades.core.lifecycle import SubmitJob, decide
from hades.core.spec import JobSpec
from hades.core.urls import CallbackPolicy, callback_host
from hades.http.auth import USER, require_basic_auth
from hades.http.idempotency import HEADER, IDEMPOTENCY_KEY, different_job, job_id_for, key_refusal, submitted_before
from hades.http.services import ApiServices
from hades.http.wire.answers import GUARDED, json_answer, text_answer
from hades.http.wire.bodies import JOB_PAYLOAD, reads
from hades.http.wire.jobs import BuildAccepted
from hades.tracing import parent_context

log = logging.getLogger(__name__)

#: How long a submission waits for a lost NATS connection to come back before it is refused (500).
SUBMIT_PATIENCE_SECONDS = 5.0
_CONNECTED_POLL_SECONDS = 0.05


def _text(status: int, message: str) -> Response[str]:
    return Response(content=message, status_code=status, media_type=MediaType.TEXT)


@post(
    "/build",
    status_code=200,
    security=[{"basic": []}],  # checked first thing in the handler (require_basic_auth), as the guard would
    operation_class=reads(JOB_PAYLOAD, headers=(IDEMPOTENCY_KEY,)),
    responses={
        200: json_answer(BuildAccepted, "Enqueued"),
        400: text_answer(
            'The Go API\'s message (Invalid JSON body, then what and where; "name" is required; a bad limit or callback'
            " URL), or ours naming the field: no steps, a step without an image, a repeated step id, a metadata key"
            ' that cannot be an environment variable, a misspelt key (unknown field "stpes" (did you mean "steps"?)),'
            " an Idempotency-Key that cannot be one"
        ),
        413: text_answer("The body is larger than MAX_REQUEST_BYTES, or the job does not fit in one event"),
        422: text_answer("The Idempotency-Key was sent before with a different job"),
        500: text_answer("Failed to enqueue job: the event log is unreachable"),
        **GUARDED,
    },
)
async def submit_build(request: Request[Any, Any, State]) -> Response[Any]:
    """Enqueue a job; 400 with a plain-text message naming the problem when it is invalid (the Go Hades's message
    where it has one)."""
    services: ApiServices = request.app.state.services
    require_basic_auth(request, services.auth_key)  # before the body is read, as a guard is
    status, answer = await enqueue(services, await request.body(), request.headers.get(HEADER))
    if isinstance(answer, str):
        return _text(status, answer)
    return Response(content=answer, status_code=status)


async def enqueue(
    services: ApiServices, body: bytes, idempotency_key: str | None = None
) -> tuple[int, str | dict[str, str]]:
    """The work of ``POST /build`` on an authorised request's body: the status and either the plain-text message
    (an error) or the JSON answer. Shared by the litestar handler and the fast path in front of it
    (``hades.http.fast_build``), so both answer alike. With an ``Idempotency-Key`` (``hades.http.idempotency``)
    the job's id comes from the key, and a repeat answers the job the key already stands for."""
    checked = _checked(services, body, idempotency_key)
    if isinstance(checked, str):
        return 400, checked
    job_id = str(uuid.uuid4()) if idempotency_key is None else job_id_for(idempotency_key)
    by = USER if services.auth_key else None
    command = SubmitJob(
        job_id=job_id, spec=checked, submitted_by=by, max_attempts=services.max_attempts, timeouts=services.timeouts
    )
    events = decide(None, command, services.clock.now())
    if idempotency_key is not None:
        return await _keyed(services, job_id, events)
    appended = await _stored(services, job_id, events)
    if appended is None:
        return 500, "Failed to enqueue job"  # a fresh random id taken: never seen, and not worth a retry here
    return appended if isinstance(appended, tuple) else await _accepted(services, job_id, appended)


def _checked(services: ApiServices, body: bytes, idempotency_key: str | None) -> JobSpec | str:
    """The job the body asks for, or the 400 message: what Go checks, then our limits, callbacks and the key."""
    try:
        spec = parse_job_request(body)
    except SpecError as error:
        return str(error)
    stages, limit = len(spec.stages), services.max_pipeline_stages
    if stages > limit:
        return f"Invalid stages: a pipeline has at most {limit} stages (MAX_PIPELINE_STAGES), not {stages}"
    refused = refused_callback(spec, services.callbacks)
    if refused is not None:
        return refused
    refusal = key_refusal(idempotency_key) if idempotency_key is not None else None
    return refusal if refusal is not None else spec


async def _keyed(services: ApiServices, job_id: str, events: list[Event]) -> tuple[int, str | dict[str, str]]:
    """A keyed submission: the first request appends the job; a repeat (its append refused as a conflict, or
    deduplicated by the log as the same ``submitted``), or a request that lost a race with another of the key,
    answers from what the log holds, so what was stored is looked at even after an append that seemed to succeed."""
    appended = await _stored(services, job_id, events)
    if isinstance(appended, tuple):
        return appended
    stored = await submitted_before(services.store, job_id)
    assert stored is not None
    return await _answer_again(services, job_id, stored, events[0])


async def _stored(services: ApiServices, job_id: str, events: list[Event]) -> int | tuple[int, str] | None:
    """Append the job's events, its trace starting here: their sequence, the error answer, or None when the log
    already had the job (a request with the same key landed first)."""
    if not await _connected(services):
        log.error("could not enqueue job %s: not connected to NATS for %g s", job_id, SUBMIT_PATIENCE_SECONDS)
        return 500, "Failed to enqueue job"
    # The ``submitted`` event carries the trace to the scheduler. Tracing off, no span is made: a no-op tracer's
    # span of a new trace is invalid and carries nothing, and making it cost 2% of the CPU.
    traced = not isinstance(services.tracer, trace.NoOpTracer)
    submitting = (
        services.tracer.start_as_current_span("hades.submit", parent_context(None))
        if traced
        else contextlib.nullcontext(trace.INVALID_SPAN)
    )
    with submitting as span:
        span.set_attribute("hades.job_id", job_id)
        try:
            return await services.store.append(job_id, events, 0)
        except EventTooLarge as error:
            return 413, str(error)
        except ConcurrencyConflict:
            return None
        except HadesError as error:
            log.error("could not enqueue job %s: %s", job_id, error)
            span.set_status(StatusCode.ERROR, str(error))
            return 500, "Failed to enqueue job"


async def _connected(services: ApiServices) -> bool:
    """Whether the process's NATS connection is up, waiting up to ``SUBMIT_PATIENCE_SECONDS`` for it to come back.

    A publish made while the client is disconnected is not refused: nats-py keeps it and sends it once it is
    connected again, so a submission answered ``500`` after a long outage was enqueued after all, when NATS came
    back (a client that then retried had two jobs). Not publishing until the connection is there makes the 500
    true; a short restart (the client's reconnect wait, 2 s) is still waited out."""
    deadline = time.monotonic() + SUBMIT_PATIENCE_SECONDS
    while not services.connected():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_CONNECTED_POLL_SECONDS)
    return True


async def _accepted(services: ApiServices, job_id: str, seq: int) -> tuple[int, dict[str, str]]:
    """Go's answer, once this replica's views hold the job (read-your-writes)."""
    if not await services.projections.wait_for(seq):
        log.warning("job %s was enqueued but the API's views lag behind the log", job_id)
    return 200, {"message": "Successfully enqueued job", "job_id": job_id}


async def _answer_again(
    services: ApiServices, job_id: str, earlier: tuple[int, JobSubmitted], submitted: Event
) -> tuple[int, str | dict[str, str]]:
    """The answer to a key sent again: the same job, if it is the same job."""
    seq, first = earlier
    if not isinstance(submitted, JobSubmitted) or first.spec != submitted.spec:
        return 422, different_job(job_id)
    return await _accepted(services, job_id, seq)


def refused_callback(spec: JobSpec, policy: CallbackPolicy) -> str | None:
    """The 400 body when a callback URL points where ``CALLBACK_ALLOWED_HOSTS`` / ``CALLBACK_DENY_PRIVATE`` forbid,
    in the Go message's form (``Invalid callback_url: ...``); None when both may be used."""
    for field, url in (("callback_url", spec.callback_url), ("status_callback_url", spec.status_callback_url)):
        reason = policy.host_refusal(callback_host(url)) if url and policy.restricts else None
        if reason is not None:
            return f"Invalid {field}: {reason}"
    return inputs_refused(spec.inputs, policy) or next(
        (
            f"Invalid stages[{at}].{refused.removeprefix('Invalid ')}"
            for at, stage in enumerate(spec.stages)
            if (refused := inputs_refused(stage.inputs, policy)) is not None
        ),
        None,
    )


def inputs_refused(inputs: tuple[Input, ...], policy: CallbackPolicy) -> str | None:
    """The 400 body when an input URL points where the callback policy forbids (fetching an input is an outbound
    request just like a callback)."""
    for index, item in enumerate(inputs):
        reason = policy.host_refusal(callback_host(item.source)) if item.is_url and policy.restricts else None
        if reason is not None:
            return f"Invalid inputs[{index}]: {reason.replace('callback URL', 'input URL')}"
    return None
