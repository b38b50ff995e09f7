"""The shapes on the wire, for the OpenAPI document: what each route reads and every answer it gives.

The handlers read their bodies themselves (``POST /build`` decodes as Go's encoding/json does, field by field, so
litestar must not parse it first), so the request bodies are described here rather than inferred from a ``data``
parameter. The answers are TypedDicts that the handlers' dicts match key for key; the contract tests check the
handlers, the schema tests check these against the handlers' real answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from litestar.enums import MediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)

from hades.core.memory import INT64_MAX, INT64_MIN
from hades.core.spec import MAX_TIMEOUT_SECONDS

# -- answers ---------------------------------------------------------------------------------------------------


class Pong(TypedDict):
    """``GET /ping``: ``ok`` and the UTC time to the second (RFC 3339)."""

    status: str
    timestamp: str


class Health(TypedDict):
    """``GET /health``."""

    status: str


class BuildAccepted(TypedDict):
    """``POST /build`` 200: ``Successfully enqueued job`` and the job's fresh id."""

    message: str
    job_id: str


class Error(TypedDict):
    """A refusal: ``{"error": ...}`` naming the problem."""

    error: str


class Conflict(TypedDict):
    """409: why, and the job's status."""

    error: str
    status: str


class JobIds(TypedDict):
    """``GET /jobs``: every job id, oldest first."""

    jobs: list[str]


class JobStatus(TypedDict):
    """``GET /jobs/{id}/status``."""

    status: str


class StepDetail(TypedDict):
    """One step of ``GET /jobs/{id}``."""

    index: int
    id: int
    name: str
    image: str
    status: str
    exit_code: int | None
    reason: str | None
    started_at: str | None
    finished_at: str | None


class AttemptRun(TypedDict):
    """Which executor took one attempt, with the labels it advertised (executor pools)."""

    attempt: int
    executor_id: str
    executor_labels: dict[str, str]
    started_at: str


class JobDetail(TypedDict):
    """``GET /jobs/{id}``: times are ISO 8601 UTC with a ``Z``; ``timing`` is the phase breakdown in seconds."""

    id: str
    name: str
    status: str
    reason: str | None
    priority: str
    attempt: int
    executor_id: str | None
    executor_labels: dict[str, str] | None
    attempts: list[AttemptRun]
    submitted_at: str | None
    queued_at: str | None
    started_at: str | None
    finished_at: str | None
    timeout_seconds: int
    steps: list[StepDetail]
    cancel_requested_by: str | None
    logs_delivery: str | None
    webhook_delivery: str | None
    timing: dict[str, Any] | None
    stages: NotRequired[list[StageRow]]
    pipeline: NotRequired[PipelineOfStage]


class StageRow(TypedDict):
    """One stage of a pipeline's ``GET /jobs/{id}`` (docs/pipelines.md); ``status`` is Pending, Skipped, its job's
    status while it runs, then how it ended."""

    name: str
    needs: list[str]
    job_id: str | None
    status: str
    reason: str | None
    launched_at: str | None
    ended_at: str | None


class PipelineOfStage(TypedDict):
    """A stage's job's ``GET /jobs/{id}``: the pipeline and stage it runs."""

    id: str
    stage: str


class StagesAccepted(TypedDict):
    """``POST /jobs/{id}/stages`` 202: the stages added and the pipeline's status."""

    job_id: str
    stages: list[str]
    status: str


class LogLine(TypedDict):
    """One line of output (the Go Log Manager's wire shape)."""

    timestamp: str
    message: str
    output_stream: str


class Log(TypedDict):
    """One step's container and its lines."""

    job_id: str
    container_id: str
    logs: list[LogLine] | None
    stage: NotRequired[str]


class Logs(TypedDict):
    """``GET /jobs/{id}/logs``: one Log per step, in step order."""

    logs: list[Log]


class EventRow(TypedDict):
    """One event of a job's history; the event's own fields follow these three."""

    seq: int
    type: str
    at: str


class Events(TypedDict):
    """``GET /jobs/{id}/events``: the history, oldest first."""

    events: list[EventRow]


class DeliveryRow(TypedDict):
    """One attempt to tell the client about the job (``webhook`` or ``logs``)."""

    kind: str
    at: str
    delivery_attempt: int
    url: str
    ok: bool
    status_code: int | None
    error: str | None
    duration_ms: int
    final: bool
    redelivered_by: str | None


class Deliveries(TypedDict):
    """``GET /jobs/{id}/deliveries``."""

    job_id: str
    deliveries: list[DeliveryRow]


class Redelivered(DeliveryRow):
    """``POST /jobs/{id}/deliveries/redeliver`` 202: the recorded attempt."""

    job_id: str


class ArtifactRow(TypedDict):
    """One kept file; ``expired`` once retention removed it from the object store."""

    path: str
    size: int
    sha256: str
    stored_at: str
    expired: bool


class SkippedRow(TypedDict):
    """A declared path (or a file under it) that was not kept, and why."""

    path: str
    reason: str


class ArtifactList(TypedDict):
    """``GET /jobs/{id}/artifacts``."""

    job_id: str
    artifacts: list[ArtifactRow]
    skipped: list[SkippedRow]


class CancelAccepted(TypedDict):
    """``POST /jobs/{id}/cancel`` 202: the job's status after the request."""

    job_id: str
    status: str
    cancel_requested: bool


class Session(TypedDict):
    """``POST /api/login`` and ``GET /api/session``."""

    username: str
    version: str


class LoggedOut(TypedDict):
    """``POST /api/logout``."""

    status: str


class DashboardJobs(TypedDict):
    """``GET /api/jobs``: JobSummary objects (camelCase, contract 1.4), newest first, and how many matched."""

    jobs: list[dict[str, Any]]
    total: int


class DashboardDeliveries(TypedDict):
    """``GET /api/jobs/{id}/deliveries``: as ``/jobs/{id}/deliveries``, URLs and errors redacted."""

    job_id: str
    deliveries: list[DeliveryRow]


# -- the answers every route shares ----------------------------------------------------------------------------


def json_answer(shape: Any, description: str) -> ResponseSpec:
    """A JSON answer of ``shape``."""
    return ResponseSpec(data_container=shape, description=description, generate_examples=False)


def text_answer(description: str, media_type: str = MediaType.TEXT) -> ResponseSpec:
    """A plain-text answer (the Go API's 400 bodies, Prometheus exposition, Server-Sent Events)."""
    return ResponseSpec(data_container=str, description=description, media_type=media_type, generate_examples=False)


BASIC_AUTH_REFUSED = ResponseSpec(
    data_container=None, description="AUTH_KEY is set and the Basic credentials are not hades:AUTH_KEY (empty body)"
)
TOO_LARGE = text_answer("The body is larger than MAX_REQUEST_BYTES (the text names the limit)")
JOB_NOT_FOUND = json_answer(Error, "No such job: job not found: <id>")
GUARDED = {401: BASIC_AUTH_REFUSED}
EVENT_STREAM = "text/event-stream"
INVALID_JOB_ID = json_answer(Error, "invalid job id: not a UUID")
DASHBOARD_REFUSALS = {
    401: json_answer(Error, "No session cookie, or an invalid or expired one"),
    503: json_answer(Error, "The dashboard is not configured"),
}


# -- request bodies --------------------------------------------------------------------------------------------


def _int64(description: str, minimum: int = INT64_MIN, maximum: int = INT64_MAX) -> Schema:
    return Schema(type=OpenAPIType.INTEGER, minimum=minimum, maximum=maximum, description=description)


def _text(description: str) -> Schema:
    return Schema(type=OpenAPIType.STRING, description=description)


_METADATA = Schema(
    type=OpenAPIType.OBJECT,
    additional_properties=Schema(type=OpenAPIType.STRING),
    description="environment variables for the containers",
)

STEP = Schema(
    type=OpenAPIType.OBJECT,
    description="One container run; the steps run in array order and share /shared.",
    properties={
        "id": _int64("starts at 1"),
        "name": _text("display only"),
        "image": _text("the container image"),
        "script": _text("run with DOCKER_SCRIPT_EXECUTOR; empty runs the image's own command"),
        "continue_on_error": Schema(type=OpenAPIType.BOOLEAN, description="the job carries on if this step fails"),
        "metadata": _METADATA,
        "cpu_limit": _int64("whole cores; 0 = the executor's default", 0, 2**64 - 1),
        "memory_limit": _text("<int>G or <int>M (e.g. 512M); empty = the executor's default"),
        "network": _text("none, bridge, host, default or a network name (Docker only)"),
        "memory_swap": _text("as memory_limit, at least memory_limit (Docker only)"),
        "pids_limit": _int64("0 = unlimited (Docker only)", 0),
    },
)

JOB_PAYLOAD = Schema(
    type=OpenAPIType.OBJECT,
    description=(
        "The Go Hades's RESTPayload: unknown fields are ignored, field names match case-insensitively, null leaves "
        "a field at its default. A refusal is a 400 whose plain-text body is the Go API's message."
    ),
    required=["name"],
    properties={
        "id": Schema(
            type=OpenAPIType.STRING, format=OpenAPIFormat.UUID, description="ignored: the server assigns the id"
        ),
        "name": Schema(type=OpenAPIType.STRING, min_length=1),
        "timestamp": Schema(
            type=OpenAPIType.STRING, format=OpenAPIFormat.DATE_TIME, description="RFC 3339, passed through"
        ),
        "metadata": _METADATA,
        "steps": Schema(type=OpenAPIType.ARRAY, items=STEP),
        "callback_url": _text("absolute http(s) URL the logs are POSTed to once the job has ended"),
        "status_callback_url": _text("absolute http(s) URL the job.completed webhook is POSTed to"),
        "timeout_seconds": _int64("0 = no timeout", 0, MAX_TIMEOUT_SECONDS),
        "priority": _int64("3 and above high (the default), 2 medium, 1 and below low"),
        "artifacts": Schema(
            type=OpenAPIType.ARRAY,
            items=Schema(type=OpenAPIType.STRING),
            max_items=64,
            description="workspace paths (files or directories) kept after the job ends (docs/artifacts.md)",
        ),
        "artifacts_when": Schema(
            type=OpenAPIType.STRING, enum=["always", "on_success", "on_failure"], description="default always"
        ),
        "inputs": Schema(
            type=OpenAPIType.ARRAY,
            max_items=32,
            description="placed into the workspace before the first step",
            items=Schema(
                one_of=[
                    _text('"<job id>:<path>" (an earlier job\'s artifact) or an http(s) URL'),
                    Schema(
                        type=OpenAPIType.OBJECT,
                        required=["source"],
                        properties={"source": _text("as the string form"), "destination": _text("workspace path")},
                    ),
                ]
            ),
        ),
    },
)

STAGE = Schema(
    type=OpenAPIType.OBJECT,
    required=["name", "steps"],
    description="One stage of a pipeline (docs/pipelines.md): a job's own fields, run as a job of its own.",
    properties={
        "name": Schema(type=OpenAPIType.STRING, pattern="^[a-z0-9][a-z0-9_-]{0,62}$", description="unique"),
        "needs": Schema(
            type=OpenAPIType.ARRAY,
            items=Schema(type=OpenAPIType.STRING),
            description="stages declared before it that must succeed first; absent: the stage before; []: none",
        ),
        "steps": Schema(type=OpenAPIType.ARRAY, items=STEP),
        **{name: JOB_PAYLOAD.properties[name] for name in ("metadata", "timeout_seconds", "priority")},  # type: ignore[index]
        **{name: JOB_PAYLOAD.properties[name] for name in ("artifacts", "artifacts_when", "inputs")},  # type: ignore[index]
    },
)
JOB_PAYLOAD.properties["stages"] = Schema(  # type: ignore[index]
    type=OpenAPIType.ARRAY, items=STAGE, description="a pipeline: stages instead of steps (docs/pipelines.md)"
)
STAGES_REQUEST = Schema(
    type=OpenAPIType.OBJECT,
    required=["stages"],
    properties={
        "stages": Schema(type=OpenAPIType.ARRAY, items=STAGE, min_items=1),
        "stage": _text("the adding stage's name (its HADES_STAGE), recorded as who added them"),
    },
)

CANCEL_REQUEST = Schema(
    type=OpenAPIType.OBJECT,
    properties={"reason": _text("recorded with the request (at most 500 characters kept)")},
    description="Optional; a body that is not this object is read as no reason.",
)

LOGIN = Schema(
    type=OpenAPIType.OBJECT,
    required=["username", "password"],
    properties={"username": Schema(type=OpenAPIType.STRING), "password": Schema(type=OpenAPIType.STRING)},
)


def reads(schema: Schema, required: bool = True) -> type[Operation]:
    """An Operation class whose request body is JSON of ``schema`` (inline: litestar rebuilds the components from
    the models it sees, so a hand-written component would be dropped)."""
    body = RequestBody(required=required, content={MediaType.JSON.value: OpenAPIMediaType(schema=schema)})

    @dataclass
    class ReadsBody(Operation):
        def __post_init__(self) -> None:
            self.request_body = body

    return ReadsBody


#: One Server-Sent Event: ``event`` names it (``log``, ``end``, ``error``), ``data`` is its JSON text.
SSE_EVENT = Schema(
    type=OpenAPIType.OBJECT,
    properties={name: Schema(type=OpenAPIType.STRING) for name in ("event", "data", "id")},
)


@dataclass
class AlsoStreams(Operation):
    """An operation whose 200 may also be Server-Sent Events (``GET /jobs/{id}/logs?follow=true``)."""

    def __post_init__(self) -> None:
        answer = (self.responses or {}).get("200")
        if isinstance(answer, OpenAPIResponse) and answer.content is not None:
            answer.content[EVENT_STREAM] = OpenAPIMediaType(schema=SSE_EVENT)
