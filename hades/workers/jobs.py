"""Running commands against one job: read its history, decide, append; on a conflict, re-read and re-decide."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from hades.core.errors import ConcurrencyConflict, InvalidTransition
from hades.core.events import Event
from hades.core.lifecycle import Command, ConcludeJob, JobState, decide, evolve, fold
from hades.core.ports import Clock, EventStore, Recorded

log = logging.getLogger(__name__)

#: How often a command is re-decided after losing a race before giving up.
MAX_CONFLICT_RETRIES = 5


@dataclass
class JobHandle:
    """One job's state and its last sequence, kept current by the commands run through it."""

    store: EventStore
    clock: Clock
    state: JobState | None
    seq: int
    trace: str | None = None  # the traceparent of the job's newest event as loaded

    @classmethod
    async def load(cls, store: EventStore, clock: Clock, job_id: str) -> JobHandle:
        """Fold the job's stored history."""
        return cls.known(store, clock, await store.history(job_id))

    @classmethod
    def known(cls, store: EventStore, clock: Clock, history: Sequence[Recorded]) -> JobHandle:
        """The job as far as ``history`` goes (a prefix of it will do: a command decided on a stale view only
        meets a conflict, and is then re-read and re-decided)."""
        state = fold([r.event for r in history])
        last = history[-1] if history else None
        return cls(
            store=store, clock=clock, state=state, seq=last.seq if last else 0, trace=last.trace if last else None
        )

    async def reload(self, job_id: str) -> None:
        """Re-read the job after someone else moved it."""
        fresh = await JobHandle.load(self.store, self.clock, job_id)
        self.state, self.seq, self.trace = fresh.state, fresh.seq, fresh.trace

    async def run(self, job_id: str, command: Command) -> list[Event]:
        """Decide and append; re-decide on a conflict. Raises InvalidTransition when it no longer applies.

        A decision of several events (a step's end, then the job's end it implies) is appended one event after
        the other, not as a JetStream atomic batch: a batch costs a file-backed stream about 40 times the server
        time of a plain append and capped a whole cluster near 300 jobs a second. Only the first event can meet
        a conflict that voids the decision; if a later one does (a cancel request landed in between), the end is
        decided afresh. A writer that stops in between leaves the end due, for ``conclusion`` to find.
        """
        for _ in range(MAX_CONFLICT_RETRIES):
            events = decide(self.state, command, self.clock.now())
            if not events:
                return []  # the decision holds already (a cancel asked for twice): nothing to append
            try:
                await self._append(job_id, events[0])
            except ConcurrencyConflict as conflict:
                log.info("conflict on job %s (%s); re-reading", job_id, conflict)
                await self.reload(job_id)
                continue
            for index, event in enumerate(events[1:], start=1):
                try:
                    await self._append(job_id, event)
                except ConcurrencyConflict:
                    await self.reload(job_id)
                    return [*events[:index], *await self._conclude(job_id)]
            return events
        raise ConcurrencyConflict(job_id, self.seq, None)

    async def _append(self, job_id: str, event: Event) -> None:
        self.seq = await self.store.append(job_id, [event], self.seq)
        self.state = evolve(self.state, event)

    async def _conclude(self, job_id: str) -> list[Event]:
        """The job's due end, if it still has one after the race."""
        try:
            return await self.run(job_id, ConcludeJob())
        except InvalidTransition:
            return []  # it ended otherwise meanwhile
