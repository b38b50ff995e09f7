"""Idle executor pools are removed by the scheduler's watchdog, and a job queued into a pool just after its removal
(a scheduler's cache still held the pool) is delivered all the same. Against the real nats-server: the consumers'
pending counts, delivery policies and the KV delete marker are the broker's behaviour."""

from __future__ import annotations

import contextlib
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.pools import PRIORITY_ORDER, Pools, queue_consumer
from hades.adapters.nats.queues import NoWaitPuller
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.clock import SystemClock
from hades.config import Settings
from hades.core.codec import decode_event
from hades.core.constraints import Constraint, Placement
from hades.core.lifecycle import FailJob, SubmitJob, decide
from hades.core.spec import JobSpec, Priority, Step
from hades.projections.jobs import JobsView
from hades.runtime import Roles
from hades.workers.jobs import JobHandle
from hades.workers.scheduler import queue_job
from hades.workers.watchdog import Watchdog, WatchdogPolicy
from tests.conftest import SpawnRole, StartHades, eventually
from tests.workers.test_conclusion import LaterClock
from tests.workers.test_never_queued import view_of

IDLE = 60.0
POLICY = WatchdogPolicy(pool_idle=IDLE, pools_every=0, queue_after=3600)  # a job left unqueued stays so
LATER = LaterClock(timedelta(seconds=IDLE + 5))


def spec_in_new_pool() -> JobSpec:
    """A job whose constraint no other test uses: a pool of its own."""
    constraint = Constraint(attribute="pool", value=f"idle{uuid.uuid4().hex[:8]}")
    return JobSpec(name="pooled", steps=(Step(id=1, image="x"),), constraints=(constraint,))


def pool_of(spec: JobSpec) -> str:
    assert spec.placement is not None
    return spec.placement.key


async def submit(store: NatsEventStore, spec: JobSpec) -> str:
    job_id = str(uuid.uuid4())
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), SystemClock().now()), 0)
    return job_id


async def queued(store: NatsEventStore, pools: Pools, spec: JobSpec) -> str:
    """A job submitted and queued by a scheduler whose pool registry is ``pools``."""
    job_id = await submit(store, spec)
    assert await queue_job(store, SystemClock(), job_id, pools=pools)
    return job_id


async def take(nc: Client, pool: str, priority: Priority = Priority.HIGH) -> list[Msg]:
    """What the pool's queue of ``priority`` delivers, as an executor's no-wait pulls get it: asked again until it
    gives something (a consumer hears of an append a moment after its ack, so a no-wait pull right after it can
    find nothing yet), for at most 5 s."""
    puller = NoWaitPuller(nc, EVENTS_STREAM, queue_consumer(priority, pool))
    await puller.start()
    try:

        async def some() -> list[Msg]:
            return await puller.pull_many(10, timeout=2)

        return await eventually(some, timeout=5)
    finally:
        await puller.stop()


def job_ids(msgs: list[Msg]) -> list[str]:
    return [decode_event(msg.data).job_id for msg in msgs]


async def ended(store: NatsEventStore, job_id: str) -> None:
    """The job's end (its attempt's message acked before, as an executor would)."""
    await (await JobHandle.load(store, SystemClock(), job_id)).run(job_id, FailJob(1, "done"))


async def ran_and_ended(nc: Client, store: NatsEventStore, pools: Pools, spec: JobSpec) -> str:
    """A job of the pool that was queued, taken, acked and ended."""
    job_id = await queued(store, pools, spec)
    (msg,) = await take(nc, pool_of(spec))
    assert job_ids([msg]) == [job_id]
    await msg.ack_sync()
    await ended(store, job_id)
    return job_id


async def queues_left(nc: Client, pool: str) -> list[str]:
    js, left = nc.jetstream(), []
    for priority in PRIORITY_ORDER:
        with contextlib.suppress(NotFoundError):
            left.append((await js.consumer_info(EVENTS_STREAM, queue_consumer(priority, pool))).name)
    return left


def watchdog(store: NatsEventStore, nc: Client, view: JobsView, pools: Pools, clock: LaterClock = LATER) -> Watchdog:
    return Watchdog(store, clock, view, Heartbeats(nc), POLICY, pools=pools)


async def followed(pools: Pools, pool: str) -> Placement | None:
    """What an executor following HADES_POOLS makes of the pool now."""
    async for key, placement in pools.follow():
        if key == pool:
            return placement
    raise AssertionError("unreachable: follow() never ends")


async def test_an_idle_pool_is_removed_and_executors_stop_pulling_it(nc: Client, event_store: NatsEventStore) -> None:
    spec, pools = spec_in_new_pool(), Pools(nc)
    pool = pool_of(spec)
    job_id = await ran_and_ended(nc, event_store, pools, spec)
    view = await view_of(event_store, [job_id])

    await watchdog(event_store, nc, view, pools, LaterClock()).tick()
    assert (await pools.entry(pool)).live, "idle for less than HADES_POOL_IDLE_SECONDS: kept"

    before = await pools.last_seq()
    await watchdog(event_store, nc, view, pools).tick()
    entry = await pools.entry(pool)
    assert entry.removed and entry.floor >= before
    assert not await pools.remove(pool, entry.revision - 1, 0)  # written only over the entry it looked at
    assert await pools.entry(pool) == entry
    assert await followed(pools, pool) is None  # an executor drops the pool's pullers
    assert not await pools.ensure_queues(pool)  # nor does an executor that saw it live bring its queues back
    assert len(await queues_left(nc, pool)) == 3  # left a round for executors to let go of them

    await watchdog(event_store, nc, view, pools).tick()
    assert await queues_left(nc, pool) == []
    assert (await pools.entry(pool)).removed


async def test_a_pool_in_use_is_kept(nc: Client, event_store: NatsEventStore) -> None:
    """An unfinished job placed in it (here one submitted and not yet queued: its queues are empty), a pending
    message or an unacked delivery (even where the watchdog's view does not show the job yet) each keep a pool."""
    pools = Pools(nc)
    unfinished, pending, unacked = spec_in_new_pool(), spec_in_new_pool(), spec_in_new_pool()
    earlier = await ran_and_ended(nc, event_store, pools, unfinished)
    waiting = await submit(event_store, unfinished)
    await queued(event_store, pools, pending)
    await queued(event_store, pools, unacked)
    assert len(await take(nc, pool_of(unacked))) == 1  # delivered, not acked

    view = await view_of(event_store, [earlier, waiting])
    for _ in range(2):
        await watchdog(event_store, nc, view, pools).tick()
        for spec in (unfinished, pending, unacked):
            assert (await pools.entry(pool_of(spec))).live
            assert len(await queues_left(nc, pool_of(spec))) == 3


async def test_never_removed_with_idle_zero(nc: Client, event_store: NatsEventStore) -> None:
    spec, pools = spec_in_new_pool(), Pools(nc)
    job_id = await ran_and_ended(nc, event_store, pools, spec)
    policy = WatchdogPolicy(pool_idle=0, pools_every=0)
    never = Watchdog(event_store, LATER, await view_of(event_store, [job_id]), Heartbeats(nc), policy, pools=pools)
    await never.tick()
    assert (await pools.entry(pool_of(spec))).live


@pytest.mark.parametrize("consumers_deleted", [True, False])
async def test_a_job_queued_into_a_just_removed_pool_is_delivered_and_old_messages_are_not(
    nc: Client, event_store: NatsEventStore, consumers_deleted: bool
) -> None:
    """The race: one scheduler's cache still holds the pool when another scheduler's watchdog removes it."""
    spec = spec_in_new_pool()
    pool = pool_of(spec)
    scheduler, elsewhere = Pools(nc), Pools(nc)
    old = await ran_and_ended(nc, event_store, scheduler, spec)
    view = await view_of(event_store, [old])
    await watchdog(event_store, nc, view, elsewhere).tick()
    if consumers_deleted:
        await watchdog(event_store, nc, view, elsewhere).tick()
    assert (await elsewhere.entry(pool)).removed

    late = await queued(event_store, scheduler, spec)  # the cache answers: no look at HADES_POOLS
    assert (await elsewhere.entry(pool)).removed
    assert len(await queues_left(nc, pool)) == (0 if consumers_deleted else 3)  # stranded, or unfollowed

    await watchdog(event_store, nc, await view_of(event_store, [old, late]), elsewhere).tick()

    entry = await elsewhere.entry(pool)
    assert entry.live and await followed(elsewhere, pool) == spec.placement
    assert job_ids(await take(nc, pool)) == [late]  # the old job's message is not delivered again
    if consumers_deleted:
        info = await nc.jetstream().consumer_info(EVENTS_STREAM, queue_consumer(Priority.HIGH, pool))
        assert info.config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE
        assert info.config.opt_start_seq == entry.floor + 1 and entry.floor > 0


async def test_a_pool_used_again_after_removal_works_from_its_floor(nc: Client, event_store: NatsEventStore) -> None:
    """A scheduler that registered the pool before its removal looks again within ``recheck`` seconds, and one that
    never knew it registers it afresh; either way the consumers come back from the removal's floor."""
    spec = spec_in_new_pool()
    pool = pool_of(spec)
    scheduler = Pools(nc, recheck=0)  # looks at HADES_POOLS at each registration, as one does after 10 s
    old = await ran_and_ended(nc, event_store, scheduler, spec)
    view = await view_of(event_store, [old])
    for _ in range(2):
        await watchdog(event_store, nc, view, Pools(nc)).tick()
    assert await queues_left(nc, pool) == []

    again = await queued(event_store, scheduler, spec)
    assert (await scheduler.entry(pool)).live and len(await queues_left(nc, pool)) == 3
    (msg,) = await take(nc, pool)
    assert job_ids([msg]) == [again]
    await msg.ack_sync()
    await ended(event_store, again)

    for _ in range(2):  # removed once more, then used by a scheduler that never saw it
        await watchdog(event_store, nc, JobsView(), Pools(nc), LaterClock(timedelta(seconds=IDLE + 30))).tick()
    assert await queues_left(nc, pool) == []
    fresh = await queued(event_store, Pools(nc), spec)
    assert job_ids(await take(nc, pool)) == [fresh]
    await watchdog(event_store, nc, JobsView(), Pools(nc)).tick()
    assert (await scheduler.entry(pool)).live  # its message awaits an ack: in use


def test_the_setting_defaults_to_an_hour_and_zero_turns_removal_off() -> None:
    assert Settings().pool_idle_seconds == 3600
    assert Settings(HADES_POOL_IDLE_SECONDS="0").pool_idle_seconds == 0


async def test_a_real_executor_lets_go_of_a_removed_pool_and_takes_its_jobs_again(
    start_hades: StartHades, spawn_role: SpawnRole, nc: Client, tmp_path: Path
) -> None:
    """End to end: the scheduler removes the pool once its job ended, and the same pool's next job still runs."""
    run = uuid.uuid4().hex[:6]
    api = await start_hades(Roles(api=True, scheduler=True), HADES_WATCHDOG_SECONDS="0.2", HADES_POOL_IDLE_SECONDS="1")
    spawn_role(
        "executor",
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path / "ws"),
        HADES_EXECUTOR_LABELS=f"pool=e{run}",
    )
    job = {
        "name": "pooled",
        "constraints": [{"attribute": "pool", "value": f"e{run}"}],
        "steps": [{"id": 1, "image": "ignored", "script": "true"}],
    }
    first = await api.wait_terminal(await api.submit(job), timeout=30)
    assert first["status"] == "Succeeded"
    placement = JobSpec(name="x", constraints=(Constraint(attribute="pool", value=f"e{run}"),)).placement
    assert placement is not None
    pools = Pools(nc)

    async def gone() -> bool:
        return (await pools.entry(placement.key)).removed and await queues_left(nc, placement.key) == []

    await eventually(gone, timeout=30)
    second = await api.wait_terminal(await api.submit(job), timeout=30)
    assert second["status"] == "Succeeded"
    assert (await pools.entry(placement.key)).live
