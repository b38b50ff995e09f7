"""Following a job's logs live: the backlog, then each batch as it is written, then the job's end.

One generator serves both streams that do this (``/jobs/{id}/logs?follow=true`` and the dashboard's
``/api/jobs/{id}/logs/stream``); each only dresses its items as its own frames.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from litestar.response import ServerSentEventMessage

from hades.core.logs import Log
from hades.http.services import ApiServices

KEEPALIVE_SECONDS = 15.0


@dataclass(frozen=True)
class Batch:
    """A batch of the job's lines and its position in the log stream."""

    seq: int
    log: Log


@dataclass(frozen=True)
class Heartbeat:
    """Nothing was written for a while: time for a keepalive comment."""


@dataclass(frozen=True)
class Ended:
    """The job has ended and every batch it wrote was handed on."""

    status: str
    reason: str | None


async def log_items(
    services: ApiServices, job_id: str, heartbeat: float, after: int = 0
) -> AsyncGenerator[Batch | Heartbeat | Ended, None]:
    """The job's batches until it has ended and all were handed on, heartbeats while it is quiet, then its end.

    Only the attempt the job is at is followed: an earlier attempt's batches are passed over, and a retry's follow
    on from its first. A job's batches are all in the stream before its terminal event is appended, so once the
    job has ended the newest batch at that moment is the last one: nothing is guessed with a drain timeout. With
    ``after`` (a client's ``Last-Event-ID``), the batches up to that log-stream sequence are not sent again.
    Once the API stops, the items end at the next quiet second (after the job's end, if it has come).
    """
    logs = services.logs
    sent, final_seq, idle, attempt = after, None, 0.0, 0
    async for item in logs.follow(job_id, after=after):
        if item is not None:
            sent, batch = item
            attempt = _newest_attempt(services, job_id, attempt, batch)
            if batch.attempt in (attempt, None):
                yield Batch(seq=sent, log=batch)
            idle = 0.0
        else:
            idle += 1.0
            if idle >= heartbeat:
                idle = 0.0
                yield Heartbeat()
        job = services.jobs.get(job_id)
        if job is not None and job.status.is_terminal:
            final_seq = final_seq if final_seq is not None else await logs.last_seq(job_id)
            if sent >= final_seq:
                yield Ended(status=job.status.value, reason=job.reason)
                return
        if item is None and services.stopping.is_set():
            return  # the API stops: the client resumes (Last-Event-ID) on another replica, or after the restart


def _newest_attempt(services: ApiServices, job_id: str, attempt: int, batch: Log) -> int:
    """The newest attempt known so far: the job's (its view may be ahead of the log: a retry queued) or the batch's
    (or behind it)."""
    job = services.jobs.get(job_id)
    return max(attempt, job.attempt if job is not None else 0, batch.attempt or 0)


async def follow_logs(
    services: ApiServices, job_id: str, last_event_id: str | None = None
) -> AsyncGenerator[ServerSentEventMessage, None]:
    """``log`` events until the job has ended and every batch it wrote was sent, then one ``end`` event.

    Each ``log`` event's id is its batch's log-stream sequence; a client reconnecting with ``Last-Event-ID``
    gets the batches after it (an id that is not a sequence is ignored: the whole log again).
    """
    if services.jobs.get(job_id) is None:
        yield ServerSentEventMessage(data=json.dumps({"error": f"job not found: {job_id}"}), event="error")
        return
    after = int(last_event_id) if last_event_id and last_event_id.isdigit() and len(last_event_id) < 20 else 0
    async for item in log_items(services, job_id, KEEPALIVE_SECONDS, after):
        if isinstance(item, Batch):
            yield ServerSentEventMessage(data=item.log.wire_json(), event="log", id=item.seq)
        elif isinstance(item, Heartbeat):
            yield ServerSentEventMessage(comment="keepalive", data=None)
        else:
            yield ServerSentEventMessage(data=json.dumps({"status": item.status, "reason": item.reason}), event="end")
