"""The job event log on JetStream: one subject tree per job, optimistic concurrency per job.

Appends carry ``Nats-Expected-Last-Subject-Sequence`` scoped to ``hades.events.<job_id>.>`` (so every kind of a
job's events shares one sequence check) and a ``Nats-Msg-Id`` derived from the event, so a retried append is
recognised. A stale retry is refused by the server as a conflict rather than deduplicated (stack-notes 4.15), so
on a conflict we look at the job's newest event: if it carries our msg id, the append had landed.

An append made while a trace span is current carries its ``traceparent`` header (tracing off: no span, no header),
and every read hands it on as ``Recorded.trace``, so the next role's span continues the job's trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

from nats import nuid
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.errors import APIError, NotFoundError
from prometheus_client import Histogram

from hades.adapters.nats.connection import UNAVAILABLE
from hades.adapters.nats.direct import DirectBatches
from hades.adapters.nats.following import StreamFollower, stream_seq
from hades.adapters.nats.subjects import job_event, job_events
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.codec import decode_event, encode_event
from hades.core.errors import ConcurrencyConflict, EventTooLarge, StoreUnavailable
from hades.core.events import Event, StagesAdded
from hades.core.ports import Recorded
from hades.tracing import TRACEPARENT, current_traceparent

log = logging.getLogger(__name__)

#: Refusals that mean "the log moved": a stale expectation (10071) or a batch whose msg id is stored (10201).
_ALREADY_THERE = (10071, 10201)
#: How long an append keeps asking a NATS that cannot answer yet: a stream's leader election after a cluster node
#: is lost takes a few seconds; a client's reconnect waits 2 s between attempts.
_OUTAGE_PATIENCE = 20.0
_OUTAGE_RETRY = 0.5
_MSG_ID = "Nats-Msg-Id"
#: Room kept for the headers of an append within the server's maximum message size.
_HEADER_ALLOWANCE = 1024
#: Events a replay holds in memory before it holds the server back.
_REPLAY_BATCH = 256  # events handed on at once while catching up
_REPLAY_BUFFER = 10_000
#: Events one batched direct get asks for; a longer history takes more round trips.
_HISTORY_BATCH = 256
#: Jobs whose ``submitted`` a process keeps after reading it (see ``NatsEventStore.submitted``).
_SUBMITTED_KEPT = 256
#: Events a history follows back along its chain before it reads by subject instead.
_MAX_CHAIN = 10_000


def event_subject(event: Event) -> str:
    """``hades.events.<job_id>.<token>``."""
    return job_event(event.job_id, event.subject_token)


def message_id(event: Event) -> str:
    """A stable id per logical append, so a retry of the same append is recognised as landed.

    It names who appends where several could: two executors racing to start one attempt append under
    different ids, so the loser sees a conflict, never "my append landed"; so do two deliveries of one queue
    message to the same executor (``JobStarted.claim``), whose second start is decided again on what may be a stale
    read and must never be taken for the first one's retry; likewise a manual webhook redelivery
    (``redelivered_by``) and the notifier's attempt that happen to take the same attempt number.
    """
    # The field values straight from the model's ``__dict__``: ``getattr`` of a field an event lacks goes through
    # pydantic's ``__getattr__`` and a raised AttributeError, which cost the scheduler a tenth of its CPU.
    values = vars(event)
    parts = [event.job_id, event.type, str(values.get("attempt", 0))]
    for field in ("step_index", "executor_id", "claim", "priority", "delivery_attempt", "redelivered_by", "stage"):
        value = values.get(field)
        if value is not None:
            parts.append(str(value))
    if isinstance(event, StagesAdded):  # each addition is its own append: named by the stages it adds
        parts.append(",".join(stage.name for stage in event.stages))
    return ":".join(parts)


class NatsEventStore:
    """``EventStore`` on the ``HADES_EVENTS`` stream."""

    def __init__(self, nc: Client, publish_timeout: float = 5.0, append_seconds: Histogram | None = None) -> None:
        self._nc = nc
        self._js = nc.jetstream(timeout=publish_timeout)
        self._timeout = publish_timeout
        self._append_seconds = append_seconds  # labelled by the first event's type
        self._append_timers: dict[str, Histogram] = {}  # its children by type: ``labels`` costs a lock and checks
        self._batches = DirectBatches(nc, EVENTS_STREAM)
        self._submitted: OrderedDict[str, asyncio.Future[Recorded | None]] = OrderedDict()

    async def append(self, job_id: str, events: Sequence[Event], expected_seq: int) -> int:
        """Append all of ``events`` or none, after ``expected_seq``; returns the sequence of the last one.

        Several events go in one JetStream atomic batch, so a crash cannot leave half of them in the log. Hades's
        own writers append one event at a time instead (``JobHandle.run``; ``lifecycle.conclusion`` covers the
        gap): a batch costs a file-backed stream about 40 times the server time of a plain append.
        """
        if not events:
            return expected_seq
        if self._append_seconds is None:
            return await self._append(job_id, events, expected_seq)
        timer = self._append_timers.get(events[0].type)
        if timer is None:
            timer = self._append_timers[events[0].type] = self._append_seconds.labels(events[0].type)
        started = time.perf_counter()
        try:
            return await self._append(job_id, events, expected_seq)
        finally:
            timer.observe(time.perf_counter() - started)

    async def _append(self, job_id: str, events: Sequence[Event], expected_seq: int) -> int:
        bodies = [encode_event(event) for event in events]
        self._check_size(bodies)
        headers = [{_MSG_ID: message_id(event)} for event in events]
        traceparent = current_traceparent()
        if traceparent is not None:
            for header in headers:
                header[TRACEPARENT] = traceparent
        headers[0]["Nats-Expected-Last-Subject-Sequence"] = str(expected_seq)
        headers[0]["Nats-Expected-Last-Subject-Sequence-Subject"] = job_events(job_id)
        try:
            if len(events) == 1:
                return await self._publish(event_subject(events[0]), bodies[0], headers[0])
            return await self._append_batch(events, bodies, headers)
        except APIError as error:
            if error.err_code not in _ALREADY_THERE:
                raise StoreUnavailable(f"the event log refused an append: {error.description}") from error
            last = await self._last(job_id)
            if last is not None and last[1] == headers[-1][_MSG_ID]:
                return last[0]  # our own append had landed; its ack was lost
            raise ConcurrencyConflict(job_id, expected_seq, last[0] if last else None) from error
        except (NatsError, TimeoutError) as error:
            raise StoreUnavailable(f"the event log is unreachable: {error!r}") from error

    async def _publish(self, subject: str, body: bytes, headers: dict[str, str]) -> int:
        """One append; a NATS that cannot answer yet (a cluster electing the stream's leader after losing a node,
        a server restarting) is asked again with the same headers for up to ``_OUTAGE_PATIENCE`` seconds.

        A retry of an append that had landed meets its own expected sequence moved on, and :meth:`_append`
        recognises its message id: the retry never appends twice.
        """
        deadline = time.monotonic() + _OUTAGE_PATIENCE
        while True:
            try:
                ack = await self._js.publish(subject, body, timeout=self._timeout, headers=headers)
                return int(ack.seq)
            except UNAVAILABLE as error:
                if time.monotonic() >= deadline:
                    raise
                log.info("the event log did not answer an append (%r); asking again", error)
                await asyncio.sleep(_OUTAGE_RETRY)

    def _check_size(self, bodies: list[bytes]) -> None:
        limit = self._nc.max_payload - _HEADER_ALLOWANCE
        for body in bodies:
            if len(body) > limit:
                raise EventTooLarge(len(body), limit)

    async def _append_batch(self, events: Sequence[Event], bodies: list[bytes], headers: list[dict[str, str]]) -> int:
        """A JetStream atomic batch (nats-server 2.12+): every message stored, or none."""
        batch_id = nuid.NUID().next().decode()
        last = len(events)
        for number, (event, body, header) in enumerate(zip(events, bodies, headers, strict=True), start=1):
            header = {**header, "Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(number)}
            if number < last:
                await self._nc.publish(event_subject(event), body, headers=header)
                continue
            header["Nats-Batch-Commit"] = "1"
            reply = await self._nc.request(event_subject(event), body, self._timeout, headers=header)
        answer = json.loads(reply.data)
        if "error" in answer:
            raise APIError(**answer["error"])
        return int(answer["seq"])

    async def _last(self, job_id: str) -> tuple[int, str | None] | None:
        try:
            raw = await self._js.get_last_msg(EVENTS_STREAM, job_events(job_id), direct=True)
        except NotFoundError:
            return None
        headers = raw.headers or {}
        return int(raw.seq or 0), headers.get(_MSG_ID)

    async def last_seq(self, job_id: str) -> int:
        """The job's newest sequence, 0 when it has none."""
        last = await self._last(job_id)
        return last[0] if last else 0

    async def submitted(self, job_id: str) -> Recorded | None:
        """The job's first event, its ``submitted``, found through the stream's subject index (cheap for the
        server, unlike a scan by wildcard); None for an unknown job.

        Readers of one job in one process share a read: the notifier's two consumers ask for the same job's
        ``submitted`` as its terminal event reaches both. A found event never changes, so the last few are kept;
        a miss is not (the job may be on a replica behind, or not written yet).
        """
        reading = self._submitted.get(job_id)
        if reading is None:
            reading = asyncio.ensure_future(self._read_submitted(job_id))
            self._submitted[job_id] = reading
            reading.add_done_callback(functools.partial(self._keep_submitted, job_id))
            while len(self._submitted) > _SUBMITTED_KEPT:
                self._submitted.popitem(last=False)
        return await asyncio.shield(reading)

    def _keep_submitted(self, job_id: str, reading: asyncio.Future[Recorded | None]) -> None:
        """Forget a read that found nothing or failed, so the next caller reads again."""
        failed = reading.cancelled() or reading.exception() is not None or reading.result() is None
        if failed and self._submitted.get(job_id) is reading:
            del self._submitted[job_id]

    async def _read_submitted(self, job_id: str) -> Recorded | None:
        try:
            raw = await self._js.get_last_msg(EVENTS_STREAM, job_event(job_id, "submitted"), direct=True)
        except NotFoundError:
            return None
        assert raw.seq is not None and raw.data is not None
        return _record(raw.seq, raw.data, raw.headers)

    async def history(self, job_id: str) -> list[Recorded]:
        """The job's events oldest first, read newest to oldest along the chain the appends stored.

        Every append records the job's previous sequence in its ``Nats-Expected-Last-Subject-Sequence`` header
        (a batch's later messages follow their first one directly), so from the job's newest event (found
        through the stream's subject index) each older one is a direct get by sequence: a few hundred
        microseconds of server time each, whatever the stream's size. A read by wildcard subject instead
        (``next_by_subj``) scans every message from the job's first to the end of the stream, which cost the
        server 2-3 ms per history on a 21,000-event stream and grows with it. A message without the chain
        headers (written by other means) falls back to that scan."""
        try:
            newest = await self._js.get_last_msg(EVENTS_STREAM, job_events(job_id), direct=True)
        except NotFoundError:
            return []
        assert newest.seq is not None and newest.data is not None
        return await self._chain(job_id, newest.seq, newest.data, newest.headers or {}, newest.subject or "")

    async def history_through(self, job_id: str, msg: Msg) -> list[Recorded]:
        """The job's events up to and including ``msg``, one of them as a consumer delivered it: the older ones
        read along the chain from it, without asking for the job's newest. (Anything appended after ``msg`` is not
        in it; a command decided on it then meets a conflict and re-reads, as on any stale view.)"""
        return await self._chain(job_id, stream_seq(msg), msg.data, msg.headers or {}, msg.subject)

    async def _chain(self, job_id: str, seq: int, data: bytes, headers: dict[str, str], subject: str) -> list[Recorded]:
        prefix = job_event(job_id, "")
        chain: list[Recorded] = []
        for _ in range(_MAX_CHAIN):
            if not subject.startswith(prefix):
                break
            chain.append(_record(seq, data, headers))
            previous = _previous_seq(seq, headers)
            if previous == 0:
                chain.reverse()
                return chain
            if previous is None or previous >= seq:
                break
            try:
                raw = await self._js.get_msg(EVENTS_STREAM, seq=previous, direct=True)
            except NotFoundError:
                break
            assert raw.seq is not None and raw.data is not None
            seq, data, headers, subject = raw.seq, raw.data, raw.headers or {}, raw.subject or ""
        log.warning("job %s: its events do not chain back to its first; reading them by subject", job_id)
        return await self._scan_history(job_id)

    async def _scan_history(self, job_id: str) -> list[Recorded]:
        """The job's events by subject: its ``submitted``, then the rest by batched direct gets from there."""
        first = await self.submitted(job_id)
        if first is None:
            return []
        recorded = [first]
        subject = job_events(job_id)
        while True:
            messages, more = await self._batches.get(recorded[-1].seq + 1, subject, _HISTORY_BATCH, self._timeout)
            for raw in messages:
                headers = raw.headers or {}
                recorded.append(_record(int(headers["Nats-Sequence"]), raw.data, headers))
            if not more or not messages:
                return recorded

    async def replay(self, from_seq: int = 1) -> AsyncGenerator[Recorded, None]:
        """Every event from ``from_seq``, then live ones, one at a time (see :meth:`replay_batches`)."""
        async with contextlib.aclosing(self.replay_batches(from_seq)) as batches:
            async for batch in batches:
                for recorded in batch:
                    yield recorded

    async def replay_batches(self, from_seq: int = 1) -> AsyncGenerator[list[Recorded], None]:
        """Every event from ``from_seq``, then live ones, through an ordered consumer (the fast read path), in
        batches of whatever has arrived (one event when following live, hundreds while catching up); each event
        once and in order through NATS restarts (see :mod:`~hades.adapters.nats.following`).

        Messages arrive through a callback into a bounded buffer that is drained without a wait per message;
        a full buffer holds the callback back, which holds back flow control, so the server slows down rather
        than the client dropping anything. Handing on batches spares the reader a resumption per event.
        """
        buffer: deque[tuple[int, Msg]] = deque()
        arrived, drained = asyncio.Event(), asyncio.Event()

        async def collect(seq: int, msg: Msg) -> None:
            while len(buffer) >= _REPLAY_BUFFER:
                drained.clear()
                await drained.wait()
            buffer.append((seq, msg))
            arrived.set()

        follower = StreamFollower(self._nc, EVENTS_STREAM, "hades.events.>", from_seq, collect, "the event log")
        await follower.start()
        take = buffer.popleft
        try:
            while True:
                await arrived.wait()
                arrived.clear()
                while buffer:
                    batch = [_recorded(*take()) for _ in range(min(len(buffer), _REPLAY_BATCH))]
                    if len(buffer) < _REPLAY_BUFFER // 2:
                        drained.set()
                    yield batch
        finally:
            await follower.stop()

    async def watch(self, job_id: str, on_event: Callable[[Event], None]) -> Callable[[], Awaitable[None]]:
        """Call ``on_event`` for each event published on the job's subjects from now on; returns how to stop.

        A plain subscription: fast, but it also sees publishes the stream refused, so use it as a hint only.
        """

        async def deliver(msg: Msg) -> None:
            try:
                on_event(decode_event(msg.data))
            except ValueError:
                log.warning("undecodable event on %s", msg.subject)

        subscription = await self._nc.subscribe(job_events(job_id), cb=deliver)
        return subscription.unsubscribe

    async def stream_last_seq(self) -> int:
        """The newest sequence in the whole event stream (0 when empty)."""
        info = await self._js.stream_info(EVENTS_STREAM)
        return int(info.state.last_seq)


def _record(seq: int, data: bytes, headers: dict[str, str] | None) -> Recorded:
    """A stored event with the id it was appended under and the trace it carries, as every read hands it on."""
    if not headers:
        return Recorded(seq, decode_event(data))
    return Recorded(seq, decode_event(data), headers.get(_MSG_ID), headers.get(TRACEPARENT))


def _recorded(seq: int, msg: Msg) -> Recorded:
    """A message of the replay's ordered consumer (at stream sequence ``seq``) as a stored event."""
    return _record(seq, msg.data, msg.headers)


def _previous_seq(seq: int, headers: dict[str, str]) -> int | None:
    """The sequence of the job's event before this one (0: this is its first), from the headers its append
    stored; None when they do not say."""
    batch_position = headers.get("Nats-Batch-Sequence")
    if batch_position is not None and batch_position != "1":
        return seq - 1  # a batch is stored in one piece: its later messages follow the first directly
    expected = headers.get("Nats-Expected-Last-Subject-Sequence")
    return int(expected) if expected is not None and expected.isdigit() else None
