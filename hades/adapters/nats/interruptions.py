"""What can interrupt a running attempt, heard for every job an executor runs through two subscriptions.

An attempt is interrupted by a cancel request or by its job being queued again (another attempt handed out): the
``JobWatcher`` of ``hades.workers.attempt``. ``NatsEventStore.watch`` subscribes to all of one job's subjects per
attempt, so the executor also heard back, and decoded, every event it appended itself (five of a one-step job's
seven), and sent a SUB and an UNSUB per job. Here one process keeps two wildcard subscriptions, on the only kinds
that interrupt (``cancel_requested`` and ``queued.>``), and hands each message to the watchers of its job (read off
the subject, so messages of jobs nobody here runs are not decoded). Like ``watch``, a plain subscription also sees
publishes the stream refused: a hint, checked against the store before acting.

The subscriptions are made on the first ``watch`` and kept; anything published on a job's subjects after ``watch``
returns is heard (the server handles a connection's SUB before the publishes that follow it).

The executor's doorbell (``ring``: new work was queued somewhere) hangs on the same ``queued.>`` subscription: a
second one of its own had the server send every executor each queueing twice.

What is published while the connection is away is never heard: a cancel request made then was ignored until the
attempt's next append, or its timeout. So after each reconnect every watched job's newest event is read from the
stream, and handed to its watchers when it is one that interrupts (they check it against the store, as any hint).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js.api import RawStreamMsg
from nats.js.errors import NotFoundError

from hades.adapters.nats.connection import on_reconnect
from hades.adapters.nats.subjects import job_events
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.codec import decode_event
from hades.core.events import Event
from hades.tasks import stop_all

log = logging.getLogger(__name__)

OnEvent = Callable[[Event], None]
#: The event kinds that can interrupt a running attempt, as subject filters.
SUBJECTS = ("hades.events.*.cancel_requested", "hades.events.*.queued.>")
_JOB_TOKEN = 2  # hades.events.<job_id>.<kind>...
_RECHECK_TRIES = 40  # 20 s of asking for a job's newest event after a reconnect
_RECHECK_RETRY = 0.5


class JobInterruptions:
    """``watch(job_id, on_event)`` for the kinds of event that interrupt an attempt; returns how to stop."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._watchers: dict[str, list[OnEvent]] = {}
        self._bells: list[Callable[[], None]] = []
        self._subs: list[Subscription] = []
        self._starting = asyncio.Lock()
        self._forget: Callable[[], None] | None = None
        self._rechecks: set[asyncio.Task[None]] = set()

    async def watch(self, job_id: str, on_event: OnEvent) -> Callable[[], Awaitable[None]]:
        """Call ``on_event`` for each cancel request or queueing of the job published from now on."""
        await self._start()
        self._watchers.setdefault(job_id, []).append(on_event)

        async def unwatch() -> None:
            watchers = self._watchers.get(job_id, [])
            if on_event in watchers:
                watchers.remove(on_event)
            if not watchers:
                self._watchers.pop(job_id, None)

        return unwatch

    async def ring(self, on_queued: Callable[[], None]) -> Callable[[], Awaitable[None]]:
        """Call ``on_queued`` whenever any job is queued from now on; returns how to stop."""
        await self._start()
        self._bells.append(on_queued)

        async def unring() -> None:
            if on_queued in self._bells:
                self._bells.remove(on_queued)

        return unring

    async def stop(self) -> None:
        """Drop the subscriptions."""
        if self._forget is not None:
            self._forget()
            self._forget = None
        await stop_all(list(self._rechecks))
        subs, self._subs = self._subs, []
        for sub in subs:
            await sub.unsubscribe()

    async def _start(self) -> None:
        if self._subs:
            return
        async with self._starting:
            if not self._subs:
                self._subs = [await self._nc.subscribe(subject, cb=self._on_msg) for subject in SUBJECTS]
                self._forget = on_reconnect(self._nc, self._reconnected)

    async def _on_msg(self, msg: Msg) -> None:
        tokens = msg.subject.split(".", _JOB_TOKEN + 1)
        if self._bells and tokens[-1].startswith("queued"):
            for bell in self._bells:
                bell()
        if len(tokens) > _JOB_TOKEN:
            self._hand_on(tokens[_JOB_TOKEN], msg.subject, msg.data)

    def _hand_on(self, job_id: str, subject: str, data: bytes) -> None:
        watchers = self._watchers.get(job_id)
        if not watchers:
            return
        try:
            event = decode_event(data)
        except ValueError:
            log.warning("undecodable event on %s", subject)
            return
        for on_event in list(watchers):
            on_event(event)

    def _reconnected(self) -> None:
        task = asyncio.create_task(self._recheck(), name="interruptions-recheck")
        self._rechecks.add(task)
        task.add_done_callback(self._rechecks.discard)

    async def _recheck(self) -> None:
        """Each watched job's newest event, handed on when it interrupts (published while the connection was away,
        it was never heard)."""
        for job_id in list(self._watchers):
            newest = await self._newest(job_id)
            if newest is None or newest.data is None or newest.subject is None:
                continue
            kind = newest.subject.split(".", _JOB_TOKEN + 1)[-1]
            if kind == "cancel_requested" or kind.startswith("queued"):
                self._hand_on(job_id, newest.subject, newest.data)

    async def _newest(self, job_id: str) -> RawStreamMsg | None:
        """The job's newest event; None when it has none, or JetStream did not answer for ``_RECHECK_TRIES`` tries
        (a server just back may not answer JetStream requests yet)."""
        js = self._nc.jetstream()
        for _ in range(_RECHECK_TRIES):
            try:
                return await js.get_last_msg(EVENTS_STREAM, job_events(job_id), direct=True)
            except NotFoundError:
                return None
            except (NatsError, OSError) as error:
                log.info("job %s cannot be checked for a cancel yet (%r); asking again", job_id, error)
                await asyncio.sleep(_RECHECK_RETRY)
        return None
