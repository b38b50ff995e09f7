"""The answers every route shares: the JSON and plain-text answer specs, the refusals, ``ping`` and ``health``,
and the Server-Sent Events a followed log may answer with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from litestar.enums import MediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIResponse, OpenAPIType, Operation, Schema


class Pong(TypedDict):
    """``GET /ping``: ``ok`` and the UTC time to the second (RFC 3339)."""

    status: str
    timestamp: str


class Health(TypedDict):
    """``GET /health``."""

    status: str


class Unhealthy(TypedDict):
    """``GET /health`` while the process cannot serve: ``unavailable`` and why."""

    status: str
    error: str


class Error(TypedDict):
    """A refusal: ``{"error": ...}`` naming the problem."""

    error: str


class Conflict(TypedDict):
    """409: why, and the job's status."""

    error: str
    status: str


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
