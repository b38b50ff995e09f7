"""``Hades``: the blocking client."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from hades.client import calls
from hades.client.calls import READ_TIMEOUT, Job, JobEnded, JobEvent
from hades.client.stream import Follow, SseDecoder, StreamClosed, passed, read_timeout
from hades.core.logs import Log

if TYPE_CHECKING:
    from hades.http.wire.jobs import CancelAccepted, Deliveries, JobDetail, Redelivered

T = TypeVar("T")


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
        url, auth = calls.connection_settings(base_url, auth_key)
        self._http = httpx.Client(base_url=url, auth=auth, timeout=timeout, transport=transport)

    def __enter__(self) -> Hades:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def _send(self, call: calls.Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.path, content=call.content, headers=call.headers)
        except httpx.TransportError as error:
            raise calls.unreachable(str(self._http.base_url), error) from error
        return call.answer(response)

    def submit(self, job: Job, idempotency_key: str | None = None) -> str:
        """Queue a job (a ``JobSpec``, a mapping of the ``POST /build`` body, or the body's bytes); its id. With an
        ``idempotency_key`` (yours, standing for this one job), sending it again after an error answers the same
        job instead of making a second one."""
        return self._send(calls.submit(job, idempotency_key))

    def job(self, job_id: str) -> JobDetail:
        """The job's detail: status, reason, steps, times, timing."""
        return self._send(calls.detail(job_id))

    def status(self, job_id: str) -> str:
        """``Queued``, ``Running``, ``Succeeded``, ``Failed`` or ``Stopped``."""
        return self._send(calls.status(job_id))

    def logs(self, job_id: str, attempt: int | None = None) -> list[Log]:
        """One Log per step of the attempt the job is at (or of ``attempt``), in step order, as written so far."""
        return self._send(calls.logs(job_id, attempt))

    def events(self, job_id: str) -> list[JobEvent]:
        """The job's history, oldest first."""
        return self._send(calls.events(job_id))

    def cancel(self, job_id: str, reason: str = "") -> CancelAccepted:
        """Ask the job to stop; 409 (``HadesClientError``) when it has ended already."""
        return self._send(calls.cancel(job_id, reason))

    def add_stages(
        self, pipeline_id: str, stages: list[Any], token: str | None = None, stage: str | None = None
    ) -> dict[str, Any]:
        """Add stages to a running pipeline (from inside one of its stages: the token and the adding stage default to
        ``HADES_PIPELINE_TOKEN`` and ``HADES_STAGE``); the answer names the stages added."""
        token = token if token is not None else os.environ.get("HADES_PIPELINE_TOKEN", "")
        stage = stage if stage is not None else os.environ.get("HADES_STAGE")
        return self._send(calls.add_stages(pipeline_id, stages, token, stage))

    def deliveries(self, job_id: str) -> Deliveries:
        """Every attempt to tell the client about the job (webhook and logs), oldest first."""
        return self._send(calls.deliveries(job_id))

    def redeliver(self, job_id: str) -> Redelivered:
        """Send the job-status webhook of an ended job once more; the recorded attempt."""
        return self._send(calls.redeliver(job_id))

    def timing(self, job_id: str) -> dict[str, Any] | None:
        """Where the job's time went, phase by phase (None before it started)."""
        return self._send(calls.timing(job_id))

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
        follow = Follow(job_id)
        while True:
            error: Exception | None = None
            try:
                yield from self._stream(follow, deadline)
                return
            except httpx.TransportError as broken:
                if isinstance(broken, httpx.ReadTimeout) and passed(deadline):
                    raise TimeoutError(f"job {job_id} did not end in time") from broken
                error = broken
            except StreamClosed:
                pass
            time.sleep(follow.lost(error))

    def _stream(self, follow: Follow, deadline: float | None) -> Iterator[Log | JobEnded]:
        timeout = httpx.Timeout(self._http.timeout.connect, read=read_timeout(deadline))
        params = {"follow": "true"}
        with self._http.stream("GET", follow.path, params=params, headers=follow.headers(), timeout=timeout) as answer:
            if answer.status_code != 200:
                answer.read()
                raise calls.refusal(answer)
            decoder = SseDecoder()
            for line in answer.iter_lines():
                if passed(deadline):
                    raise TimeoutError(f"{follow.path}: the job did not end in time")
                sse = decoder.line(line)
                item = follow.read(sse) if sse is not None else None
                if item is not None:
                    yield item
                    if isinstance(item, JobEnded):
                        return
        raise StreamClosed()
