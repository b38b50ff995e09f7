"""The executor role: takes queued attempts from the priority queues and runs them.

The queues are the durable pull consumers ``executor-high|medium|low`` on the event stream, shared by every
executor process. With a free slot, an executor asks high, then medium, then low (strict priority, as the Go
Hades does), each with a no-wait pull so an empty queue costs one round trip. A plain NATS subscription on the
queued subjects rings a doorbell when new work arrives, so an idle executor neither polls hard nor sleeps
through new work; a slow poll still catches redeliveries.

A queue message stays un-acked while its job runs (its deadline extended with ``in_progress``) and is acked only
once the job reached a terminal event. A message whose job is no longer queued for that attempt is acked and
dropped, so a redelivery never runs an attempt twice; two executors racing for one attempt are decided by the
concurrency check on the ``started`` append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.adapters.nats.queues import NoWaitPuller
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.codec import decode_event
from hades.core.events import JobQueued
from hades.core.lifecycle import Status
from hades.core.ports import Clock, EventStore
from hades.core.spec import Priority
from hades.workers.attempt import AttemptRunner
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)

PRIORITY_ORDER = (Priority.HIGH, Priority.MEDIUM, Priority.LOW)
IDLE_POLL_SECONDS = 1.0


def queue_consumer(priority: Priority) -> str:
    """The durable consumer that is the queue of one priority."""
    return f"executor-{priority.value}"


class ExecutorWorker:
    """Fetches by priority into ``concurrency`` slots and runs each attempt to its end."""

    def __init__(
        self,
        nc: Client,
        store: EventStore,
        runner: AttemptRunner,
        clock: Clock,
        concurrency: int,
        ack_wait: float = 30.0,
    ) -> None:
        self._nc = nc
        self._store = store
        self._runner = runner
        self._clock = clock
        self._slots = asyncio.Semaphore(concurrency)
        self._ack_wait = ack_wait
        self._doorbell = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._pullers = {p: NoWaitPuller(nc, EVENTS_STREAM, queue_consumer(p)) for p in PRIORITY_ORDER}

    async def run(self) -> None:
        """Take work until cancelled; running attempts are then handed back to the queue."""
        bell = await self._nc.subscribe("hades.events.*.queued.>", cb=self._ring)
        for puller in self._pullers.values():
            await puller.start()
        try:
            while True:
                await self._slots.acquire()
                try:
                    msg = await self._next_message()
                except BaseException:
                    self._slots.release()
                    raise
                task = asyncio.create_task(self._handle(msg))
                self._running.add(task)
                task.add_done_callback(self._finished)
        finally:
            await bell.unsubscribe()
            await self._stop_running()
            for puller in self._pullers.values():
                await puller.stop()

    @property
    def busy(self) -> int:
        """Attempts running now."""
        return len(self._running)

    async def _ring(self, _msg: Msg) -> None:
        self._doorbell.set()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slots.release()

    async def _stop_running(self) -> None:
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def _next_message(self) -> Msg:
        while True:
            self._doorbell.clear()
            for priority in PRIORITY_ORDER:
                msg = await self._pullers[priority].pull()
                if msg is not None:
                    return msg
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._doorbell.wait(), IDLE_POLL_SECONDS)

    async def _handle(self, msg: Msg) -> None:
        try:
            event = decode_event(msg.data)
        except ValueError:
            log.error("dropping an undecodable queue message on %s", msg.subject)
            await msg.term()
            return
        if not isinstance(event, JobQueued):
            await msg.term()
            return
        keepalive = asyncio.create_task(self._keep_alive(msg))
        job: JobHandle | None = None
        try:
            job = await JobHandle.load(self._store, self._clock, event.job_id)
            if _queued_for(job, event):
                await self._runner.run(job, event.attempt)
            else:
                log.info("job %s attempt %d is no longer queued; dropping its message", event.job_id, event.attempt)
            await msg.ack()
        except asyncio.CancelledError:
            # Shutting down: if the attempt never started, let another executor have it at once; otherwise
            # the runner has handed it back as a new queued attempt and this message is done.
            if job is not None and not _queued_for(job, event):
                await asyncio.shield(msg.ack())
            else:
                await asyncio.shield(msg.nak())
            raise
        except Exception:
            log.exception("job %s: could not run attempt %d; it will be redelivered", event.job_id, event.attempt)
            await msg.nak(delay=5)
        finally:
            keepalive.cancel()

    async def _keep_alive(self, msg: Msg) -> None:
        """Extend the message's ack deadline while its job runs."""
        while True:
            await asyncio.sleep(self._ack_wait / 3)
            with contextlib.suppress(Exception):
                await msg.in_progress()


def _queued_for(job: JobHandle, queued: JobQueued) -> bool:
    """Whether this queue message is still the job's current place in a queue (not promoted, taken or ended)."""
    state = job.state
    return (
        state is not None
        and state.status is Status.QUEUED
        and state.attempt == queued.attempt
        and state.priority is queued.priority
    )
