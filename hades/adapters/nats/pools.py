"""Executor pools: the queues of jobs with constraints, and KV ``HADES_POOLS`` that names them.

A job with constraints or resources is queued on ``hades.events.<job_id>.queued.<priority>.<pool>``, where the pool
is the key of its normalised placement (``hades.core.constraints``). Each pool has one durable consumer per
priority, ``executor-<priority>-<pool>``, filtered on exactly its subjects; the plain queues' filters
(``hades.events.*.queued.<priority>``) never match a pool's subjects, which have one token more.

The scheduler registers a pool (its placement under its key in ``HADES_POOLS``, then its consumers) before it
queues the pool's first job; every executor watches the bucket and pulls from the pools whose placement its labels
satisfy, so all matching executors compete for a pool's jobs and the others never see them. A pool's consumers copy
the configuration of the plain queue of their priority, which ``streams.yaml`` declares, so the ack deadline and
the limits stay in one place; consumers are data here (one set per distinct placement), not topology.

A pool that fell idle is removed by the scheduler's watchdog (``hades.workers.idle_pools``): its key gets a delete
marker whose body is ``{"removed_at_seq": N}``, the event stream's last sequence when every message of the pool up
to it had been delivered and acknowledged, and its consumers are deleted. Executors (of any version) read the
marker as "removed" and stop pulling. That N is the pool's *floor*: consumers re-created later (the pool is used
again, or a scheduler with a stale cache queued a job into it just after the removal) deliver from N + 1, so they
include every message appended since the removal and none of the pool's handled history. A live entry written
after a removal carries the floor on (header ``Hades-Pool-Floor``; its body stays the bare placement, as older
executors read it). A floor of 0 (unknown) re-creates the consumers from the start of the stream: slower, never
wrong. Once old, a marker with a floor is purged and the key is absent again; whoever registers a pool without a key
gives the floor: a scheduler the stream's last sequence (it queues the pool's job after), the watchdog the sequence
just before the pool's queued jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerInfo, DeliverPolicy
from nats.js.errors import APIError, NotFoundError
from nats.js.kv import KV_DEL, KV_OP, KV_PURGE, KeyValue
from pydantic import ValidationError

from hades.adapters.nats.following import StreamFollower
from hades.adapters.nats.subjects import token
from hades.adapters.nats.topology import EVENTS_STREAM, stream_consumers
from hades.core.constraints import Placement
from hades.core.spec import Priority

log = logging.getLogger(__name__)

BUCKET = "HADES_POOLS"
#: Strict priority: an executor with a free slot asks high, then medium, then low.
PRIORITY_ORDER = (Priority.HIGH, Priority.MEDIUM, Priority.LOW)
#: The body field of a removed pool's delete marker.
REMOVED_AT_SEQ = "removed_at_seq"
#: The header of a live entry that carries the floor of an earlier removal on.
FLOOR_HEADER = "Hades-Pool-Floor"
_KV_STREAM = f"KV_{BUCKET}"
_KV_PREFIX = f"$KV.{BUCKET}."
_EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
_FOLLOW_BUFFER = 1000  # pool changes read ahead of the executor taking them in
#: Seconds a scheduler trusts that a pool it registered is still there before it looks again (one KV read).
RECHECK_SECONDS = 10.0


def queue_consumer(priority: Priority, pool: str | None = None) -> str:
    """The durable consumer that is one queue: ``executor-high``, or ``executor-high-<pool>``."""
    return f"executor-{priority.value}" if pool is None else f"executor-{priority.value}-{token(pool)}"


def queue_subjects(priority: Priority, pool: str | None = None) -> str:
    """The subjects of one queue's messages (every job's ``queued`` events of that priority and pool)."""
    base = f"hades.events.*.queued.{priority.value}"
    return base if pool is None else f"{base}.{token(pool)}"


@dataclass(frozen=True)
class PoolEntry:
    """A pool's key in ``HADES_POOLS`` as it stands."""

    key: str
    revision: int = 0  # 0: never written (nothing to remove, or a write expecting none)
    removed: bool = False
    floor: int = 0  # consumers deliver from floor + 1 (0: from the start of the stream)
    changed_at: datetime | None = None

    @property
    def live(self) -> bool:
        return self.revision > 0 and not self.removed


class Pools:
    """Register pools (the scheduler), follow them (the executors), list and remove them (the watchdog)."""

    def __init__(self, nc: Client, stream: str = EVENTS_STREAM, recheck: float = RECHECK_SECONDS) -> None:
        self._nc = nc
        self._stream = stream
        self._recheck = recheck
        self._kv: KeyValue | None = None
        self._ready: dict[str, float] = {}  # pool -> when (monotonic) this process last saw it registered

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._nc.jetstream().key_value(BUCKET)
        return self._kv

    async def register(self, placement: Placement) -> str:
        """Make the pool of ``placement`` known and its queues exist; returns its key. Idempotent.

        A pool this process registered is trusted for ``recheck`` seconds, then looked at again (one KV read), so a
        pool removed meanwhile is registered again before the next job is queued into it. Within that window a job
        may land in a just-removed pool: the watchdog's next round registers the pool of every queued job."""
        pool = placement.key
        seen = self._ready.get(pool)
        now = time.monotonic()
        if seen is not None and now - seen < self._recheck:
            return pool
        if seen is None or not (await self.entry(pool)).live:
            await self.restore(placement)  # the job is queued afterwards: a pool without a key may start at the end
        self._ready[pool] = now
        return pool

    async def restore(self, placement: Placement, since: int | None = None) -> str:
        """Register the pool whatever this process remembers: its consumers (from the pool's floor) first, so an
        executor that sees the pool can pull at once, then its live entry.

        A pool without a key (new, or removed so long ago that its marker was purged) has no floor: ``since``
        gives it, a sequence up to which no message of the pool waits (one before it would never be delivered).
        None: the event stream's last sequence now, right for a caller that queues the pool's next job afterwards
        (a marker is purged only once every message of its pool was handled)."""
        pool = placement.key
        for _ in range(5):
            entry = await self.entry(pool)
            if not entry.revision:
                entry = dataclasses.replace(entry, floor=await self.last_seq() if since is None else since)
            await self.ensure_queues(pool, entry.floor)
            if entry.live or await self._put(pool, placement, entry):
                return pool
        raise RuntimeError(f"pool {pool} kept changing while it was registered")

    def forget(self, pool: str) -> None:
        """This process no longer takes the pool for registered (it removed it)."""
        self._ready.pop(pool, None)

    async def _put(self, pool: str, placement: Placement, entry: PoolEntry) -> bool:
        """The live entry, unless the key changed since ``entry`` was read."""
        headers = {_EXPECTED_LAST: str(entry.revision)}
        if entry.floor:
            headers[FLOOR_HEADER] = str(entry.floor)
        try:
            await self._nc.jetstream().publish(_KV_PREFIX + pool, placement.model_dump_json().encode(), headers=headers)
        except APIError as error:
            if error.err_code in (10071, 10164):  # wrong last sequence: someone else wrote the key meanwhile
                return False
            raise
        return True

    async def entry(self, pool: str) -> PoolEntry:
        """The pool's key as it stands now, with its floor."""
        try:
            msg = await self._nc.jetstream().get_msg(_KV_STREAM, subject=_KV_PREFIX + token(pool))
        except NotFoundError:
            return PoolEntry(pool)
        headers = msg.headers or {}
        removed = headers.get(KV_OP) in (KV_DEL, KV_PURGE)
        floor = _removed_at(msg.data) if removed else _int(headers.get(FLOOR_HEADER))
        return PoolEntry(pool, int(msg.seq or 0), removed, floor, msg.time)

    async def entries(self) -> dict[str, PoolEntry]:
        """Every key of the bucket, live or removed, each as ``entry`` reads it.

        The keys come from the stream's count of messages per subject, then one read of each key's newest message.
        Not the KV watcher: nats-py ends its replay on a consumer info that races the deliveries, so a watcher can
        say "that was all" before entries it was already sent (seen: a round that missed a removed pool took it for
        a key never written, and its consumers were never deleted)."""
        info = await self._nc.jetstream().stream_info(_KV_STREAM, subjects_filter=_KV_PREFIX + ">")
        keys = [subject.removeprefix(_KV_PREFIX) for subject in info.state.subjects or {}]
        return {
            entry.key: entry for entry in await asyncio.gather(*(self.entry(key) for key in keys)) if entry.revision
        }

    async def queues(self) -> dict[str, dict[Priority, ConsumerInfo]]:
        """Every pool's consumers that exist, with their state, from one listing of the stream's consumers."""
        prefixes = {f"{queue_consumer(priority)}-": priority for priority in PRIORITY_ORDER}
        found: dict[str, dict[Priority, ConsumerInfo]] = {}
        for info in await stream_consumers(self._nc.jetstream(), self._stream):
            for prefix, priority in prefixes.items():
                if info.name.startswith(prefix):
                    found.setdefault(info.name.removeprefix(prefix), {})[priority] = info
        return found

    async def last_seq(self) -> int:
        """The event stream's newest sequence."""
        return int((await self._nc.jetstream().stream_info(self._stream)).state.last_seq)

    async def ensure_queues(self, pool: str, floor: int | None = None) -> bool:
        """Create the pool's consumers that are missing, each a copy of its priority's plain queue delivering from
        ``floor`` + 1 (from the start when 0). Without a floor the pool's entry gives it, and a removed pool's
        queues are not brought back, nor those of a pool without a key (its next registration does that): False
        then."""
        if floor is None:
            entry = await self.entry(pool)
            if not entry.live:
                return False
            floor = entry.floor
        js = self._nc.jetstream()
        for priority in PRIORITY_ORDER:
            name = queue_consumer(priority, pool)
            try:
                await js.consumer_info(self._stream, name)
                continue
            except NotFoundError:
                pass
            base = (await js.consumer_info(self._stream, queue_consumer(priority))).config
            config = dataclasses.replace(
                base,
                name=name,
                durable_name=name,
                filter_subject=None,
                filter_subjects=[queue_subjects(priority, pool)],
            )
            if floor:
                config = dataclasses.replace(
                    config, deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=floor + 1
                )
            try:
                await js.add_consumer(self._stream, config=config)
            except APIError:
                await js.consumer_info(self._stream, name)  # created meanwhile (another floor): it is there
            log.info("created the queue %s for pool %s (from stream sequence %d)", name, pool, floor + 1)
        return True

    async def remove(self, pool: str, revision: int, removed_at_seq: int) -> bool:
        """Mark the pool removed (executors stop pulling it), unless its key changed since ``revision``; the
        floor ``removed_at_seq`` must be a sequence up to which every message of the pool was handled. Its
        consumers are deleted separately (``delete_queues``), once executors had time to let go of them."""
        body = json.dumps({REMOVED_AT_SEQ: removed_at_seq}).encode()
        headers = {KV_OP: KV_DEL, _EXPECTED_LAST: str(revision)}
        try:
            await self._nc.jetstream().publish(_KV_PREFIX + token(pool), body, headers=headers)
        except APIError as error:
            if error.err_code in (10071, 10164):
                return False
            raise
        self.forget(pool)
        return True

    async def purge(self, entry: PoolEntry) -> None:
        """Drop a removed pool's delete marker: the key is then absent, as if never written. Only the marker of
        ``entry`` and what came before it go (a live entry written since stays)."""
        subject = _KV_PREFIX + token(entry.key)
        await self._nc.jetstream().purge_stream(_KV_STREAM, subject=subject, seq=entry.revision + 1)
        self.forget(entry.key)

    async def queued_after(self, pool: str, seq: int) -> bool:
        """Whether the event stream holds a ``queued`` event of the pool after sequence ``seq``."""
        return await self._first(f"hades.events.*.queued.*.{token(pool)}", seq + 1) is not None

    async def before_queued(self, job_id: str, pool: str) -> int:
        """The sequence just before the job's first ``queued`` event in the pool (0 when it has none)."""
        first = await self._first(f"hades.events.{token(job_id)}.queued.*.{token(pool)}", 1)
        return first - 1 if first is not None else 0

    async def _first(self, subjects: str, start: int) -> int | None:
        """The sequence of the first message on ``subjects`` at or after ``start``, None when there is none."""
        try:
            msg = await self._nc.jetstream().get_msg(self._stream, seq=start, subject=subjects, next=True)
        except NotFoundError:
            return None
        return int(msg.seq or 0)

    async def delete_queues(self, pool: str) -> None:
        """Delete the pool's consumers (those that exist)."""
        js = self._nc.jetstream()
        for priority in PRIORITY_ORDER:
            with contextlib.suppress(NotFoundError):
                await js.delete_consumer(self._stream, queue_consumer(priority, pool))

    async def follow(self) -> AsyncIterator[tuple[str, Placement | None]]:
        """Every pool now, then each change as it happens: ``(key, placement)``, with None for a removed pool; each
        change once and in order through NATS restarts (read off the bucket's stream by a ``StreamFollower``: a
        KV watcher sat 10-20 s behind after a restart, and a pool created meanwhile waited for its executors)."""
        changes: asyncio.Queue[tuple[str, Placement | None]] = asyncio.Queue(maxsize=_FOLLOW_BUFFER)

        async def collect(_seq: int, msg: Msg) -> None:
            key = msg.subject.removeprefix(_KV_PREFIX)
            if (msg.headers or {}).get(KV_OP) in (KV_DEL, KV_PURGE) or not msg.data:
                await changes.put((key, None))
                return
            try:
                await changes.put((key, Placement.model_validate_json(msg.data)))
            except ValidationError:
                log.error("pool %s has an unreadable placement; its jobs wait for an executor that reads it", key)

        # The bucket keeps one revision a key (history 1), so its stream from the start is every pool as it stands
        # (and the markers of removed ones), then each change.
        follower = StreamFollower(self._nc, _KV_STREAM, f"{_KV_PREFIX}>", 1, collect, "the executor pools")
        await follower.start()
        try:
            while True:
                yield await changes.get()
        finally:
            await follower.stop()


def _removed_at(body: bytes | None) -> int:
    """The floor a delete marker carries; 0 (unknown) for a plain delete or a purge."""
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return 0
    return _int(value.get(REMOVED_AT_SEQ)) if isinstance(value, dict) else 0


def _int(value: object) -> int:
    try:
        return max(int(str(value)), 0)
    except ValueError:
        return 0
