"""``AsyncHades``: the asyncio client."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from hades.client import calls
from hades.client.calls import READ_TIMEOUT, Job, JobEnded, JobEvent
from hades.client.stream import Follow, SseDecoder, StreamClosed
from hades.core.logs import Log

if TYPE_CHECKING:
    from hades.http.wire.jobs import CancelAccepted, Deliveries, JobDetail, Redelivered

T = TypeVar("T")


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
        url, auth = calls.connection_settings(base_url, auth_key)
        self._http = httpx.AsyncClient(base_url=url, auth=auth, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncHades:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _send(self, call: calls.Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.path, content=call.content, headers=call.headers)
        except httpx.TransportError as error:
            raise calls.unreachable(str(self._http.base_url), error) from error
        return call.answer(response)

    async def submit(self, job: Job, idempotency_key: str | None = None) -> str:
        """Queue a job (a ``JobSpec``, a mapping of the ``POST /build`` body, or the body's bytes); its id. With an
        ``idempotency_key`` (yours, standing for this one job), sending it again after an error answers the same
        job instead of making a second one."""
        return await self._send(calls.submit(job, idempotency_key))

    async def job(self, job_id: str) -> JobDetail:
        """The job's detail: status, reason, steps, times, timing."""
        return await self._send(calls.detail(job_id))

    async def status(self, job_id: str) -> str:
        """``Queued``, ``Running``, ``Succeeded``, ``Failed`` or ``Stopped``."""
        return await self._send(calls.status(job_id))

    async def logs(self, job_id: str, attempt: int | None = None) -> list[Log]:
        """One Log per step of the attempt the job is at (or of ``attempt``), in step order, as written so far."""
        return await self._send(calls.logs(job_id, attempt))

    async def events(self, job_id: str) -> list[JobEvent]:
        """The job's history, oldest first."""
        return await self._send(calls.events(job_id))

    async def cancel(self, job_id: str, reason: str = "") -> CancelAccepted:
        """Ask the job to stop; 409 (``HadesClientError``) when it has ended already."""
        return await self._send(calls.cancel(job_id, reason))

    async def add_stages(
        self, pipeline_id: str, stages: list[Any], token: str | None = None, stage: str | None = None
    ) -> dict[str, Any]:
        """Add stages to a running pipeline (from inside one of its stages: the token and the adding stage default to
        ``HADES_PIPELINE_TOKEN`` and ``HADES_STAGE``); the answer names the stages added."""
        token = token if token is not None else os.environ.get("HADES_PIPELINE_TOKEN", "")
        stage = stage if stage is not None else os.environ.get("HADES_STAGE")
        return await self._send(calls.add_stages(pipeline_id, stages, token, stage))

    async def deliveries(self, job_id: str) -> Deliveries:
        """Every attempt to tell the client about the job (webhook and logs), oldest first."""
        return await self._send(calls.deliveries(job_id))

    async def redeliver(self, job_id: str) -> Redelivered:
        """Send the job-status webhook of an ended job once more; the recorded attempt."""
        return await self._send(calls.redeliver(job_id))

    async def timing(self, job_id: str) -> dict[str, Any] | None:
        """Where the job's time went, phase by phase (None before it started)."""
        return await self._send(calls.timing(job_id))

    async def follow(self, job_id: str) -> AsyncGenerator[Log | JobEnded, None]:
        """The job's log batches as they are written (backlog first), then its ``JobEnded``; reconnects when the
        stream breaks, each batch handed on once."""
        follow = Follow(job_id)
        while True:
            error: Exception | None = None
            try:
                async for item in self._stream(follow):
                    yield item
                return
            except httpx.TransportError as broken:
                error = broken
            except StreamClosed:
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

    async def _stream(self, follow: Follow) -> AsyncIterator[Log | JobEnded]:
        params = {"follow": "true"}
        async with self._http.stream("GET", follow.path, params=params, headers=follow.headers()) as answer:
            if answer.status_code != 200:
                await answer.aread()
                raise calls.refusal(answer)
            decoder = SseDecoder()
            async for line in answer.aiter_lines():
                sse = decoder.line(line)
                item = follow.read(sse) if sse is not None else None
                if item is not None:
                    yield item
                    if isinstance(item, JobEnded):
                        return
        raise StreamClosed()
