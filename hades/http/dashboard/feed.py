"""``/api/stream``: job changes and metrics to every open dashboard, fed by the projection as it folds events.

Each client has a bounded buffer (32 frames, as the Go dashboard). A slow client is not disconnected and does not
slow the others: frames for it are dropped, but unlike the Go dashboard it is told so, by one ``resync`` frame once
it has read what was buffered, and the page refetches what it shows instead of silently showing stale rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from hades.core.ports import Recorded
from hades.core.redact import Redactor
from hades.http.dashboard.summaries import job_summary
from hades.projections.jobs import JobsView

BUFFER = 32
EMPTY_JOB = {"id": "", "status": ""}
CLOSED = ""  # queued to end a stream: never a frame


@dataclass(eq=False)  # identity: each open stream is its own subscriber
class Subscriber:
    """One open ``/api/stream``."""

    frames: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(maxsize=BUFFER))
    dropped: int = 0
    lagging: bool = False

    def offer(self, frame: str) -> None:
        """Queue a frame, or drop it (and remember to tell the client) when the buffer is full."""
        try:
            self.frames.put_nowait(frame)
        except asyncio.QueueFull:
            self.dropped += 1
            self.lagging = True

    def close(self) -> None:
        """Queue the end of the stream after what is buffered (making room for it: the page refetches anyway)."""
        if self.frames.full():
            self.frames.get_nowait()
        self.frames.put_nowait(CLOSED)

    def resync_due(self) -> bool:
        """True once, when frames were dropped and the client has read what was buffered: a refetch then is
        newer than anything still queued, so no older frame can overwrite what it fetched."""
        if self.lagging and self.frames.empty():
            self.lagging = False
            return True
        return False


class JobFeed:
    """Fans job changes out to subscribers; ``on_event`` is a projection observer."""

    def __init__(self, jobs: JobsView, redactor: Redactor, now: Callable[[], datetime]) -> None:
        self._jobs = jobs
        self._redactor = redactor
        self._now = now
        self.subscribers: set[Subscriber] = set()

    def on_event(self, recorded: Recorded) -> None:
        """Send the changed job's summary to every subscriber (nothing is built when nobody listens)."""
        if not self.subscribers:
            return
        job = self._jobs.get(recorded.event.job_id)
        if job is None:
            return
        frame = json.dumps({"type": "job", "job": job_summary(job, self._now(), self._redactor)})
        for subscriber in self.subscribers:
            subscriber.offer(frame)

    def close(self) -> None:
        """End every open stream: the API stops (the page reconnects to another replica, or after the restart)."""
        for subscriber in self.subscribers:
            subscriber.close()

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[Subscriber]:
        """A subscriber for as long as the block runs."""
        subscriber = Subscriber()
        self.subscribers.add(subscriber)
        try:
            yield subscriber
        finally:
            self.subscribers.discard(subscriber)


def metrics_frame(metrics: dict[str, object]) -> str:
    """The Go shape, the empty ``job`` object included (its struct field is not a pointer)."""
    return json.dumps({"type": "metrics", "job": EMPTY_JOB, "metrics": metrics})


RESYNC = json.dumps({"type": "resync", "job": EMPTY_JOB})


async def stream_frames(
    subscriber: Subscriber,
    metrics: Callable[[], dict[str, object]],
    metrics_every: float = 5.0,
    ping_every: float = 25.0,
) -> AsyncGenerator[str | None, None]:
    """Frames for one client: metrics first and every ``metrics_every`` s, job frames as they come; None means
    "send a heartbeat comment" (every ``ping_every`` s)."""
    loop = asyncio.get_running_loop()
    yield metrics_frame(metrics())
    next_metrics = loop.time() + metrics_every
    next_ping = loop.time() + ping_every
    while True:
        now = loop.time()
        if now >= next_metrics:  # checked on every turn, so a busy feed still gets its metrics
            next_metrics = now + metrics_every
            yield metrics_frame(metrics())
        if now >= next_ping:
            next_ping = now + ping_every
            yield None
        if subscriber.resync_due():
            yield RESYNC
        try:
            frame = await asyncio.wait_for(subscriber.frames.get(), max(min(next_metrics, next_ping) - now, 0.0))
        except TimeoutError:
            continue
        if frame == CLOSED:
            return
        yield frame
