"""``hades replay``: rebuild every read model from the event log, optionally as the world was at a moment."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hades.core.ports import EventStore
from hades.projections.runner import collector_paused
from hades.projections.views import ReadModels


@dataclass
class ReplayReport:
    """What one replay read and how fast."""

    events: int
    seconds: float
    last_seq: int
    views: ReadModels

    @property
    def per_second(self) -> float:
        """Events folded per second."""
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def summary(self, now: datetime) -> dict[str, Any]:
        """Plain data for printing."""
        return {
            "events": self.events,
            "last_seq": self.last_seq,
            "seconds": round(self.seconds, 3),
            "events_per_second": round(self.per_second),
            "jobs": len(self.views.jobs.jobs),
            "metrics": self.views.metrics.snapshot(now),
        }


async def replay(
    store: EventStore, last_seq: int, until_seq: int | None = None, until_time: datetime | None = None
) -> ReplayReport:
    """Fold the log from the start up to ``last_seq`` (or ``until_seq``), skipping events after ``until_time``."""
    target = min(last_seq, until_seq) if until_seq is not None else last_seq
    views = ReadModels()
    events = 0
    began = time.perf_counter()
    if target > 0:
        apply = views.apply
        with collector_paused():  # hades replay folds and exits: nothing else runs meanwhile
            async with contextlib.aclosing(store.replay_batches(1)) as batches:
                async for batch in batches:
                    if until_time is None and batch[-1].seq <= target:  # the whole batch: no test per event
                        for recorded in batch:
                            apply(recorded)
                        events += len(batch)
                    else:
                        for recorded in batch:
                            if recorded.seq > target:
                                break
                            if until_time is None or recorded.event.at <= until_time:
                                apply(recorded)
                                events += 1
                    if batch[-1].seq >= target:
                        break
    return ReplayReport(events=events, seconds=time.perf_counter() - began, last_seq=target, views=views)
