"""The answers of the job routes: ``POST /build``, ``GET /jobs/...`` (detail, status, logs, events, deliveries)
and ``POST /jobs/{id}/cancel``."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from hades.http.wire.pipelines import PipelineOfStage, StageRow


class BuildAccepted(TypedDict):
    """``POST /build`` 200: ``Successfully enqueued job`` and the job's fresh id."""

    message: str
    job_id: str


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
    """``GET /jobs/{id}``: times are ISO 8601 UTC with a ``Z``; ``timing`` is the phase breakdown in seconds;
    ``timeout_seconds`` is the effective one, ``requested_timeout_seconds`` (only when they differ) the client's."""

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
    requested_timeout_seconds: NotRequired[int]


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


class CancelAccepted(TypedDict):
    """``POST /jobs/{id}/cancel`` 202: the job's status after the request."""

    job_id: str
    status: str
    cancel_requested: bool
