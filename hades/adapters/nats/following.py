"""Following a stream in order through NATS outages: every message once, in stream order, whatever restarts.

The projections and the live log streams read through nats-py's ordered consumer: an ephemeral, memory-stored
consumer that the server forgets when it restarts. nats-py only notices the loss after two missed idle heartbeats
(5 s each by default) and the check that notices runs on its own clock, so a follower sat 10-20 s behind the log
after every NATS restart: an API answered a job's status and logs from before the restart meanwhile (the chaos
suite caught a view at ``Queued`` while the job had succeeded).

A follower here starts a new ordered consumer after the last message it handed on as soon as its connection comes
back (:func:`~hades.adapters.nats.connection.on_reconnect`), and keeps one-second heartbeats so that a consumer lost
while the connection stayed up (a cluster node gone) is noticed within seconds by nats-py's own check. Either way a
message can arrive twice (the old consumer's last deliveries and the new one's first): the follower hands on only
sequences past the last it handed on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from hades.adapters.nats.connection import UNAVAILABLE, on_reconnect
from hades.tasks import stop_all

log = logging.getLogger(__name__)

#: Idle heartbeat of a follower's consumer (seconds): nats-py starts a lost consumer again after two missed ones.
HEARTBEAT = 1.0
_RETRY = 0.5  # between tries to create the consumer while JetStream cannot yet
_NOTICE = 10.0  # between warnings while it cannot


class StreamFollower:
    """``subject`` of ``stream`` from ``start_seq`` on, each message handed to ``deliver`` (with its stream
    sequence) once and in order.

    ``deliver`` may wait (a full buffer): the consumer's flow control then holds the server back.
    """

    def __init__(
        self,
        nc: Client,
        stream: str,
        subject: str,
        start_seq: int,
        deliver: Callable[[int, Msg], Awaitable[None]],
        what: str = "the stream",
    ) -> None:
        self._js = nc.jetstream()
        self._nc = nc
        self._stream = stream
        self._subject = subject
        self._deliver = deliver
        self._what = what
        self.last = max(start_seq, 1) - 1  # the last sequence handed on
        self._sub: JetStreamContext.PushSubscription | None = None
        self._reconnected = asyncio.Event()
        self._restarter: asyncio.Task[None] | None = None
        self._forget: Callable[[], None] | None = None
        self._handing = asyncio.Lock()  # held while a message is checked and handed on

    async def start(self) -> None:
        """Create the consumer (waiting out a JetStream that cannot yet) and start following."""
        self._sub = await self._subscribe()
        self._forget = on_reconnect(self._nc, self._reconnected.set)
        self._restarter = asyncio.create_task(self._restart_on_reconnect(), name=f"follow-{self._subject}")

    async def stop(self) -> None:
        if self._forget is not None:
            self._forget()
        if self._restarter is not None:
            await stop_all([self._restarter])
        await self._unsubscribe()

    async def _on_message(self, msg: Msg) -> None:
        seq = stream_seq(msg)
        async with self._handing:
            if seq <= self.last:
                return  # delivered again by a consumer started after it
            self.last = seq
            await self._deliver(seq, msg)

    async def _restart_on_reconnect(self) -> None:
        """On each reconnect, a new consumer after the last message handed on; tried again until it is there (a
        server that went away again meanwhile, or refused with something other than "not yet"), since the follower
        has no consumer at all in between."""
        while True:
            await self._reconnected.wait()
            self._reconnected.clear()
            try:
                # Unsubscribing cancels the consumer's callback: never while it hands a message on (which would
                # then be neither handed on nor asked for again).
                async with self._handing:
                    await self._unsubscribe()
                self._sub = await self._subscribe()
            except Exception as error:  # a follower must never be left without a consumer
                if isinstance(error, NatsError | OSError):
                    log.warning("could not follow %s again yet (%r); trying again", self._what, error)
                else:
                    log.exception("could not follow %s again; trying again", self._what)
                self._reconnected.set()
                await asyncio.sleep(_RETRY)
                continue
            log.info("following %s again from sequence %d after a reconnect", self._what, self.last + 1)

    async def _unsubscribe(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()

    async def _subscribe(self) -> JetStreamContext.PushSubscription:
        """An ordered consumer from the message after the last handed on, asked for again for as long as JetStream
        cannot make it yet (a cluster still electing its leaders answers 503 "temporarily unavailable" to a
        consumer create, even after it answered other requests; a restarted server is still recovering its
        streams): a follower waits that out rather than ending its process."""
        since, told = time.monotonic(), None
        while True:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=self.last + 1)
            try:
                return await self._js.subscribe(
                    self._subject,
                    stream=self._stream,
                    ordered_consumer=True,
                    config=config,
                    cb=self._on_message,
                    idle_heartbeat=HEARTBEAT,
                )
            except UNAVAILABLE as error:
                now = time.monotonic()
                if told is None or now - told >= _NOTICE:
                    log.warning("%s cannot be followed yet (%r, %.0f s); asking again", self._what, error, now - since)
                    told = now
                await asyncio.sleep(_RETRY)


def stream_seq(msg: Msg) -> int:
    """The message's stream sequence, read straight off its ack subject (``$JS.ACK.<stream>.<consumer>.<delivered>.
    <stream seq>...``, or the longer form with a domain and account hash): ``msg.metadata`` builds a whole object,
    timestamp included, which costs more than folding the event does."""
    tokens = msg.reply.split(".") if msg.reply else []
    if len(tokens) == _V1_ACK_TOKENS and tokens[0] == "$JS":
        return int(tokens[5])
    if len(tokens) >= _V2_ACK_TOKENS and tokens[0] == "$JS":
        return int(tokens[7])
    return int(msg.metadata.sequence.stream)


_V1_ACK_TOKENS = 9
_V2_ACK_TOKENS = 11
