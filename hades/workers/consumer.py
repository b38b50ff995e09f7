"""A durable JetStream pull consumer driven by nats-py directly: the scheduler's and the notifier's queues.

These roles were FastStream subscribers. FastStream's dispatch (its parser, middlewares, fast_depends and an
anyio task group per batch) cost about as much CPU per message as the work itself: half of the scheduler's time in
a py-spy profile of the control-plane bench. This loop keeps what mattered of it and nothing else:

- the durable consumer is streams.yaml's (bound by name; created with the given filter only if it is missing, as
  FastStream did);
- up to ``max_workers`` messages are handled at once, each in its own task, and the next fetch asks for no more
  than the free slots;
- ``Settle.NACK_ON_ERROR``: a handler that returns acks the message, one that raises naks it (redelivered at once,
  up to the consumer's ``max_deliver``); ``Settle.MANUAL``: the handler acks or naks itself, and one that raises
  leaves the message unacknowledged, so it comes back after the consumer's ack wait. Never ``term`` on an error
  (stack-notes gotcha 2), and the error is logged;
- an empty fetch (nats-py raises ``nats.errors.TimeoutError`` or, on a race at the deadline, plain
  ``asyncio.TimeoutError``: both are the builtin ``TimeoutError``, stack-notes gotcha 4) is no error; anything
  else the fetch raises (a reconnect, a consumer being re-created) is logged and the fetch is made again.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Sequence

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig
from nats.js.client import JetStreamContext

from hades.tasks import stop_all

log = logging.getLogger(__name__)

Handler = Callable[[Msg], Awaitable[None]]

#: How long a failed fetch waits before the next one.
FETCH_RETRY_SECONDS = 1.0


def stream_seq(msg: Msg) -> int:
    """A delivered message's stream sequence, read off its ack subject (see :func:`delivered`)."""
    return delivered(msg)[0]


def delivered(msg: Msg) -> tuple[int, int]:
    """A delivered message's stream sequence and delivery count, read straight off its ack subject
    (``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>...``, or the longer form with a domain and an account
    hash): ``msg.metadata`` parses every token and builds objects, a timestamp included, for these two numbers."""
    tokens = msg.reply.split(".") if msg.reply else []
    if len(tokens) == _V1_ACK_TOKENS and tokens[0] == "$JS":
        return int(tokens[5]), int(tokens[4])
    if len(tokens) >= _V2_ACK_TOKENS and tokens[0] == "$JS":
        return int(tokens[7]), int(tokens[6])
    metadata = msg.metadata
    return int(metadata.sequence.stream), int(metadata.num_delivered)


_V1_ACK_TOKENS = 9
_V2_ACK_TOKENS = 11


class Settle(enum.Enum):
    """Who acknowledges a message."""

    NACK_ON_ERROR = "nack_on_error"  # the loop: ack when the handler returns, nak when it raises
    MANUAL = "manual"  # the handler; one that raises leaves the message to its ack wait


class PullConsumer:
    """Runs ``handler`` on every message of one durable pull consumer until cancelled."""

    def __init__(
        self,
        nc: Client,
        stream: str,
        durable: str,
        handler: Handler,
        *,
        subjects: Sequence[str],
        settle: Settle,
        batch: int = 10,
        max_workers: int = 16,
        timeout: float = 5.0,
    ) -> None:
        self._nc = nc
        self._stream = stream
        self._durable = durable
        self._handler = handler
        self._subjects = list(subjects)
        self._settle = settle
        self._batch = batch
        self._max_workers = max_workers
        self._timeout = timeout
        self._running: set[asyncio.Task[None]] = set()
        self._sub: JetStreamContext.PullSubscription | None = None

    async def start(self) -> None:
        """Bind to the durable consumer (creating it only if it is missing)."""
        if self._sub is not None:
            return
        config = ConsumerConfig(filter_subjects=self._subjects if len(self._subjects) > 1 else None)
        subject = self._subjects[0] if len(self._subjects) == 1 else ""
        js = self._nc.jetstream()
        self._sub = await js.pull_subscribe(subject, durable=self._durable, stream=self._stream, config=config)
        log.info("taking messages of consumer %s on %s (%s)", self._durable, self._stream, ", ".join(self._subjects))

    async def run(self) -> None:
        """Fetch and handle until cancelled; messages still being handled then are cancelled (and redelivered)."""
        await self.start()
        sub = self._sub
        assert sub is not None
        try:
            while True:
                free = self._max_workers - len(self._running)
                if free <= 0:
                    await asyncio.wait(set(self._running), return_when=asyncio.FIRST_COMPLETED)
                    continue
                for msg in await self._fetch(sub, min(self._batch, free)):
                    task = asyncio.create_task(self._handle(msg))
                    self._running.add(task)
                    task.add_done_callback(self._running.discard)
        finally:
            await stop_all(set(self._running), patience=5)
            self._sub = None
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _fetch(self, sub: JetStreamContext.PullSubscription, batch: int) -> list[Msg]:
        try:
            return await sub.fetch(batch, timeout=self._timeout)
        except TimeoutError:
            return []
        except Exception as error:
            log.warning("consumer %s: fetching failed (%r); fetching again", self._durable, error)
            await asyncio.sleep(FETCH_RETRY_SECONDS)
            return []

    async def _handle(self, msg: Msg) -> None:
        try:
            await self._handler(msg)
        except Exception:
            if self._settle is Settle.MANUAL or msg.is_acked:
                log.exception(
                    "consumer %s: handling %s failed; it comes back after its ack wait", self._durable, msg.subject
                )
                return
            log.exception("consumer %s: handling %s failed; it is redelivered", self._durable, msg.subject)
            with contextlib.suppress(Exception):
                await msg.nak()
            return
        if self._settle is Settle.NACK_ON_ERROR and not msg.is_acked:
            await msg.ack()
