"""A queue message kept while its job runs: its ack deadline extended with ``in_progress``, and any cap lease renewed.

A queue message stays un-acked while its job runs and is acked only once the job reached a terminal event; meanwhile
its ack deadline (from streams.yaml) is extended, as is the lease of a slot under the global cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.adapters.nats.pools import queue_consumer
from hades.adapters.nats.slots import Lease, SlotLeases
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.spec import Priority

log = logging.getLogger(__name__)


class KeepAlive:
    """Extends the queue messages (and cap leases) of one executor's running jobs."""

    def __init__(self, executor_id: str, cap: SlotLeases | None) -> None:
        self._executor_id = executor_id
        self._cap = cap
        #: How often a deadline is extended; a third of the shortest of them once ``read_deadlines`` has run.
        self.every = 10.0

    async def read_deadlines(self, nc: Client) -> None:
        """The queue's ack deadline comes from streams.yaml; extend it (and any cap lease) three times per period."""
        ack_wait = (await nc.jetstream().consumer_info(EVENTS_STREAM, queue_consumer(Priority.HIGH))).config
        periods = [float(ack_wait.ack_wait or 30)] + ([await self._cap.ttl()] if self._cap is not None else [])
        self.every = min(periods) / 3

    async def keep(self, msg: Msg, lease: Lease | None) -> None:
        """Extend the message's ack deadline (and the cap's lease) while its job runs."""
        while True:
            await asyncio.sleep(self.every)
            with contextlib.suppress(Exception):
                await msg.in_progress()
            if lease is not None and self._cap is not None:
                with contextlib.suppress(Exception):
                    if not await self._cap.renew(lease, self._executor_id):
                        log.warning("lost the cap lease %s; the cap may be exceeded briefly", lease.key)
