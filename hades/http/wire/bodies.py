"""The request bodies, described by hand: the handlers read their bodies themselves (``POST /build`` decodes as Go's
encoding/json does, field by field, so litestar must not parse it first), so there is no ``data`` parameter to
infer them from."""

from __future__ import annotations

from dataclasses import dataclass

from litestar.enums import MediaType
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    Parameter,
    RequestBody,
    Schema,
)

from hades.core.memory import INT64_MAX, INT64_MIN
from hades.core.spec import MAX_TIMEOUT_SECONDS


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


def reads(schema: Schema, required: bool = True, headers: tuple[Parameter, ...] = ()) -> type[Operation]:
    """An Operation class whose request body is JSON of ``schema`` (inline: litestar rebuilds the components from
    the models it sees, so a hand-written component would be dropped), with ``headers`` among its parameters (a
    handler that reads them off the request declares none)."""
    body = RequestBody(required=required, content={MediaType.JSON.value: OpenAPIMediaType(schema=schema)})

    @dataclass
    class ReadsBody(Operation):
        def __post_init__(self) -> None:
            self.request_body = body
            if headers:
                self.parameters = [*(self.parameters or []), *headers]

    return ReadsBody
