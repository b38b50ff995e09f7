"""Taking messages from a durable pull consumer without waiting, for strict-priority dispatch.

nats-py's ``fetch`` always sends an ``expires`` (so the server lingers) and its request multiplexer drops
JetStream deliveries, whose subject is the stream subject rather than the reply inbox. So each queue gets its
own inbox subscription, and a no-wait pull request answers at once with a message or a 404 status.
"""

from __future__ import annotations

import json

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

_NO_WAIT = json.dumps({"batch": 1, "no_wait": True}).encode()


class NoWaitPuller:
    """One message from a durable consumer if it has one now, else None."""

    def __init__(self, nc: Client, stream: str, consumer: str) -> None:
        self._nc = nc
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._inbox = nc.new_inbox()
        self._sub: Subscription | None = None

    async def start(self) -> None:
        """Subscribe to this puller's inbox."""
        self._sub = await self._nc.subscribe(self._inbox)

    async def stop(self) -> None:
        """Unsubscribe; a message delivered but not yet read is redelivered after its ack wait."""
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

    async def pull(self, timeout: float = 5.0) -> Msg | None:
        """Ask for one message; a late answer to an earlier request is taken first. A stopped puller (a pool the
        executor no longer serves) has none."""
        taken = await self.pull_many(1, timeout)
        return taken[0] if taken else None

    async def pull_many(self, batch: int, timeout: float = 5.0) -> list[Msg]:
        """Up to ``batch`` messages the consumer has now, in one request (the server sends what it has, then a
        ``404`` status when that is fewer than asked); late answers to an earlier request are taken first."""
        if self._sub is None:
            return []
        late = self._take_pending(batch)
        if late:
            return late
        request = _NO_WAIT if batch == 1 else json.dumps({"batch": batch, "no_wait": True}).encode()
        await self._nc.publish(self._next_subject, request, reply=self._inbox)
        taken: list[Msg] = []
        try:
            while len(taken) < batch:
                msg = await self._sub.next_msg(timeout=timeout)
                if not _is_status(msg):
                    taken.append(msg)
                elif msg.headers and msg.headers.get("Status") in ("404", "408"):
                    break
        except TimeoutError:
            pass
        return taken

    def _take_pending(self, batch: int) -> list[Msg]:
        assert self._sub is not None
        queue = self._sub._pending_queue
        taken: list[Msg] = []
        while len(taken) < batch and not queue.empty():
            msg = queue.get_nowait()
            self._sub._pending_size -= len(msg.data)
            if not _is_status(msg):
                taken.append(msg)
        return taken


def _is_status(msg: Msg) -> bool:
    return bool(msg.headers and msg.headers.get("Status")) and not msg.reply
