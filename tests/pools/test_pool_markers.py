"""A removed pool's delete marker is purged once old, and a pool whose marker is gone never hands its old, handled
messages out again: its consumers start after the stream's end when a scheduler registers it, or just before its
queued jobs' messages when the watchdog does. Against the real nats-server: the purge, the consumers' start and
what they deliver are the broker's behaviour."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.pools import Pools
from hades.core.spec import JobSpec
from hades.workers.idle_pools import MARKER_MIN_SECONDS
from tests.pools.test_idle_pools import (
    IDLE,
    job_ids,
    pool_of,
    queued,
    queues_left,
    ran_and_ended,
    spec_in_new_pool,
    take,
    watchdog,
)
from tests.workers.test_conclusion import LaterClock
from tests.workers.test_never_queued import view_of

#: Past the bound a marker is kept (3 idle periods of 60 s, at least an hour).
MUCH_LATER = LaterClock(timedelta(seconds=MARKER_MIN_SECONDS + IDLE))


async def test_an_old_marker_is_purged_and_the_pool_used_again_takes_only_new_jobs(
    nc: Client, event_store: NatsEventStore
) -> None:
    spec, pools = spec_in_new_pool(), Pools(nc)
    pool = pool_of(spec)
    old = await ran_and_ended(nc, event_store, pools, spec)
    view = await view_of(event_store, [old])
    for _ in range(3):  # removed, its consumers deleted, then looked at again: a marker a minute old is kept
        await watchdog(event_store, nc, view, Pools(nc)).tick()
    assert (await pools.entry(pool)).removed

    await watchdog(event_store, nc, view, Pools(nc), MUCH_LATER).tick()

    assert (await pools.entry(pool)).revision == 0, "the key is absent, as if never written"
    fresh = await queued(event_store, Pools(nc), spec)
    assert job_ids(await take(nc, pool)) == [fresh]
    entry = await pools.entry(pool)
    assert entry.live and entry.floor > 0  # consumers re-created later start there too


async def removed_pool(nc: Client, event_store: NatsEventStore) -> tuple[JobSpec, Pools, Pools, str]:
    """A pool a scheduler registered and whose one job ran and ended, removed by two watchdog rounds (marker, then
    consumers): its spec, the scheduler's registry (its cache still holds the pool), the watchdog's, the job."""
    spec = spec_in_new_pool()
    scheduler, elsewhere = Pools(nc), Pools(nc)
    old = await ran_and_ended(nc, event_store, scheduler, spec)
    view = await view_of(event_store, [old])
    for _ in range(2):
        await watchdog(event_store, nc, view, elsewhere).tick()
    return spec, scheduler, elsewhere, old


@pytest.mark.parametrize("registered_by", ["scheduler", "watchdog"])
async def test_a_pool_without_its_marker_never_hands_out_its_old_messages(
    nc: Client, event_store: NatsEventStore, registered_by: str
) -> None:
    """The scheduler registers the pool before it queues a job; the watchdog registers it for a job already queued
    (a scheduler's stale cache skipped the registration): either way only that job is delivered."""
    spec, scheduler, elsewhere, old = await removed_pool(nc, event_store)
    pool = pool_of(spec)
    await elsewhere.purge(await elsewhere.entry(pool))
    assert (await elsewhere.entry(pool)).revision == 0 and await queues_left(nc, pool) == []

    if registered_by == "scheduler":
        new = await queued(event_store, Pools(nc), spec)
    else:
        new = await queued(event_store, scheduler, spec)  # its cache answers: no registration
        assert await queues_left(nc, pool) == []
        await watchdog(event_store, nc, await view_of(event_store, [old, new]), elsewhere).tick()

    assert job_ids(await take(nc, pool)) == [new]
    assert (await elsewhere.entry(pool)).live


async def test_a_marker_is_kept_while_its_floor_may_be_needed(nc: Client, event_store: NatsEventStore) -> None:
    """A job queued into the pool after its removal and not yet seen by the watchdog keeps the marker however old,
    and the watchdog that sees the job registers the pool from that floor."""
    spec, scheduler, elsewhere, old = await removed_pool(nc, event_store)
    pool, view = pool_of(spec), await view_of(event_store, [old])
    late = await queued(event_store, scheduler, spec)  # a stale cache: into the removed pool

    await watchdog(event_store, nc, view, elsewhere, MUCH_LATER).tick()  # the watchdog's view lacks the late job
    assert (await elsewhere.entry(pool)).removed

    await watchdog(event_store, nc, await view_of(event_store, [old, late]), elsewhere, MUCH_LATER).tick()
    assert job_ids(await take(nc, pool)) == [late]


async def test_a_marker_of_unknown_floor_is_kept(nc: Client, event_store: NatsEventStore) -> None:
    """A plain delete (``nats kv del``) says nothing of what was handled: without it the pool would restart from
    the stream's end, so it stays however old."""
    spec, pools = spec_in_new_pool(), Pools(nc)
    pool = pool_of(spec)
    old = await ran_and_ended(nc, event_store, pools, spec)
    await (await nc.jetstream().key_value("HADES_POOLS")).delete(pool)
    for _ in range(2):  # its consumers deleted, then looked at again
        await watchdog(event_store, nc, await view_of(event_store, [old]), Pools(nc), MUCH_LATER).tick()

    entry = await pools.entry(pool)
    assert entry.removed and entry.floor == 0
    assert await queues_left(nc, pool) == []


async def test_a_purge_leaves_an_entry_written_after_the_marker(nc: Client, event_store: NatsEventStore) -> None:
    """The pool registered again between a watchdog's look and its purge: the purge takes the marker only."""
    spec, pools = spec_in_new_pool(), Pools(nc)
    pool = pool_of(spec)
    old = await ran_and_ended(nc, event_store, pools, spec)
    await watchdog(event_store, nc, await view_of(event_store, [old]), Pools(nc)).tick()
    marker = await pools.entry(pool)
    assert marker.removed

    assert spec.placement is not None
    await Pools(nc).register(spec.placement)
    await pools.purge(marker)

    entry = await pools.entry(pool)
    assert entry.live and entry.floor == marker.floor


async def test_every_key_is_listed_every_time(nc: Client, event_store: NatsEventStore) -> None:
    """The watchdog's list of pools is whole on every look. (nats-py's KV watcher can end its replay before entries
    already delivered to it: a round that missed a removed pool took it for an unregistered one and never deleted
    its consumers.)"""
    pools = Pools(nc)
    specs = [spec_in_new_pool() for _ in range(12)]
    for spec in specs:
        await pools.register(spec.placement)  # type: ignore[arg-type]
    for spec in specs[::3]:
        entry = await pools.entry(pool_of(spec))
        assert await pools.remove(entry.key, entry.revision, 1)
    keys = {pool_of(spec) for spec in specs}
    for _ in range(300):
        listed = await Pools(nc).entries()
        assert keys <= set(listed)
        assert {key for key in keys if listed[key].removed} == {pool_of(spec) for spec in specs[::3]}
