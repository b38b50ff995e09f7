"""The notifier role: once a job has ended, POST its logs to the job's ``callback_url`` (contract §5).

The durable consumer ``notifier`` (streams.yaml) sees every terminal event (``succeeded``, ``failed``,
``stopped``). For a job with a ``callback_url`` whose delivery is not settled yet, each delivery of that message is
one attempt: read the logs, POST them, record the outcome as ``logs_forwarded`` / ``logs_forward_failed``. A failed
attempt that is not the last is ``nak``-ed with an exponential, fully jittered delay, so JetStream keeps the retry
schedule and the attempt number is the message's delivery count: a notifier that dies mid-way loses nothing.

A retried job's log subject holds every attempt's batches (each names its attempt); the forward carries the ones
of the attempt the job ended with, one Log per step of it. All of the job's logs are in when its terminal event
is: every step's batches are published and acknowledged by the stream before that step's ``step_finished`` (which
records ``last_log_seq``) is appended, and the terminal event comes after the last ``step_finished``. Reading the
job's log subject up to its last message therefore reads every batch, with no drain timeout. (A cancelled or
timed-out step closes its writer before the job's ``stopped`` or ``failed`` is appended; only an executor declared
lost while it is in fact still writing can add batches later, and those are of an earlier attempt.)

Delivery is at least once: a POST whose outcome could not be recorded is made again on the next delivery.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.adapters.http_delivery import DeliveryResult
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.backoff import backoff_delay
from hades.core.codec import decode_event
from hades.core.errors import InvalidTransition
from hades.core.events import FollowUps, JobFailed, JobStopped, JobSubmitted, JobSucceeded
from hades.core.lifecycle import Command, JobState, RecordLogsDelivery
from hades.core.logs import Log, coalesce, of_attempt
from hades.core.ports import Clock, EventStore, LogStore
from hades.workers.consumer import PullConsumer, Settle, delivered
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)

NOTIFIER_CONSUMER = "notifier"
#: The terminal kinds the consumer is filtered on (streams.yaml declares the same list).
TERMINAL_SUBJECTS = ("hades.events.*.succeeded", "hades.events.*.failed", "hades.events.*.stopped")

#: POST ``body`` to ``url``; never raises for what the receiver or the network does.
Send = Callable[[str, bytes], Awaitable[DeliveryResult]]
#: One attempt for a job, given the message's delivery count, the terminal event's stream sequence and what that
#: event says the end sets going (None in events from before it said): the delay before the next attempt, or None
#: when done.
Attempt = Callable[[str, int, int, FollowUps | None], Awaitable[float | None]]
#: When the job's history was read from a replica behind the terminal event in hand (on an R3 stream followers
#: answer direct gets too), the event is had again this much later, not taken for "nothing to deliver"; up to
#: BEHIND_TRIES deliveries (a replica lags milliseconds; a history that never shows up is given up on).
BEHIND_RETRY_SECONDS = 0.5
BEHIND_TRIES = 40


@dataclass(frozen=True, slots=True)
class NotifierSettings:
    """How hard the notifier tries: attempts in all, the timeout of one, and the backoff between them (seconds)."""

    max_attempts: int = 6
    timeout: float = 10.0
    backoff_base: float = 1.0
    backoff_max: float = 60.0


def logs_payload(batches: list[Log]) -> list[dict[str, Any]]:
    """The attempt's logs as ``GET /jobs/{id}/logs`` gives them, without the wrapper: one Log per step, in order."""
    return [batch.wire() for batch in coalesce(batches)]


def recorded_url(url: str) -> str:
    """The URL as events record it: without credentials, query or fragment (the events route shows it)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<unparseable url>"
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


class LogForwarder:
    """Makes one delivery attempt of a finished job's logs and records it through the lifecycle."""

    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        logs: LogStore,
        send: Send,
        settings: NotifierSettings,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self._clock = clock
        self._logs = logs
        self._send = send
        self._settings = settings
        self._draw = draw

    async def forward(
        self, job_id: str, delivered: int, seq: int = 0, follow_ups: FollowUps | None = None
    ) -> float | None:
        """Attempt the delivery (``delivered`` = the message's delivery count, ``seq`` the terminal event's
        sequence, ``follow_ups`` what it says the end sets going); the delay before the next attempt, or None when
        the message is done with (delivered, given up, or nothing to deliver)."""
        wanted = await wants_a_delivery_to(self._store, job_id, "callback_url", follow_ups)
        if not wanted:
            return behind(job_id, delivered) if wanted is None else None
        job = await JobHandle.load(self._store, self._clock, job_id)
        if job.seq < seq:
            return behind(job_id, delivered)
        state = job.state
        if state is None or not _wants_delivery(state):
            return None
        # Normally the delivery count; never below what the job's history has recorded already (a consumer that
        # was re-created counts from 1 again).
        attempt = max(delivered, state.logs_delivery_attempts + 1)
        url = state.spec.callback_url
        payload, lines = await self._payload(state)
        result = await self._send(url, json.dumps(payload).encode())
        final = not result.ok and attempt >= self._settings.max_attempts
        command = _record(url, attempt, result, lines, final)
        return await record_attempt(job, command, attempt, result, final, self._settings, self._draw())

    async def _payload(self, state: JobState) -> tuple[list[dict[str, Any]], int]:
        """The logs to forward and their line count: the job's own, or a pipeline's stages' in launch order, each
        Log naming its ``stage``; of each job the attempt it ended with (a retried job's stream holds them all)."""
        owners: list[tuple[str | None, str]] = [(None, state.job_id)]
        if state.progress is not None:
            owners = [(launch.name, launch.job_id) for launch in state.progress.launched]
        payload: list[dict[str, Any]] = []
        lines = 0
        for stage, job_id in owners:
            attempt = state.attempt if job_id == state.job_id else await self._attempt_of(job_id)
            batches = of_attempt(await self._logs.read(job_id), attempt)
            lines += sum(len(batch.logs or ()) for batch in batches)
            entries = logs_payload(batches)
            payload += entries if stage is None else [{"stage": stage, **entry} for entry in entries]
        return payload, lines

    async def _attempt_of(self, job_id: str) -> int | None:
        """The attempt a pipeline's stage job is at (None: its history is not found, so all its batches)."""
        stage = (await JobHandle.load(self._store, self._clock, job_id)).state
        return stage.attempt if stage is not None else None


def behind(job_id: str, delivered: int) -> float | None:
    """The retry delay for a terminal event whose job history was read from a replica behind it."""
    if delivered < BEHIND_TRIES:
        return BEHIND_RETRY_SECONDS
    log.error("job %s: its history never caught up with its terminal event; nothing delivered", job_id)
    return None


def _wants_delivery(state: JobState) -> bool:
    return state.status.is_terminal and bool(state.spec.callback_url) and state.logs_delivery is None


async def wants_a_delivery_to(
    store: EventStore,
    job_id: str,
    url_field: Literal["callback_url", "status_callback_url"],
    follow_ups: FollowUps | None = None,
) -> bool | None:
    """Whether the job's spec names a URL in ``url_field``: most jobs have none, and then their history need not
    be read (nor decoded) to learn that there is nothing to deliver.

    The terminal event says so itself (``follow_ups``), and then nothing is read; one written before it did is
    answered from the job's first event alone. None when that ``submitted`` is not found: the caller holds the
    job's terminal event, so the read came from a replica behind it, and must be made again.
    """
    if follow_ups is not None:
        return follow_ups.logs if url_field == "callback_url" else follow_ups.webhook
    first = await store.submitted(job_id)
    if first is None:
        return None
    return isinstance(first.event, JobSubmitted) and bool(getattr(first.event.spec, url_field))


def _record(url: str, attempt: int, result: DeliveryResult, lines: int, final: bool) -> RecordLogsDelivery:
    return RecordLogsDelivery(
        url=recorded_url(url),
        delivery_attempt=attempt,
        duration_ms=result.duration_ms,
        status_code=result.status_code,
        error=result.error,
        lines=lines,
        final=final,
    )


class RetryPolicy(Protocol):
    """How often and how far apart a delivery is tried (both deliveries' frozen settings fit)."""

    @property
    def backoff_base(self) -> float: ...

    @property
    def backoff_max(self) -> float: ...


async def record_attempt(
    job: JobHandle,
    command: Command,
    attempt: int,
    result: DeliveryResult,
    final: bool,
    policy: RetryPolicy,
    draw: float,
) -> float | None:
    """Record one delivery attempt; the delay before the next one, or None when the delivery is settled."""
    assert job.state is not None
    try:
        await job.run(job.state.job_id, command)
    except InvalidTransition as reason:
        log.warning("%s of job %s not recorded: %s", type(command).__name__, job.state.job_id, reason)
        return None
    if result.ok or final:
        return None
    return backoff_delay(attempt, policy.backoff_base, policy.backoff_max, draw)


async def settle(attempt: Attempt, msg: Msg) -> None:
    """One delivery of a terminal event: make the job's attempt, then ack, or nak with the backoff delay.

    An error before anything is settled (the event log unreachable) leaves the message unacknowledged, so it is
    redelivered after the consumer's ack wait: the next attempt.
    """
    try:
        event = decode_event(msg.data)
    except ValueError:
        log.error("dropping an undecodable event on %s", msg.subject)
        await msg.term()
        return
    follow_ups = event.follow_ups if isinstance(event, JobSucceeded | JobFailed | JobStopped) else None
    seq, count = delivered(msg)
    retry_in = await attempt(event.job_id, count, seq, follow_ups)
    if retry_in is None:
        await msg.ack()
    else:
        await msg.nak(delay=retry_in)


def terminal_consumer(nc: Client, durable: str, attempt: Attempt) -> PullConsumer:
    """A durable consumer on the terminal events (``notifier`` or ``webhooks`` from streams.yaml) whose every
    delivery is one ``attempt``; the handler settles each message itself (``settle``)."""

    async def on_job_ended(msg: Msg) -> None:
        await settle(attempt, msg)

    return PullConsumer(
        nc,
        EVENTS_STREAM,
        durable,
        on_job_ended,
        subjects=TERMINAL_SUBJECTS,
        settle=Settle.MANUAL,
        batch=10,
        max_workers=16,  # deliveries run side by side: one slow receiver does not hold up the others
    )


def notifier_consumer(nc: Client, forwarder: LogForwarder) -> PullConsumer:
    """The log forwarding subscription, bound to the durable consumer ``notifier`` from streams.yaml."""
    return terminal_consumer(nc, NOTIFIER_CONSUMER, forwarder.forward)
