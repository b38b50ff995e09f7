"""One queue message taken by an executor: its job read as the message left it, its attempt run, the message settled.

A queue message stays un-acked while its job runs (``hades.workers.keepalive``) and is acked only once the job
reached a terminal event. A message whose job is no longer queued for that attempt is acked and dropped, so a
redelivery never runs an attempt twice (``hades.workers.redelivery``); two executors racing for one attempt are
decided by the concurrency check on the ``started`` append.
"""

from __future__ import annotations

import asyncio
import logging

from nats.aio.msg import Msg

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.slots import Lease
from hades.core.codec import decode_event
from hades.core.events import JobQueued
from hades.core.ports import Clock
from hades.tracing import TRACEPARENT
from hades.workers.attempt import AttemptRunner
from hades.workers.jobs import JobHandle
from hades.workers.keepalive import KeepAlive
from hades.workers.redelivery import RunningAttempts, claim, queued_for

log = logging.getLogger(__name__)


class QueueMessages:
    """Runs the attempt each queue message names, unless it runs here already or is no longer queued."""

    def __init__(
        self,
        store: NatsEventStore,
        clock: Clock,
        runner: AttemptRunner,
        running: RunningAttempts,
        keep_alive: KeepAlive,
    ) -> None:
        self._store = store
        self._clock = clock
        self._runner = runner
        self._running = running
        self._keep_alive = keep_alive

    async def take(self, msg: Msg, lease: Lease | None) -> None:
        """Run the attempt the message names, then ack it (or nak it to have it again, or drop it)."""
        try:
            event = decode_event(msg.data)
        except ValueError:
            log.error("dropping an undecodable queue message on %s", msg.subject)
            await msg.term()
            return
        if not isinstance(event, JobQueued):
            await msg.term()
            return
        delivery = msg.metadata
        if self._running.runs(event.job_id):
            await self._running.leave(msg, event, retry_after=self._keep_alive.every)
            return
        self._running.hold(asyncio.current_task(), event.job_id, delivery.sequence.stream)
        keepalive = asyncio.create_task(self._keep_alive.keep(msg, lease))
        job: JobHandle | None = None
        try:
            # The job as of this message, its older events read along their chain: no read of the job's newest
            # (one request per job). Should more have happened since (a cancel, a promotion), ``started`` meets
            # a conflict, the job is re-read, and the attempt is found no longer ours.
            history = await self._store.history_through(event.job_id, msg)
            if not history or history[-1].seq < msg.metadata.sequence.stream:
                # Read from a replica behind this very message (on an R3 stream followers answer direct gets too):
                # the job is not "no longer queued", its queueing is just not there yet; have the message again.
                log.info("job %s: its history was read from a replica behind its queue message", event.job_id)
                await msg.nak(delay=0.5)
                return
            job = JobHandle.known(self._store, self._clock, history)
            if queued_for(job, event):
                traceparent = (msg.headers or {}).get(TRACEPARENT)
                await self._runner.run(job, event.attempt, traceparent, claim(msg), event.priority)
            else:
                log.info("job %s attempt %d is no longer queued; dropping its message", event.job_id, event.attempt)
            await msg.ack()
        except asyncio.CancelledError:
            # Shutting down: if the attempt never started, let another executor have it at once; otherwise
            # the runner has handed it back as a new queued attempt and this message is done.
            if job is not None and not queued_for(job, event):
                await asyncio.shield(msg.ack())
            else:
                await asyncio.shield(msg.nak())
            raise
        except Exception:
            log.exception("job %s: could not run attempt %d; it will be redelivered", event.job_id, event.attempt)
            await msg.nak(delay=5)
        finally:
            keepalive.cancel()
