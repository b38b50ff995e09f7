"""Executor pools: the queues of jobs with constraints, and KV ``HADES_POOLS`` that names them.

A job with constraints or resources is queued on ``hades.events.<job_id>.queued.<priority>.<pool>``, where the pool
is the key of its normalised placement (``hades.core.constraints``). Each pool has one durable consumer per
priority, ``executor-<priority>-<pool>``, filtered on exactly its subjects; the plain queues' filters
(``hades.events.*.queued.<priority>``) never match a pool's subjects, which have one token more.

The scheduler registers a pool (its placement under its key in ``HADES_POOLS``, then its consumers) before it
queues the pool's first job; every executor watches the bucket and pulls from the pools whose placement its labels
satisfy, so all matching executors compete for a pool's jobs and the others never see them. A pool's consumers copy
the configuration of the plain queue of their priority, which ``streams.yaml`` declares, so the ack deadline and
the limits stay in one place; consumers are data here (one set per distinct placement), not topology.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator

from nats.aio.client import Client
from nats.js.errors import NotFoundError
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue
from pydantic import ValidationError

from hades.adapters.nats.subjects import token
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.constraints import Placement
from hades.core.spec import Priority

log = logging.getLogger(__name__)

BUCKET = "HADES_POOLS"
#: Strict priority: an executor with a free slot asks high, then medium, then low.
PRIORITY_ORDER = (Priority.HIGH, Priority.MEDIUM, Priority.LOW)


def queue_consumer(priority: Priority, pool: str | None = None) -> str:
    """The durable consumer that is one queue: ``executor-high``, or ``executor-high-<pool>``."""
    return f"executor-{priority.value}" if pool is None else f"executor-{priority.value}-{token(pool)}"


def queue_subjects(priority: Priority, pool: str | None = None) -> str:
    """The subjects of one queue's messages (every job's ``queued`` events of that priority and pool)."""
    base = f"hades.events.*.queued.{priority.value}"
    return base if pool is None else f"{base}.{token(pool)}"


class Pools:
    """Register pools (the scheduler) and follow them (the executors)."""

    def __init__(self, nc: Client, stream: str = EVENTS_STREAM) -> None:
        self._nc = nc
        self._stream = stream
        self._kv: KeyValue | None = None
        self._ready: set[str] = set()

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._nc.jetstream().key_value(BUCKET)
        return self._kv

    async def register(self, placement: Placement) -> str:
        """Make the pool of ``placement`` known and its queues exist; returns its key. Idempotent."""
        pool = placement.key
        if pool not in self._ready:
            await self.ensure_queues(pool)  # the queues first: an executor that sees the pool can pull at once
            await (await self._bucket()).put(pool, placement.model_dump_json().encode())
            self._ready.add(pool)
        return pool

    async def ensure_queues(self, pool: str) -> None:
        """Create the pool's consumers that are missing, each a copy of its priority's plain queue."""
        js = self._nc.jetstream()
        for priority in PRIORITY_ORDER:
            name = queue_consumer(priority, pool)
            try:
                await js.consumer_info(self._stream, name)
                continue
            except NotFoundError:
                pass
            base = (await js.consumer_info(self._stream, queue_consumer(priority))).config
            config = dataclasses.replace(
                base,
                name=name,
                durable_name=name,
                filter_subject=None,
                filter_subjects=[queue_subjects(priority, pool)],
            )
            await js.add_consumer(self._stream, config=config)  # the same config twice (a race) is no conflict
            log.info("created the queue %s for pool %s", name, pool)

    async def follow(self) -> AsyncIterator[tuple[str, Placement | None]]:
        """Every pool now, then each change as it happens: ``(key, placement)``, with None for a removed pool."""
        watcher = await (await self._bucket()).watchall()
        try:
            async for entry in watcher:
                if entry is None:
                    continue  # the end of the initial replay
                if entry.operation in (KV_DEL, KV_PURGE) or not entry.value:
                    yield entry.key, None
                    continue
                try:
                    yield entry.key, Placement.model_validate_json(entry.value)
                except ValidationError:
                    log.error(
                        "pool %s has an unreadable placement; its jobs wait for an executor that reads it", entry.key
                    )
        finally:
            await watcher.stop()  # type: ignore[no-untyped-call]
