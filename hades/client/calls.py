"""Every route as one ``Call`` (the request and how its answer is read), the errors, and what the answers become.

Both clients send these calls and read these answers, so the two cannot drift; only their I/O loops differ.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx

from hades.core.codec import decode_event
from hades.core.events import Event
from hades.core.logs import Log
from hades.core.spec import JobSpec

if TYPE_CHECKING:  # the wire shapes are only types here: importing them would load the server's web framework
    from hades.http.wire.jobs import CancelAccepted, Deliveries, JobDetail, Redelivered

USER = "hades"
DEFAULT_URL = "http://localhost:8080"
#: Longer than the server's 15 s keepalive on the log stream, so a silent stream means a lost connection.
READ_TIMEOUT = 30.0
#: Reconnects of the log stream in a row without a new event before giving up.
RECONNECTS = 5

T = TypeVar("T")
#: The header with which the logs route (answering ``200 {"logs": []}`` for an unknown job, as the Go one does)
#: says what our other routes refuse with a 404.
ERROR_HEADER = "X-Hades-Error"
Job = JobSpec | Mapping[str, Any] | bytes


class HadesClientError(Exception):
    """Hades refused a request: ``status`` is the HTTP status, ``message`` the server's own words."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"{status}: {message}" if status is not None else message)
        self.status = status
        self.message = message


class HadesUnreachable(HadesClientError):
    """No answer: the connection failed, broke or timed out (``status`` is None)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


@dataclass(frozen=True)
class JobEnded:
    """The last item of a log stream: the job's final status and why."""

    status: str
    reason: str | None


@dataclass(frozen=True)
class JobEvent:
    """One entry of a job's history: ``row`` as the server sent it, ``event`` decoded into the server's model.

    ``event`` is None where the wire shape does not carry the whole event: ``submitted`` (the route withholds the
    spec) and kinds this client does not know yet (a newer server).
    """

    seq: int
    type: str
    at: datetime
    row: dict[str, Any]
    event: Event | None


# -- requests and answers, shared by both clients ----------------------------------------------------------------


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how its answer is read."""

    method: str
    path: str
    read: Callable[[Any], T]
    expect: int = 200
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def answer(self, response: httpx.Response) -> T:
        """The parsed answer, or the server's refusal raised."""
        if response.status_code != self.expect:
            raise refusal(response)
        if ERROR_HEADER in response.headers:  # a Go-contract answer to what our other routes refuse with a 404
            raise HadesClientError(404, response.headers[ERROR_HEADER])
        return self.read(response.json())


def refusal(response: httpx.Response) -> HadesClientError:
    """The error for a refused request: ``{"error": ...}`` of our routes, the plain text of the Go ones."""
    message = response.text.strip()
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message = body["error"]
    return HadesClientError(response.status_code, message or response.reason_phrase)


def job_path(job_id: str, suffix: str = "") -> str:
    return f"/jobs/{quote(job_id, safe='')}{suffix}"


def body_of(job: Job) -> bytes:
    if isinstance(job, bytes):
        return job
    if isinstance(job, JobSpec):
        return job.model_dump_json().encode()
    return json.dumps(dict(job)).encode()


def submit(job: Job, idempotency_key: str | None = None) -> Call[str]:
    body, headers = body_of(job), {"Content-Type": "application/json"}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return Call("POST", "/build", lambda answer: str(answer["job_id"]), content=body, headers=headers)


def detail(job_id: str) -> Call[JobDetail]:
    return Call("GET", job_path(job_id), lambda answer: cast("JobDetail", answer))


def status(job_id: str) -> Call[str]:
    return Call("GET", job_path(job_id, "/status"), lambda answer: str(answer["status"]))


def logs(job_id: str, attempt: int | None = None) -> Call[list[Log]]:
    query = f"?attempt={attempt}" if attempt is not None else ""
    return Call(
        "GET", job_path(job_id, "/logs") + query, lambda answer: [Log.model_validate(x) for x in answer["logs"]]
    )


def events(job_id: str) -> Call[list[JobEvent]]:
    return Call("GET", job_path(job_id, "/events"), lambda answer: [event_of(job_id, r) for r in answer["events"]])


def event_of(job_id: str, row: dict[str, Any]) -> JobEvent:
    """The row decoded as the server's event: the route leaves out ``job_id`` and ``version`` (rows are written in
    the current version) and the submitted spec."""
    whole = {**row, "job_id": job_id}
    whole.pop("seq", None)
    try:
        event: Event | None = decode_event(json.dumps(whole).encode())
    except ValueError:  # pydantic's ValidationError is one
        event = None
    return JobEvent(seq=row["seq"], type=row["type"], at=datetime.fromisoformat(row["at"]), row=row, event=event)


def cancel(job_id: str, reason: str) -> Call[CancelAccepted]:
    body = json.dumps({"reason": reason}).encode()
    headers = {"Content-Type": "application/json"}
    path = job_path(job_id, "/cancel")
    return Call("POST", path, lambda answer: cast("CancelAccepted", answer), 202, body, headers)


def add_stages(
    pipeline_id: str, stages: bytes | list[Any], token: str, stage: str | None = None
) -> Call[dict[str, Any]]:
    """``POST /jobs/{id}/stages`` with the pipeline's token: ``stages`` is the body's bytes (``{"stages": [...]}``)
    or the list of stages; ``stage`` names the adding stage."""
    if isinstance(stages, bytes):
        body = stages
    else:
        body = json.dumps({"stages": stages, **({"stage": stage} if stage else {})}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    path = job_path(pipeline_id, "/stages")
    return Call("POST", path, lambda answer: cast("dict[str, Any]", answer), 202, body, headers)


def deliveries(job_id: str) -> Call[Deliveries]:
    return Call("GET", job_path(job_id, "/deliveries"), lambda answer: cast("Deliveries", answer))


def redeliver(job_id: str) -> Call[Redelivered]:
    path = job_path(job_id, "/deliveries/redeliver")
    return Call("POST", path, lambda answer: cast("Redelivered", answer), 202)


def timing(job_id: str) -> Call[dict[str, Any] | None]:
    return Call("GET", job_path(job_id), lambda answer: answer["timing"])


def unreachable(base_url: str, error: httpx.TransportError) -> HadesUnreachable:
    return HadesUnreachable(f"cannot reach {base_url}: {error or type(error).__name__}")


def connection_settings(base_url: str | None, auth_key: str | None) -> tuple[str, tuple[str, str] | None]:
    url = base_url or os.environ.get("HADES_API_URL") or DEFAULT_URL
    key = os.environ.get("AUTH_KEY", "") if auth_key is None else auth_key
    return url, ((USER, key) if key else None)
