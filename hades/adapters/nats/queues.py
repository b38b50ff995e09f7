"""Taking one message from a durable pull consumer without waiting, for strict-priority dispatch.

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
        if self._sub is None:
            return None
        late = self._take_pending()
        if late is not None:
            return late
        await self._nc.publish(self._next_subject, _NO_WAIT, reply=self._inbox)
        try:
            while True:
                msg = await self._sub.next_msg(timeout=timeout)
                if not _is_status(msg):
                    return msg
                if msg.headers and msg.headers.get("Status") in ("404", "408"):
                    return None
        except TimeoutError:
            return None

    def _take_pending(self) -> Msg | None:
        assert self._sub is not None
        queue = self._sub._pending_queue
        while not queue.empty():
            msg = queue.get_nowait()
            self._sub._pending_size -= len(msg.data)
            if not _is_status(msg):
                return msg
        return None


def _is_status(msg: Msg) -> bool:
    return bool(msg.headers and msg.headers.get("Status")) and not msg.reply
