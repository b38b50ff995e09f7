"""JobInterruptions on a real nats-server: a watcher hears its job's cancel requests and queueings, nothing else."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from nats.aio.client import Client

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.interruptions import JobInterruptions
from hades.adapters.nats.server import start_nats
from hades.clock import SystemClock
from hades.core.events import Event, JobCancelRequested, JobQueued
from hades.core.lifecycle import QueueJob, RequestCancel, StartAttempt, SubmitJob, decide
from hades.core.spec import JobSpec, Step
from hades.workers.jobs import JobHandle
from tests.conftest import eventually


async def started_job(store: NatsEventStore) -> JobHandle:
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    spec = JobSpec(name="watched", steps=(Step(id=1, image="busybox"),))
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
    job = await JobHandle.load(store, clock, job_id)
    await job.run(job_id, QueueJob())
    await job.run(job_id, StartAttempt(attempt=1, executor_id="exec-test"))
    return job


async def test_a_watcher_hears_its_jobs_cancel_and_requeue_only_and_nothing_after_unwatch(
    nc: Client, event_store: NatsEventStore
) -> None:
    interruptions = JobInterruptions(nc)
    watched, other = await started_job(event_store), await started_job(event_store)
    assert watched.state is not None and other.state is not None
    heard: list[Event] = []
    unwatch = await interruptions.watch(watched.state.job_id, heard.append)
    try:
        await other.run(other.state.job_id, RequestCancel(by="someone"))  # another job's cancel: not ours
        await watched.run(watched.state.job_id, RequestCancel(by="alice", reason="enough"))
        await eventually(lambda: _count(heard, 1), timeout=5)
        await asyncio.sleep(0.2)  # anything else would have arrived by now
        assert [type(e) for e in heard] == [JobCancelRequested]
        assert heard[0].job_id == watched.state.job_id

        await nc.publish(f"hades.events.{watched.state.job_id}.queued.high", _queued(watched.state.job_id))
        await eventually(lambda: _count(heard, 2), timeout=5)
        assert isinstance(heard[1], JobQueued) and heard[1].attempt == 2
    finally:
        await unwatch()
    await nc.publish(f"hades.events.{watched.state.job_id}.queued.high", _queued(watched.state.job_id))
    await nc.flush()
    await asyncio.sleep(0.2)
    assert len(heard) == 2
    await interruptions.stop()


def _queued(job_id: str) -> bytes:
    return JobQueued(job_id=job_id, at=SystemClock().now(), attempt=2, priority="high").model_dump_json().encode()


async def _count(heard: list[Event], n: int) -> bool:
    return len(heard) >= n


async def test_the_doorbell_rings_for_every_queueing_on_the_same_subscription(tmp_path: Path) -> None:
    # A server of its own without streams: what is published here is stored nowhere for later tests to meet.
    server = start_nats(tmp_path / "nats")
    nc = await connect(server.url)
    try:
        interruptions = JobInterruptions(nc)
        first: list[str] = []
        unring = await interruptions.ring(lambda: first.append("rung"))
        queueing = f"hades.events.{uuid.uuid4()}.queued.low"  # any job's queueing rings, watched or not
        await nc.publish(queueing, b"")
        await eventually(lambda: _rung(first, 1), timeout=5)

        await unring()
        second: list[str] = []
        await interruptions.ring(lambda: second.append("rung"))
        await nc.publish(f"hades.events.{uuid.uuid4()}.cancel_requested", b"")  # not a queueing
        await nc.publish(queueing, b"")
        await eventually(lambda: _rung(second, 1), timeout=5)

        assert first == ["rung"]  # the queueing after it stopped did not ring it
        assert second == ["rung"]
        assert len(nc._subs) == 2  # the interruptions' own two: none for the doorbell
        await interruptions.stop()
    finally:
        await nc.close()
        server.stop()


async def _rung(bells: list[str], n: int) -> bool:
    return len(bells) >= n
