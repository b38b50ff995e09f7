"""A Python client for a running Hades: ``Hades`` (sync) and ``AsyncHades`` (asyncio), both on httpx.

Every route is one ``_Call``: the request it sends and how its answer is read. Both clients send the same calls and
read the same answers, and the log stream is decoded by one ``_Follow`` for both, so the two cannot drift; only the
I/O loops differ. Answers are typed with the server's own shapes: the pydantic ``Log`` of ``hades.core.logs``, the
event models of ``hades.core.events`` (through ``hades.core.codec``), and the TypedDicts of ``hades.http.wire``.

Every refusal raises ``HadesClientError`` with the status and the server's message (the plain-text body of the Go
routes, the ``error`` of ours); ``HadesUnreachable``, a kind of it, means no answer came at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
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
    from hades.http.wire import CancelAccepted, Deliveries, JobDetail, Redelivered

__all__ = ["AsyncHades", "Hades", "HadesClientError", "HadesUnreachable", "JobEnded", "JobEvent"]

USER = "hades"
DEFAULT_URL = "http://localhost:8080"
#: Longer than the server's 15 s keepalive on the log stream, so a silent stream means a lost connection.
READ_TIMEOUT = 30.0
#: Reconnects of the log stream in a row without a new event before giving up.
RECONNECTS = 5

T = TypeVar("T")
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
class _Call(Generic[T]):
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


def _job_path(job_id: str, suffix: str = "") -> str:
    return f"/jobs/{quote(job_id, safe='')}{suffix}"


def _body(job: Job) -> bytes:
    if isinstance(job, bytes):
        return job
    if isinstance(job, JobSpec):
        return job.model_dump_json().encode()
    return json.dumps(dict(job)).encode()


def _submit(job: Job) -> _Call[str]:
    body, headers = _body(job), {"Content-Type": "application/json"}
    return _Call("POST", "/build", lambda answer: str(answer["job_id"]), content=body, headers=headers)


def _detail(job_id: str) -> _Call[JobDetail]:
    return _Call("GET", _job_path(job_id), lambda answer: cast("JobDetail", answer))


def _status(job_id: str) -> _Call[str]:
    return _Call("GET", _job_path(job_id, "/status"), lambda answer: str(answer["status"]))


def _logs(job_id: str) -> _Call[list[Log]]:
    return _Call("GET", _job_path(job_id, "/logs"), lambda answer: [Log.model_validate(x) for x in answer["logs"]])


def _events(job_id: str) -> _Call[list[JobEvent]]:
    return _Call("GET", _job_path(job_id, "/events"), lambda answer: [_event(job_id, r) for r in answer["events"]])


def _event(job_id: str, row: dict[str, Any]) -> JobEvent:
    """The row decoded as the server's event: the route leaves out ``job_id`` and ``version`` (rows are written in
    the current version) and the submitted spec."""
    whole = {**row, "job_id": job_id}
    whole.pop("seq", None)
    try:
        event: Event | None = decode_event(json.dumps(whole).encode())
    except ValueError:  # pydantic's ValidationError is one
        event = None
    return JobEvent(seq=row["seq"], type=row["type"], at=datetime.fromisoformat(row["at"]), row=row, event=event)


def _cancel(job_id: str, reason: str) -> _Call[CancelAccepted]:
    body = json.dumps({"reason": reason}).encode()
    headers = {"Content-Type": "application/json"}
    path = _job_path(job_id, "/cancel")
    return _Call("POST", path, lambda answer: cast("CancelAccepted", answer), 202, body, headers)


def _deliveries(job_id: str) -> _Call[Deliveries]:
    return _Call("GET", _job_path(job_id, "/deliveries"), lambda answer: cast("Deliveries", answer))


def _redeliver(job_id: str) -> _Call[Redelivered]:
    path = _job_path(job_id, "/deliveries/redeliver")
    return _Call("POST", path, lambda answer: cast("Redelivered", answer), 202)


def _timing(job_id: str) -> _Call[dict[str, Any] | None]:
    return _Call("GET", _job_path(job_id), lambda answer: answer["timing"])


# -- the log stream ------------------------------------------------------------------------------------------------


@dataclass
class _Sse:
    """One Server-Sent Event."""

    event: str = "message"
    data: list[str] = field(default_factory=list)
    id: str | None = None


class _SseDecoder:
    """Server-Sent Events from the stream's lines (the WHATWG rules this server's frames need)."""

    def __init__(self) -> None:
        self._current = _Sse()

    def line(self, line: str) -> _Sse | None:
        """Feed one line; a blank line completes the event being read."""
        if not line:
            event, self._current = self._current, _Sse()
            return event if event.data else None
        if line.startswith(":"):  # a comment: the server's keepalive
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._current.event = value
        elif name == "data":
            self._current.data.append(value)
        elif name == "id":
            self._current.id = value
        return None


class _Follow:
    """The reading of one job's log stream across reconnects.

    The server numbers each ``log`` event with the batch's position in the log stream (increasing). A reconnect
    sends ``Last-Event-ID``; the server does not resume from it (it sends the backlog again), so the batches up to
    the last one seen are dropped here: each batch is handed on once, in order.
    """

    def __init__(self, job_id: str) -> None:
        self.path = _job_path(job_id, "/logs")
        self.last_id: int | None = None
        self.failures = 0

    def headers(self) -> dict[str, str]:
        """The request's headers, with the resume point once there is one."""
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        return headers

    def read(self, sse: _Sse) -> Log | JobEnded | None:
        """The item an event carries; None for a batch seen before a reconnect."""
        data = "\n".join(sse.data)
        if sse.event == "end":
            answer = json.loads(data)
            return JobEnded(status=answer["status"], reason=answer.get("reason"))
        if sse.event == "error":  # the only error the stream reports is an unknown job
            raise HadesClientError(404, json.loads(data)["error"])
        if sse.event != "log":
            return None
        seq = int(sse.id) if sse.id is not None else None
        if seq is not None and self.last_id is not None and seq <= self.last_id:
            return None
        self.last_id = seq if seq is not None else self.last_id
        self.failures = 0
        return Log.model_validate_json(data)

    def lost(self, error: Exception | None) -> float:
        """The stream broke (or closed without its end): how long to wait before reconnecting."""
        self.failures += 1
        if self.failures > RECONNECTS:
            raise HadesUnreachable(f"the log stream of {self.path} broke {RECONNECTS} times: {error}") from error
        return 0.2 * 2.0 ** (self.failures - 1)


def _unreachable(base_url: str, error: httpx.TransportError) -> HadesUnreachable:
    return HadesUnreachable(f"cannot reach {base_url}: {error or type(error).__name__}")


def _settings(base_url: str | None, auth_key: str | None) -> tuple[str, tuple[str, str] | None]:
    url = base_url or os.environ.get("HADES_API_URL") or DEFAULT_URL
    key = os.environ.get("AUTH_KEY", "") if auth_key is None else auth_key
    return url, ((USER, key) if key else None)


# -- the clients -----------------------------------------------------------------------------------------------------


class Hades:
    """A blocking client; use it as a context manager, or call ``close()``.

    ``base_url`` defaults to ``HADES_API_URL`` (else ``http://localhost:8080``), ``auth_key`` to ``AUTH_KEY``.
    """

    def __init__(
        self,
        base_url: str | None = None,
        auth_key: str | None = None,
        *,
        timeout: float = READ_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url, auth = _settings(base_url, auth_key)
        self._http = httpx.Client(base_url=url, auth=auth, timeout=timeout, transport=transport)

    def __enter__(self) -> Hades:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def _send(self, call: _Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.path, content=call.content, headers=call.headers)
        except httpx.TransportError as error:
            raise _unreachable(str(self._http.base_url), error) from error
        return call.answer(response)

    def submit(self, job: Job) -> str:
        """Queue a job (a ``JobSpec``, a mapping of the ``POST /build`` body, or the body's bytes); its id."""
        return self._send(_submit(job))

    def job(self, job_id: str) -> JobDetail:
        """The job's detail: status, reason, steps, times, timing."""
        return self._send(_detail(job_id))

    def status(self, job_id: str) -> str:
        """``Queued``, ``Running``, ``Succeeded``, ``Failed`` or ``Stopped``."""
        return self._send(_status(job_id))

    def logs(self, job_id: str) -> list[Log]:
        """One Log per step, in step order, as written so far."""
        return self._send(_logs(job_id))

    def events(self, job_id: str) -> list[JobEvent]:
        """The job's history, oldest first."""
        return self._send(_events(job_id))

    def cancel(self, job_id: str, reason: str = "") -> CancelAccepted:
        """Ask the job to stop; 409 (``HadesClientError``) when it has ended already."""
        return self._send(_cancel(job_id, reason))

    def deliveries(self, job_id: str) -> Deliveries:
        """Every attempt to tell the client about the job (webhook and logs), oldest first."""
        return self._send(_deliveries(job_id))

    def redeliver(self, job_id: str) -> Redelivered:
        """Send the job-status webhook of an ended job once more; the recorded attempt."""
        return self._send(_redeliver(job_id))

    def timing(self, job_id: str) -> dict[str, Any] | None:
        """Where the job's time went, phase by phase (None before it started)."""
        return self._send(_timing(job_id))

    def follow(self, job_id: str) -> Iterator[Log | JobEnded]:
        """The job's log batches as they are written (backlog first), then its ``JobEnded``; reconnects when the
        stream breaks, each batch handed on once."""
        return self._follow(job_id, None)

    def wait(self, job_id: str, timeout: float | None = None) -> str:
        """The job's final status once it has ended, from the end of its log stream.

        Raises TimeoutError when ``timeout`` seconds pass first (noticed when the stream next speaks: at the
        latest with the server's keepalive, every 15 s, or when the stream falls silent for the rest of it).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for item in self._follow(job_id, deadline):
            if isinstance(item, JobEnded):
                return item.status
        raise AssertionError("unreachable: the stream ends with JobEnded")  # pragma: no cover

    def _follow(self, job_id: str, deadline: float | None) -> Iterator[Log | JobEnded]:
        follow = _Follow(job_id)
        while True:
            error: Exception | None = None
            try:
                yield from self._stream(follow, deadline)
                return
            except httpx.TransportError as broken:
                if isinstance(broken, httpx.ReadTimeout) and _passed(deadline):
                    raise TimeoutError(f"job {job_id} did not end in time") from broken
                error = broken
            except _Closed:
                pass
            time.sleep(follow.lost(error))

    def _stream(self, follow: _Follow, deadline: float | None) -> Iterator[Log | JobEnded]:
        timeout = httpx.Timeout(self._http.timeout.connect, read=_read_timeout(deadline))
        params = {"follow": "true"}
        with self._http.stream("GET", follow.path, params=params, headers=follow.headers(), timeout=timeout) as answer:
            if answer.status_code != 200:
                answer.read()
                raise refusal(answer)
            decoder = _SseDecoder()
            for line in answer.iter_lines():
                if _passed(deadline):
                    raise TimeoutError(f"{follow.path}: the job did not end in time")
                sse = decoder.line(line)
                item = follow.read(sse) if sse is not None else None
                if item is not None:
                    yield item
                    if isinstance(item, JobEnded):
                        return
        raise _Closed()


class AsyncHades:
    """The asyncio client: the same methods as ``Hades``, awaited; ``follow`` is an async iterator."""

    def __init__(
        self,
        base_url: str | None = None,
        auth_key: str | None = None,
        *,
        timeout: float = READ_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url, auth = _settings(base_url, auth_key)
        self._http = httpx.AsyncClient(base_url=url, auth=auth, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncHades:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _send(self, call: _Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.path, content=call.content, headers=call.headers)
        except httpx.TransportError as error:
            raise _unreachable(str(self._http.base_url), error) from error
        return call.answer(response)

    async def submit(self, job: Job) -> str:
        """Queue a job (a ``JobSpec``, a mapping of the ``POST /build`` body, or the body's bytes); its id."""
        return await self._send(_submit(job))

    async def job(self, job_id: str) -> JobDetail:
        """The job's detail: status, reason, steps, times, timing."""
        return await self._send(_detail(job_id))

    async def status(self, job_id: str) -> str:
        """``Queued``, ``Running``, ``Succeeded``, ``Failed`` or ``Stopped``."""
        return await self._send(_status(job_id))

    async def logs(self, job_id: str) -> list[Log]:
        """One Log per step, in step order, as written so far."""
        return await self._send(_logs(job_id))

    async def events(self, job_id: str) -> list[JobEvent]:
        """The job's history, oldest first."""
        return await self._send(_events(job_id))

    async def cancel(self, job_id: str, reason: str = "") -> CancelAccepted:
        """Ask the job to stop; 409 (``HadesClientError``) when it has ended already."""
        return await self._send(_cancel(job_id, reason))

    async def deliveries(self, job_id: str) -> Deliveries:
        """Every attempt to tell the client about the job (webhook and logs), oldest first."""
        return await self._send(_deliveries(job_id))

    async def redeliver(self, job_id: str) -> Redelivered:
        """Send the job-status webhook of an ended job once more; the recorded attempt."""
        return await self._send(_redeliver(job_id))

    async def timing(self, job_id: str) -> dict[str, Any] | None:
        """Where the job's time went, phase by phase (None before it started)."""
        return await self._send(_timing(job_id))

    async def follow(self, job_id: str) -> AsyncGenerator[Log | JobEnded, None]:
        """The job's log batches as they are written (backlog first), then its ``JobEnded``; reconnects when the
        stream breaks, each batch handed on once."""
        follow = _Follow(job_id)
        while True:
            error: Exception | None = None
            try:
                async for item in self._stream(follow):
                    yield item
                return
            except httpx.TransportError as broken:
                error = broken
            except _Closed:
                pass
            await asyncio.sleep(follow.lost(error))

    async def wait(self, job_id: str, timeout: float | None = None) -> str:
        """The job's final status once it has ended, from the end of its log stream; TimeoutError after
        ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            async for item in self.follow(job_id):
                if isinstance(item, JobEnded):
                    return item.status
        raise AssertionError("unreachable: the stream ends with JobEnded")  # pragma: no cover

    async def _stream(self, follow: _Follow) -> AsyncIterator[Log | JobEnded]:
        params = {"follow": "true"}
        async with self._http.stream("GET", follow.path, params=params, headers=follow.headers()) as answer:
            if answer.status_code != 200:
                await answer.aread()
                raise refusal(answer)
            decoder = _SseDecoder()
            async for line in answer.aiter_lines():
                sse = decoder.line(line)
                item = follow.read(sse) if sse is not None else None
                if item is not None:
                    yield item
                    if isinstance(item, JobEnded):
                        return
        raise _Closed()


class _Closed(Exception):
    """The server closed the log stream before the job's end (it restarted, or a proxy cut it)."""


def _passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _read_timeout(deadline: float | None) -> float:
    return READ_TIMEOUT if deadline is None else max(0.0, min(READ_TIMEOUT, deadline - time.monotonic()))
