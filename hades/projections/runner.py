"""Keeping projections current: replay the log from the start, then follow it live.

Callers that just appended can wait for the projection to reach their sequence (read-your-writes), so a client
that gets a job id back from ``POST /build`` can read that job at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncGenerator, Callable, Iterator

from hades.core.ports import Recorded

log = logging.getLogger(__name__)

#: The log from a sequence on, in batches (the store's ``replay_batches``): one wake-up of the waiters per batch.
Source = Callable[[int], AsyncGenerator[list[Recorded], None]]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a backlog of the log is folded, on again after (if it was on).

    Folding allocates a few container objects an event and keeps many (the views), so the collector runs a
    young collection every ~70 events and, as the views grow, full ones over everything the process holds: 3-8 µs
    an event, 10-15% of a replay's CPU (measured with ``gc.callbacks``). The fold makes no reference cycles, so
    pausing it frees nothing later than reference counting does; what other code makes meanwhile is collected
    when it is back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class ProjectionRunner:
    """Feeds every event from a source into a set of views and tracks how far they are."""

    def __init__(self, source: Source, apply: Callable[[Recorded], None], start: int = 0) -> None:
        self._source = source
        self._apply = apply
        self._applied = start  # what the views already hold (a snapshot's sequence)
        self._advanced = asyncio.Condition()
        self._observers: list[Callable[[Recorded], None]] = []

    def observe(self, observer: Callable[[Recorded], None]) -> None:
        """Call ``observer`` with each event once the views hold it (live feeds such as the dashboard's)."""
        self._observers.append(observer)

    @property
    def applied(self) -> int:
        """The last stream sequence folded into the views."""
        return self._applied

    async def run(self, from_seq: int = 1, catch_up_to: int = 0) -> None:
        """Replay, then follow until cancelled; until the views hold ``catch_up_to`` (the end of the log when the
        process started), with the cyclic garbage collector paused (see :func:`collector_paused`)."""
        with contextlib.ExitStack() as catching_up:
            if catch_up_to > self._applied:
                catching_up.enter_context(collector_paused())
            async for batch in self._source(from_seq):
                for recorded in batch:
                    self._apply(recorded)
                    for observer in self._observers:
                        try:
                            observer(recorded)
                        except Exception:  # a broken feed must not stop the views
                            log.exception("projection observer failed on event %d", recorded.seq)
                if batch:
                    if batch[-1].seq >= catch_up_to:
                        catching_up.close()  # caught up: the collector runs again (closing twice is a no-op)
                    async with self._advanced:
                        self._applied = batch[-1].seq
                        self._advanced.notify_all()

    async def wait_for(self, seq: int, timeout: float = 5.0) -> bool:
        """Wait until the views include ``seq``; False on timeout."""
        try:
            async with asyncio.timeout(timeout), self._advanced:
                await self._advanced.wait_for(lambda: self._applied >= seq)
        except TimeoutError:
            return False
        return True
