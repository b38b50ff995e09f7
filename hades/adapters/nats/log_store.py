"""Job logs on the ``HADES_LOGS`` stream: batched writes per step, reads straight from the stream by subject.

A step's lines go out in batches of at most 1,000 lines or 256 KiB, and at least once a second, so a quiet step
still shows up live. Batches are published without waiting for each ack (a few in flight, in order on the one
connection: a chatty step is not held to one round trip per batch), and every ack is awaited when the step closes,
so the step knows the sequence of its last batch: ``step_finished`` records it, and "all of this step's logs are
in" is then an exact check rather than a drain timeout.

Lines are buffered as plain dicts and a batch is serialised in one ``pydantic_core.to_json`` call: the bytes are
those of ``Log.model_dump_json`` (a test says so), without a validated ``LogEntry`` built per line (that was a fifth
of the writer's time at a million lines).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import TypedDict

from nats import nuid
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy, PubAck
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError
from pydantic_core import to_json

from hades.adapters.nats.connection import UNAVAILABLE
from hades.adapters.nats.following import HEARTBEAT, StreamFollower, stream_seq
from hades.adapters.nats.subjects import job_logs
from hades.adapters.nats.topology import LOGS_STREAM
from hades.core.logs import Log, LogBudget, OutputStream
from hades.tasks import stop_all

BATCH_LINES = 1000
BATCH_BYTES = 256 * 1024
BATCH_SECONDS = 1.0
IN_FLIGHT = 16  # batches published but not yet acknowledged, before a writer waits for the oldest
#: Batches all the writers of one store may have unacknowledged (each writer also keeps to ``IN_FLIGHT``).
PUBLISHER_PENDING = 4000
_OUTAGE_PATIENCE = 20.0  # as the event store's appends: long enough for a stream's leader election
_OUTAGE_RETRY = 0.5


class _Line(TypedDict):
    """One buffered line, keyed and ordered as ``LogEntry``'s fields."""

    timestamp: datetime
    message: str
    output_stream: OutputStream


def batch_json(job_id: str, container_id: str, step_id: int, attempt: int | None, entries: list[_Line] | None) -> bytes:
    """A batch as ``Log(...).model_dump_json()`` encodes it (keys in the model's field order), built from plain
    dicts."""
    batch = {"job_id": job_id, "container_id": container_id, "step_id": step_id, "attempt": attempt, "logs": entries}
    return to_json(batch)


class StepLogWriter:
    """``StepLogs`` for one step of one attempt: buffers lines and publishes them in ordered batches, each naming
    the attempt, so a retried job's views can show the attempt that counts."""

    def __init__(
        self,
        nc: Client,
        job_id: str,
        step_id: int,
        budget: LogBudget | None = None,
        publish_timeout: float = 5.0,
        publisher: JetStreamContext | None = None,
        writer_id: str | None = None,
        attempt: int | None = None,
    ) -> None:
        # A JetStream context subscribes to an inbox of its own for its first asynchronous publish and keeps it for
        # good, so writers share their store's (``publisher``): one per writer cost every step a SUB, and the
        # executor's connection one subscription (and its task) more per step it ever ran.
        self._js = publisher or nc.jetstream(timeout=publish_timeout, publish_async_max_pending=IN_FLIGHT * 2)
        self._ack_timeout = publish_timeout
        self._in_flight: deque[tuple[bytes, dict[str, str], asyncio.Future[PubAck]]] = deque()
        # batch ids unique to this writer, so a retry is deduplicated (a store hands out ids from one NUID: making
        # one seeds a random generator, which cost more than the step's whole log)
        self._writer = writer_id or nuid.NUID().next().decode()
        self._batches = 0
        self._pending_bytes = 0
        self._job_id = job_id
        self._step_id = step_id
        self._attempt = attempt
        self._container_id = ""
        self._pending: list[_Line] = []
        self._lock = asyncio.Lock()
        self._ticker: asyncio.Task[None] | None = None
        self.last_seq: int | None = None
        self.lines = 0
        self._budget = budget or LogBudget()
        self._dropped_before = self._budget.dropped

    async def open(self, container_id: str) -> None:
        """Publish the step's empty slot and start the once-a-second flush."""
        self._container_id = container_id
        await self._publish(None)
        self._ticker = asyncio.create_task(self._tick(), name=f"log-flush-{self._job_id}-{self._step_id}")

    async def write(self, stream: OutputStream, timestamp: datetime, message: str) -> None:
        """Buffer one line (within the job's budget); a full batch is published before this returns."""
        kept = self._budget.admit(message)
        if kept is None:
            return
        self._pending.append({"timestamp": timestamp, "message": kept, "output_stream": stream})
        self.lines += 1
        self._pending_bytes += len(kept)
        if len(self._pending) >= BATCH_LINES or self._pending_bytes >= BATCH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        """Publish what is buffered."""
        async with self._lock:
            if not self._pending:
                return
            batch, self._pending, self._pending_bytes = self._pending, [], 0
            await self._publish(batch)

    async def close(self) -> int | None:
        """Flush the rest and stop the ticker; returns the sequence of the step's last batch."""
        if self._ticker is not None:
            await stop_all([self._ticker])
            self._ticker = None
        if self._container_id:
            notice = self._budget.closing_notice() if self._budget.dropped > self._dropped_before else None
            if notice is not None:
                self._pending.append({"timestamp": datetime.now(UTC), "message": notice, "output_stream": "stderr"})
            await self.flush()
        try:
            while self._in_flight:
                await self._settle_oldest()
        finally:
            # Batches given up on (NATS gone for longer than the patience) stop waiting for their acks, which frees
            # their places in the publishing context every writer of the store shares.
            for _, _, pending in self._in_flight:
                pending.cancel()
            self._in_flight.clear()
        return self.last_seq

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(BATCH_SECONDS)
            await self.flush()

    async def _publish(self, entries: list[_Line] | None) -> None:
        if len(self._in_flight) >= IN_FLIGHT:
            await self._settle_oldest()
        body = batch_json(self._job_id, self._container_id, self._step_id, self._attempt, entries)
        headers = {"Nats-Msg-Id": f"{self._writer}:{self._batches}"}
        self._batches += 1
        self._in_flight.append(
            (body, headers, await self._js.publish_async(job_logs(self._job_id), body, headers=headers))
        )

    async def _settle_oldest(self) -> None:
        """Wait for the oldest batch's ack; one that NATS could not take yet (a cluster electing the stream's leader,
        a server restarting) is sent again for up to ``_OUTAGE_PATIENCE`` seconds (raising if refused or out of time).

        The wait is bounded: nats-py's ``publish_async`` future never resolves when its reply is lost (the server
        died between taking the batch and answering, or answered with an error: nats-io/nats.py#985), and a step
        that waited on it would hang forever. Its batch id makes the resend land at most once.
        """
        body, headers, pending = self._in_flight.popleft()
        try:
            ack = await asyncio.wait_for(pending, self._ack_timeout)  # cancelling the future frees its slot
        except UNAVAILABLE:
            ack = await self._resend(body, headers)
        self.last_seq = max(self.last_seq or 0, int(ack.seq))  # a resent batch may land after later ones

    async def _resend(self, body: bytes, headers: dict[str, str]) -> PubAck:
        deadline = time.monotonic() + _OUTAGE_PATIENCE
        while True:
            try:
                return await self._js.publish(job_logs(self._job_id), body, headers=headers)
            except UNAVAILABLE:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(_OUTAGE_RETRY)


class NatsLogStore:
    """``LogStore`` reading a job's batches straight from the stream by subject."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._publisher: JetStreamContext | None = None
        self._writer_ids = nuid.NUID()

    def writer(self, job_id: str, step_id: int, budget: LogBudget, attempt: int) -> StepLogWriter:
        """A writer for one step of a job's attempt, drawing on the attempt's log budget; every writer of this
        store shares one JetStream context, so one inbox subscription answers all their batches."""
        if self._publisher is None:
            self._publisher = self._nc.jetstream(timeout=5.0, publish_async_max_pending=PUBLISHER_PENDING)
        writer_id = self._writer_ids.next().decode()
        return StepLogWriter(
            self._nc, job_id, step_id, budget, publisher=self._publisher, writer_id=writer_id, attempt=attempt
        )

    async def read(self, job_id: str) -> list[Log]:
        """Every batch stored for the job, oldest first (empty for an unknown job)."""
        subject = job_logs(job_id)
        try:
            info = await self._js.get_last_msg(LOGS_STREAM, subject, direct=True)
        except NotFoundError:
            return []
        last = int(info.seq or 0)
        config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        sub = await self._js.subscribe(
            subject, stream=LOGS_STREAM, ordered_consumer=True, config=config, idle_heartbeat=HEARTBEAT
        )
        batches: list[Log] = []
        try:
            while True:
                msg = await sub.next_msg(timeout=10)
                batches.append(Log.model_validate_json(msg.data))
                if stream_seq(msg) >= last:
                    return batches
        finally:
            await sub.unsubscribe()

    async def last_seq(self, job_id: str) -> int:
        """The stream sequence of the job's newest batch, 0 when it has none."""
        try:
            info = await self._js.get_last_msg(LOGS_STREAM, job_logs(job_id), direct=True)
        except NotFoundError:
            return 0
        return int(info.seq or 0)

    async def follow(
        self, job_id: str, idle: float = 1.0, after: int = 0
    ) -> AsyncGenerator[tuple[int, Log] | None, None]:
        """The job's batches from the first (or those stored after sequence ``after``: a client resuming), then
        live ones, each once and in order through NATS restarts; yields None after ``idle`` seconds without any, so
        the caller can decide whether to keep waiting."""
        queue: asyncio.Queue[tuple[int, Log]] = asyncio.Queue(maxsize=1000)

        async def collect(seq: int, msg: Msg) -> None:
            await queue.put((seq, Log.model_validate_json(msg.data)))

        follower = StreamFollower(self._nc, LOGS_STREAM, job_logs(job_id), after + 1, collect, f"job {job_id}'s log")
        await follower.start()
        try:
            while True:
                try:
                    yield await asyncio.wait_for(queue.get(), idle)
                except TimeoutError:
                    yield None
        finally:
            await follower.stop()
