"""The queues one executor pulls from: by strict priority, and within a priority in turns over plain and pooled work.

The plain queues are the durable pull consumers ``executor-high|medium|low`` on the event stream, shared by every
executor process. With a free slot, an executor asks high, then medium, then low (strict priority, as the Go Hades
does), each with a no-wait pull so an empty queue costs one round trip.

Jobs with constraints wait in their pool's queues (``hades.adapters.nats.pools``): the executor follows
``HADES_POOLS`` and adds, for each pool its labels satisfy, that pool's queue of each priority next to the plain
one. Within a priority it takes turns over its queues, so neither plain nor pooled work starves the other. A pool
whose jobs ask for more ``resources`` than the attempts running here left of its capacity is passed over until
one ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.adapters.nats.connection import log_failure
from hades.adapters.nats.pools import PRIORITY_ORDER, Pools, queue_consumer
from hades.adapters.nats.queues import NoWaitPuller
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.constraints import Placement, fits, satisfies
from hades.core.spec import Priority

log = logging.getLogger(__name__)

#: How long following ``HADES_POOLS`` waits after it failed before it follows again.
FOLLOW_RETRY_SECONDS = 1.0


class ExecutorQueues:
    """The plain queue of each priority and those of the pools this executor takes, pulled from in turns."""

    def __init__(
        self,
        nc: Client,
        pullers: dict[Priority, NoWaitPuller],
        labels: dict[str, str],
        places: Callable[[Placement], bool] | None,
        ring: Callable[[], None],
    ) -> None:
        self._nc = nc
        self._pullers = pullers
        self._labels = labels
        self._places = places
        self._ring = ring  # a pool taken on is new work
        self._pool_pullers: dict[str, dict[Priority, NoWaitPuller]] = {}
        self._pool_placements: dict[str, Placement] = {}
        self._turn = 0

    async def start(self) -> None:
        for puller in self._pullers.values():
            await puller.start()

    async def stop(self) -> None:
        for puller in self._all_pullers():
            await puller.stop()

    async def pull(self, wanted: int, running: Iterable[Placement]) -> list[tuple[Msg, Placement | None]]:
        """Up to ``wanted`` messages, each with the resources it reserves, from the highest priority that has any
        on: a lower priority is asked only for what the higher ones did not have. Within a priority, the plain queue
        and the pools' take turns at going first. A pool's queue is asked for no more jobs than still fit what the
        attempts ``running`` here left of this executor's capacity (none: its jobs wait for this or another one)."""
        self._turn += 1
        taken: list[tuple[Msg, Placement | None]] = []
        reserved = list(running)
        for priority in PRIORITY_ORDER:
            queues: list[tuple[NoWaitPuller, Placement | None]] = [(self._pullers[priority], None)]
            queues += [(pullers[priority], self._reserves(pool)) for pool, pullers in self._pool_pullers.items()]
            first = self._turn % len(queues)
            for puller, placement in queues[first:] + queues[:first]:
                room = self._room(placement, reserved, wanted - len(taken))
                if room <= 0:
                    continue
                for msg in await puller.pull_many(room):
                    taken.append((msg, placement))
                    reserved += [placement] if placement is not None else []
                if len(taken) >= wanted:
                    return taken
        return taken

    def _room(self, placement: Placement | None, reserved: list[Placement], wanted: int) -> int:
        """How many jobs of this placement (up to ``wanted``) fit beside what is ``reserved``."""
        if placement is None:
            return wanted
        room = 0
        while room < wanted and fits(placement, self._labels, reserved + [placement] * room):
            room += 1
        return room

    def _reserves(self, pool: str) -> Placement | None:
        """What a job of the pool reserves here: its resources, unless a cluster places it (Kubernetes)."""
        placement = self._pool_placements.get(pool)
        if placement is None or self._places is not None or not (placement.cpu or placement.memory):
            return None
        return placement

    def _all_pullers(self) -> list[NoWaitPuller]:
        return [*self._pullers.values(), *(p for pullers in self._pool_pullers.values() for p in pullers.values())]

    async def follow_pools(self, pools: Pools) -> None:
        """Pull from every pool this executor's labels satisfy, as pools appear (and stop when one is removed)."""
        while True:
            try:
                async for pool, placement in pools.follow():
                    await self._pool_changed(pools, pool, placement)
            except Exception:
                log_failure(log, "following HADES_POOLS failed; following it again")
            await asyncio.sleep(FOLLOW_RETRY_SECONDS)

    async def _pool_changed(self, pools: Pools, pool: str, placement: Placement | None) -> None:
        places = self._places
        matches = placement is not None and (
            places(placement) if places is not None else satisfies(placement, self._labels)
        )
        if matches and placement is not None and pool not in self._pool_pullers:
            if not await pools.ensure_queues(pool):
                return  # removed since this entry was written: its removal is the next change followed
            pullers = {p: NoWaitPuller(self._nc, EVENTS_STREAM, queue_consumer(p, pool)) for p in PRIORITY_ORDER}
            for puller in pullers.values():
                await puller.start()
            self._pool_pullers[pool] = pullers
            self._pool_placements[pool] = placement
            self._ring()
            log.info("taking the jobs of pool %s (%s)", pool, placement.describe() if placement else "")
        elif not matches and pool in self._pool_pullers:
            self._pool_placements.pop(pool, None)
            for puller in self._pool_pullers.pop(pool).values():
                await puller.stop()
