"""The log stream (``GET /jobs/{id}/logs?follow=true``): Server-Sent Events decoded, and resumed across reconnects."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from hades.client.calls import READ_TIMEOUT, RECONNECTS, HadesClientError, HadesUnreachable, JobEnded, job_path
from hades.core.logs import Log

# -- the log stream ------------------------------------------------------------------------------------------------


@dataclass
class Sse:
    """One Server-Sent Event."""

    event: str = "message"
    data: list[str] = field(default_factory=list)
    id: str | None = None


class SseDecoder:
    """Server-Sent Events from the stream's lines (the WHATWG rules this server's frames need)."""

    def __init__(self) -> None:
        self._current = Sse()

    def line(self, line: str) -> Sse | None:
        """Feed one line; a blank line completes the event being read."""
        if not line:
            event, self._current = self._current, Sse()
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


class Follow:
    """The reading of one job's log stream across reconnects.

    The server numbers each ``log`` event with the batch's position in the log stream (increasing), a pipeline's
    as ``<stage>:<position>`` in the stage's log (its stages come one after another). A reconnect sends
    ``Last-Event-ID`` and the server resumes after it; a server that sends the backlog again instead (an older one)
    is met here too: the batches up to the last one seen are dropped, so each batch is handed on once, in order.
    """

    def __init__(self, job_id: str) -> None:
        self.path = job_path(job_id, "/logs")
        self.last_id: str | None = None
        self.failures = 0

    def headers(self) -> dict[str, str]:
        """The request's headers, with the resume point once there is one."""
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = self.last_id
        return headers

    def read(self, sse: Sse) -> Log | JobEnded | None:
        """The item an event carries; None for a batch seen before a reconnect."""
        data = "\n".join(sse.data)
        if sse.event == "end":
            answer = json.loads(data)
            return JobEnded(status=answer["status"], reason=answer.get("reason"))
        if sse.event == "error":  # the only error the stream reports is an unknown job
            raise HadesClientError(404, json.loads(data)["error"])
        if sse.event != "log":
            return None
        if _seen(sse.id, self.last_id):
            return None
        self.last_id = sse.id if sse.id is not None else self.last_id
        self.failures = 0
        return Log.model_validate_json(data)

    def lost(self, error: Exception | None) -> float:
        """The stream broke (or closed without its end): how long to wait before reconnecting."""
        self.failures += 1
        if self.failures > RECONNECTS:
            raise HadesUnreachable(f"the log stream of {self.path} broke {RECONNECTS} times: {error}") from error
        return 0.2 * 2.0 ** (self.failures - 1)


def _position(ident: str) -> tuple[str, int] | None:
    """An event id as (stage, position), the stage ``""`` for a job's own ids; None for an id that is neither."""
    stage, _, seq = ident.rpartition(":")
    return (stage, int(seq)) if seq.isdigit() else None


def _seen(ident: str | None, last: str | None) -> bool:
    """Whether the batch ``ident`` numbers was handed on already (its stage's, at or before the last one seen)."""
    here = _position(ident) if ident is not None else None
    before = _position(last) if last is not None else None
    return here is not None and before is not None and here[0] == before[0] and here[1] <= before[1]


class StreamClosed(Exception):
    """The server closed the log stream before the job's end (it restarted, or a proxy cut it)."""


def passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def read_timeout(deadline: float | None) -> float:
    return READ_TIMEOUT if deadline is None else max(0.0, min(READ_TIMEOUT, deadline - time.monotonic()))
