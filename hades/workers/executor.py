"""The executor role: takes queued attempts from the priority queues and runs them.

With a free slot an executor pulls from its queues by priority (``hades.workers.executor_queues``) and runs each
message's attempt in a task of its own (``hades.workers.queue_message``), keeping the message alive while its job
runs (``hades.workers.keepalive``) and never starting an attempt that runs here already
(``hades.workers.redelivery``). A plain NATS subscription on the queued subjects rings a doorbell when new work
arrives, so an idle executor neither polls hard nor sleeps through new work; a slow poll still catches
redeliveries. This module wires those together: the slots (and the global cap's leases), the doorbell, the
heartbeat and the sweep, start-up and the graceful drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError

from hades.adapters.nats.connection import log_failure
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.pools import PRIORITY_ORDER, Pools, queue_consumer
from hades.adapters.nats.queues import NoWaitPuller
from hades.adapters.nats.slots import Lease, SlotLeases
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.constraints import Placement
from hades.core.ports import Clock, Executor
from hades.metrics import ProcessMetrics
from hades.tasks import stop_all
from hades.workers.attempt import AttemptRunner
from hades.workers.executor_queues import ExecutorQueues
from hades.workers.keepalive import KeepAlive
from hades.workers.queue_message import QueueMessages
from hades.workers.redelivery import RunningAttempts

log = logging.getLogger(__name__)

__all__ = ["PRIORITY_ORDER", "ExecutorOptions", "ExecutorWorker", "queue_consumer"]

#: Rings ``on_queued`` whenever a job is queued; returns how to stop (``JobInterruptions.ring``).
Doorbell = Callable[[Callable[[], None]], Awaitable[Callable[[], Awaitable[None]]]]

IDLE_POLL_SECONDS = 1.0
#: How often an executor looks for a free slot while the global cap is reached.
CAP_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class ExecutorOptions:
    """How one executor process takes and keeps work."""

    executor_id: str
    concurrency: int = 1
    shutdown_grace: float = 30.0
    sweep_interval: float = 30.0
    labels: dict[str, str] = field(default_factory=dict)
    #: Takes every job whose placement its engine can express and lets the engine place it (Kubernetes: node
    #: affinity and requests; ``hades.adapters.k8s.placement``), rather than matching its own labels.
    places: Callable[[Placement], bool] | None = None


class ExecutorWorker:
    """Fetches by priority into ``concurrency`` slots and runs each attempt to its end."""

    def __init__(
        self,
        nc: Client,
        store: NatsEventStore,
        runner: AttemptRunner,
        executor: Executor,
        clock: Clock,
        options: ExecutorOptions,
        heartbeats: Heartbeats,
        cap: SlotLeases | None = None,
        metrics: ProcessMetrics | None = None,
        pools: Pools | None = None,
        doorbell: Doorbell | None = None,
    ) -> None:
        self._nc = nc
        self._executor = executor
        self._clock = clock
        self._options = options
        self._heartbeats = heartbeats
        self._cap = cap
        self._slots = asyncio.Semaphore(options.concurrency)
        self._doorbell = asyncio.Event()
        self._draining = asyncio.Event()
        self._intake_failing = False  # the last look for jobs met NATS unable to answer (said once per outage)
        self._running = RunningAttempts()
        pullers = {p: NoWaitPuller(nc, EVENTS_STREAM, queue_consumer(p)) for p in PRIORITY_ORDER}
        self._queues = ExecutorQueues(nc, pullers, options.labels, options.places, ring=self._doorbell.set)
        self._pools = pools
        self._ring_on = doorbell
        self._reserved: dict[asyncio.Task[None], Placement] = {}  # the resources of the pooled attempts running
        self._started_at = clock.now()
        self._keep_alive = KeepAlive(options.executor_id, cap)
        self._messages = QueueMessages(store, clock, runner, self._running, self._keep_alive)
        if metrics is not None:
            metrics.executor_slots(lambda: options.concurrency, lambda: len(self._running))

    async def run(self) -> None:
        """Take work until cancelled (or drained); running attempts are then handed back to the queue."""
        unring = await self._listen_for_work()
        await self._queues.start()
        await self._beat()
        await self._keep_alive.read_deadlines(self._nc)
        chores = [asyncio.create_task(self._heartbeat_loop()), asyncio.create_task(self._sweep_loop())]
        if self._pools is not None:
            chores.append(asyncio.create_task(self._queues.follow_pools(self._pools)))
        try:
            while await self._take_slot():
                slots = 1 + await self._spare_slots()
                try:
                    taken = await self._next_messages(slots)
                except BaseException:
                    self._release(slots)
                    raise
                self._release(slots - len(taken))
                if not taken:
                    break
                for msg, lease, placement in taken:
                    task = asyncio.create_task(self._handle(msg, lease))
                    self._running.add(task)
                    if placement is not None:
                        self._reserved[task] = placement
                    task.add_done_callback(self._finished)
            await self._wait_running()
        finally:
            await unring()
            await self._stop_running()
            await stop_all(chores)  # none left pending when the loop closes
            await self._queues.stop()
            await asyncio.shield(self._heartbeats.remove(self._options.executor_id))

    async def _take_slot(self) -> bool:
        """Wait for a free slot; False once draining (no slot is then held)."""
        acquire = asyncio.ensure_future(self._slots.acquire())
        draining = asyncio.ensure_future(self._draining.wait())
        await asyncio.wait({acquire, draining}, return_when=asyncio.FIRST_COMPLETED)
        draining.cancel()
        if not acquire.done():
            acquire.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acquire
        if acquire.done() and not acquire.cancelled() and self._draining.is_set():
            self._slots.release()
        return acquire.done() and not acquire.cancelled() and not self._draining.is_set()

    async def drain(self) -> None:
        """Stop taking work; attempts still running after the grace period are handed back when ``run`` ends."""
        self._draining.set()
        self._doorbell.set()

    async def _listen_for_work(self) -> Callable[[], Awaitable[None]]:
        """Ring the doorbell whenever work is queued: through ``doorbell`` (a subscription kept anyway), else one
        of its own."""
        if self._ring_on is not None:
            return await self._ring_on(self._doorbell.set)
        subscription = await self._nc.subscribe("hades.events.*.queued.>", cb=self._ring)
        return subscription.unsubscribe

    async def _ring(self, _msg: Msg) -> None:
        self._doorbell.set()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.remove(task)
        if self._reserved.pop(task, None) is not None:
            self._doorbell.set()  # the freed resources may let a waiting pooled job in
        self._slots.release()

    async def _wait_running(self) -> None:
        if self._running:
            log.info("draining: %d attempts get %.0f s to finish", len(self._running), self._options.shutdown_grace)
            await asyncio.wait(self._running.tasks(), timeout=self._options.shutdown_grace)

    async def _stop_running(self) -> None:
        # cancelled again only if a cancel was lost: the hand-back needs its appends
        await stop_all(self._running.tasks(), patience=30)

    async def _spare_slots(self) -> int:
        """Take every other slot free right now (none under a global cap, whose leases go one per message), so
        one pull asks for as many messages as there are free slots: one round trip per message capped the
        executor's intake at about its round trips per second while its slots stood idle."""
        spare = 0
        while self._cap is None and not self._slots.locked():
            await self._slots.acquire()  # free: returns at once
            spare += 1
        return spare

    def _release(self, slots: int) -> None:
        for _ in range(slots):
            self._slots.release()

    async def _next_messages(self, wanted: int) -> list[tuple[Msg, Lease | None, Placement | None]]:
        """Up to ``wanted`` queue messages by priority (one under a global cap, with a slot of it), each with the
        resources it reserves; none when draining."""
        while not self._draining.is_set():
            self._doorbell.clear()
            lease: Lease | None = None
            try:
                lease = await self._cap.acquire(self._options.executor_id) if self._cap is not None else None
                if self._cap is None or lease is not None:
                    msgs = await self._queues.pull(wanted if self._cap is None else 1, self._reserved.values())
                    self._back_to_normal()
                    if msgs:
                        return [(msg, lease, placement) for msg, placement in msgs]
                    if lease is not None:
                        await self._cap.release(lease)  # type: ignore[union-attr]
            except (NatsError, OSError) as error:  # NATS away (a restart, an election): ask again, never give up
                await self._not_now(error, lease)
            wait = IDLE_POLL_SECONDS if self._cap is None or lease is not None else CAP_POLL_SECONDS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._doorbell.wait(), wait)
        return []

    def _back_to_normal(self) -> None:
        if self._intake_failing:
            log.info("looking for jobs again")
        self._intake_failing = False

    async def _not_now(self, error: Exception, lease: Lease | None) -> None:
        """The intake met NATS unable to answer: said once per outage, the slot of the cap given back if one was
        taken (else it waits out the lease's expiry), and the next look is made as usual. Ending here ended the
        executor role, and every attempt it ran with it."""
        if not self._intake_failing:
            log.warning("cannot look for jobs (%r); asking again until NATS answers", error)
        self._intake_failing = True
        if lease is not None and self._cap is not None:
            with contextlib.suppress(NatsError, OSError):
                await self._cap.release(lease)

    async def _heartbeat_loop(self) -> None:
        interval = await self._heartbeats.ttl() / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self._beat()
            except Exception:
                log_failure(log, "heartbeat failed; the scheduler takes this executor for lost if it keeps failing")

    async def _beat(self) -> None:
        await self._heartbeats.beat(
            self._options.executor_id,
            {
                "executor_id": self._options.executor_id,
                "started_at": self._started_at.isoformat(),
                "busy": len(self._running),
                # the jobs it runs now, and when it said so: the scheduler hands back an attempt its executor
                # lost track of (its runner died while the process lives on)
                "running": self._running.job_ids(),
                "at": self._clock.now().isoformat(),
                "slots": self._options.concurrency,
                "draining": self._draining.is_set(),
                "labels": self._options.labels,
                # a cluster executor takes the jobs its engine can place (the watchdog counts it as their taker)
                "places": "cluster" if self._options.places is not None else "labels",
            },
        )

    async def _sweep_loop(self) -> None:
        while True:
            try:
                alive = set(await self._heartbeats.alive())
                removed = await self._executor.sweep(self._running.runs, alive)
                if removed:
                    log.info("swept %d containers and volumes left behind", removed)
            except Exception:
                log_failure(log, "sweep failed; trying again later")
            await asyncio.sleep(self._options.sweep_interval)

    async def _handle(self, msg: Msg, lease: Lease | None) -> None:
        try:
            await self._messages.take(msg, lease)
        finally:
            if lease is not None and self._cap is not None:
                await asyncio.shield(self._cap.release(lease))
