"""A scheduler stopped between two appends leaves a pipeline half moved; the next scheduler's watchdog finishes the
move. Against the real event store, with the watchdog's round called by hand (no other scheduler runs here)."""

from __future__ import annotations

import asyncio
import uuid

from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.clock import SystemClock
from hades.core.events import JobSubmitted, StageEnded, StageLaunched
from hades.core.lifecycle import FinishStep, MarkPrepared, QueueJob, StartAttempt, StartStep, Status, SubmitJob, decide
from hades.core.spec import JobSpec, Step
from hades.core.stages import Stage, stage_job_id
from hades.projections.jobs import JobsView
from hades.workers.jobs import JobHandle
from hades.workers.pipelines import PipelineCoordinator
from hades.workers.watchdog import Watchdog, WatchdogPolicy

STEPS = (Step(id=1, image="x", script="true"),)
SPEC = JobSpec(name="p", stages=(Stage(name="a", steps=STEPS), Stage(name="b", steps=STEPS)))


async def watchdog_round(store: NatsEventStore, nc: Client, *job_ids: str) -> int:
    """One round of a fresh scheduler's watchdog over these jobs."""
    view = JobsView()
    for recorded in sorted([r for job_id in job_ids for r in await store.history(job_id)], key=lambda r: r.seq):
        view.apply(recorded)
    clock = SystemClock()
    watchdog = Watchdog(store, clock, view, Heartbeats(nc), WatchdogPolicy(), PipelineCoordinator(store, clock))
    return await watchdog.tick()


async def types(store: NatsEventStore, job_id: str) -> list[str]:
    return [r.event.type for r in await store.history(job_id)]


async def run_to_success(store: NatsEventStore, job_id: str) -> None:
    """What an executor would append for the stage's job."""
    job = await JobHandle.load(store, SystemClock(), job_id)
    for command in (QueueJob(), StartAttempt(1, "gone"), MarkPrepared(1), StartStep(1, 0), FinishStep(1, 0, 0)):
        await job.run(job_id, command)
    assert job.state is not None and job.state.status is Status.SUCCEEDED


async def test_each_half_done_move_is_finished_by_the_watchdog(event_store: NatsEventStore, nc: Client) -> None:
    store, clock = event_store, SystemClock()
    pid = str(uuid.uuid4())
    await store.append(pid, decide(None, SubmitJob(job_id=pid, spec=SPEC), clock.now()), 0)
    a, b = stage_job_id(pid, "a"), stage_job_id(pid, "b")

    # 1. stopped after stage_launched: the stage's job was never submitted
    seq = await store.last_seq(pid)
    await store.append(pid, [StageLaunched(job_id=pid, at=clock.now(), stage="a", stage_job_id=a)], seq)
    assert await types(store, a) == []
    assert await watchdog_round(store, nc, pid) == 1
    (submitted,) = await store.history(a)
    assert isinstance(submitted.event, JobSubmitted) and submitted.event.pipeline is not None
    assert submitted.event.pipeline.id == pid and submitted.event.pipeline.stage == "a"
    assert submitted.event.spec.name == "p/a" and str(submitted.event.spec.id) == a
    assert await watchdog_round(store, nc, pid, a) == 0  # nothing more to do while a runs

    # 2. the stage's job ended, but its end was never recorded on the pipeline: recorded, and b launched
    await run_to_success(store, a)
    assert await watchdog_round(store, nc, pid, a) == 2
    assert await types(store, pid) == ["submitted", "stage_launched", "stage_ended", "stage_launched"]
    assert (await store.history(b))[0].event.type == "submitted"

    # 3. every stage ended and recorded, but the pipeline's own end is missing
    await run_to_success(store, b)
    seq = await store.last_seq(pid)
    await store.append(pid, [StageEnded(job_id=pid, at=clock.now(), stage="b", status="Succeeded")], seq)
    assert await watchdog_round(store, nc, pid, a, b) == 1
    assert (await types(store, pid))[-1] == "succeeded"
    assert await watchdog_round(store, nc, pid, a, b) == 0


async def test_two_coordinators_racing_launch_each_stage_once(event_store: NatsEventStore) -> None:
    store, clock = event_store, SystemClock()
    pid = str(uuid.uuid4())
    spec = JobSpec(name="race", stages=tuple(Stage(name=f"s{i}", needs=(), steps=STEPS) for i in range(6)))
    await store.append(pid, decide(None, SubmitJob(job_id=pid, spec=spec), clock.now()), 0)
    await asyncio.gather(*(PipelineCoordinator(store, clock).reconcile(pid) for _ in range(4)))
    launched = [r.event for r in await store.history(pid) if isinstance(r.event, StageLaunched)]
    assert sorted(e.stage for e in launched) == [f"s{i}" for i in range(6)]
    for event in launched:
        assert [r.event.type for r in await store.history(event.stage_job_id)] == ["submitted"]
