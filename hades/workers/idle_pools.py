"""The watchdog's care of executor pools: an idle pool is removed, and the pool of every queued job is registered.

A pool (``hades.adapters.nats.pools``) is removed when no unfinished job the watchdog sees is placed in it, its
three consumers have nothing pending and nothing awaiting an ack, and nothing was delivered, acknowledged or
registered for ``idle`` seconds. Removal takes two rounds: the first marks the key removed, with the stream's
last sequence (read before the consumers were found empty, so every message of the pool up to it was handled) as
its floor, and executors stop pulling it; a later round deletes the consumers, once executors had time to let go
(a pull from a deleted consumer waits out its timeout), if they are still empty and the pool still unused.

A scheduler may queue a job into a pool just after it was removed (its cache still held the pool). Each round
therefore registers again the pool of every queued job whose key is missing or removed, or whose consumers are not
all there: the consumers come back from the floor, so they deliver that job's message, and not the pool's handled
history.

Much later (``MARKER_IDLE_PERIODS`` idle periods, at least ``MARKER_MIN_SECONDS``) a removed pool's marker is purged,
once its consumers are gone and the stream shows no job queued into the pool after its floor: every message of the
pool is handled, so the floor is needed no more. A queued job whose pool then has no key brings the consumers back
from just before its own message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from nats.js.api import ConsumerInfo

from hades.adapters.nats.pools import PRIORITY_ORDER, PoolEntry, Pools
from hades.core.constraints import Placement
from hades.core.lifecycle import JobState, Status
from hades.core.ports import Clock
from hades.core.spec import Priority

log = logging.getLogger(__name__)

#: A removed pool's delete marker is kept this many idle periods, and at least an hour: far past the 10 s a
#: scheduler trusts its cache of the pool and the rounds in which the watchdog registers a late job's pool again.
MARKER_IDLE_PERIODS = 3
MARKER_MIN_SECONDS = 3600.0


@dataclass
class PoolRound:
    """What one round did, by pool key."""

    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    purged: list[str] = field(default_factory=list)


class PoolKeeper:
    """Removes idle pools (``idle`` seconds; 0: never), purges their markers once old, and registers again the pool
    of any queued job."""

    def __init__(self, pools: Pools, clock: Clock, idle: float) -> None:
        self._pools = pools
        self._clock = clock
        self._idle = idle
        self._keep = max(MARKER_IDLE_PERIODS * idle, MARKER_MIN_SECONDS)

    async def sweep(self, unfinished: Iterable[JobState]) -> PoolRound:
        """One look at every pool against the unfinished jobs of the watchdog's view."""
        done = PoolRound()
        # Read before the consumers: what they have handled then covers every message up to this sequence.
        last_seq = await self._pools.last_seq()
        queues = await self._pools.queues()
        entries = await self._pools.entries()
        used, queued = _placements(unfinished)
        for pool, (placement, job_ids) in queued.items():
            entry = entries.get(pool, PoolEntry(pool))
            if entry.live and len(queues.get(pool, {})) == len(PRIORITY_ORDER):
                continue
            await self._pools.restore(placement, entry.floor if entry.revision else await self._before(pool, job_ids))
            log.warning("pool %s of a queued job was not registered (removed meanwhile); registered it again", pool)
            done.restored.append(pool)
        if not self._idle:
            return done
        for pool in sorted((set(entries) | set(queues)) - used):
            entry, consumers = entries.get(pool, PoolEntry(pool)), queues.get(pool, {})
            if any(info.num_pending or info.num_ack_pending for info in consumers.values()):
                continue
            if entry.removed:
                await self._after_removal(entry, bool(consumers), done)
                continue
            if self._idle_since(entry, consumers) > self._idle:
                # with a consumer missing, what it would have delivered is unknown: floor 0, the whole stream
                floor = last_seq if len(consumers) == len(PRIORITY_ORDER) else 0
                if await self._pools.remove(pool, entry.revision, floor):
                    log.info("removed pool %s: idle for %g s", pool, self._idle)
                    done.removed.append(pool)
        return done

    async def _after_removal(self, entry: PoolEntry, has_queues: bool, done: PoolRound) -> None:
        """A removed pool's second step (its consumers deleted), and much later its marker purged."""
        if has_queues:
            await self._delete_queues(entry, done)
        elif await self._stale(entry):
            await self._pools.purge(entry)
            log.info("purged the delete marker of pool %s (removed at stream sequence %d)", entry.key, entry.floor)
            done.purged.append(entry.key)

    async def _before(self, pool: str, job_ids: list[str]) -> int:
        """A floor for a pool without a key whose jobs are queued: just before the first of their messages, so
        each is delivered (and the pool's older, handled history is not)."""
        return min([await self._pools.before_queued(job_id, pool) for job_id in job_ids])

    async def _stale(self, entry: PoolEntry) -> bool:
        """Whether a removed pool's marker (its consumers deleted) may go: it is older than the bound, its floor is
        known, and no job was queued into the pool after it (every message of the pool is handled)."""
        if not entry.floor or entry.changed_at is None:
            return False  # without a floor the pool restarts from the whole stream: the marker must say so
        if (self._clock.now() - entry.changed_at).total_seconds() <= self._keep:
            return False
        return not await self._pools.queued_after(entry.key, entry.floor)

    async def _delete_queues(self, entry: PoolEntry, done: PoolRound) -> None:
        """The second step of a removal; a pool registered again meanwhile gets its consumers back at once."""
        await self._pools.delete_queues(entry.key)
        done.deleted.append(entry.key)
        now = await self._pools.entry(entry.key)
        if now.live:
            await self._pools.ensure_queues(entry.key, now.floor)

    def _idle_since(self, entry: PoolEntry, consumers: dict[Priority, ConsumerInfo]) -> float:
        """Seconds since the pool's last registration, consumer creation, delivery or ack."""
        moments: list[datetime | None] = [entry.changed_at]
        for info in consumers.values():
            moments += [info.created]
            moments += [seq.last_active for seq in (info.delivered, info.ack_floor) if seq is not None]
        known = [moment for moment in moments if moment is not None]
        return (self._clock.now() - max(known)).total_seconds() if known else 0.0


def _placements(unfinished: Iterable[JobState]) -> tuple[set[str], dict[str, tuple[Placement, list[str]]]]:
    """The pools of the unfinished jobs, and of those among them waiting in a queue, with their ids."""
    used: set[str] = set()
    queued: dict[str, tuple[Placement, list[str]]] = {}
    for job in unfinished:
        placement = job.spec.placement
        if placement is None:
            continue
        used.add(placement.key)
        if job.status is Status.QUEUED and job.queued_at is not None:
            queued.setdefault(placement.key, (placement, []))[1].append(job.job_id)
    return used, queued
