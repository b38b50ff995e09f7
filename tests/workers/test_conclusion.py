"""A decision of several events is appended one event after the other (not as an atomic batch): a writer that
stops in between leaves the job's end due, and a race in between is settled by deciding the end afresh. Against
the real event store."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.clock import SystemClock
from hades.core.errors import InvalidTransition
from hades.core.events import Event, JobCancelRequested, StepFinished
from hades.core.lifecycle import (
    FinishStep,
    MarkPrepared,
    QueueJob,
    RequestCancel,
    StartAttempt,
    StartStep,
    Status,
    SubmitJob,
    decide,
)
from hades.core.spec import JobSpec, Step
from hades.projections.jobs import JobsView
from hades.workers.jobs import JobHandle
from hades.workers.watchdog import Watchdog, WatchdogPolicy

SPEC = JobSpec(name="j", steps=(Step(id=1, image="x"), Step(id=2, image="x")))


@dataclass
class LaterClock:
    """The system clock moved on by ``ahead``."""

    ahead: timedelta = timedelta(0)

    def now(self) -> datetime:
        return SystemClock().now() + self.ahead


@dataclass
class CancelAfterStepEnd:
    """The real store, with a cancel request appended by another writer right after a step's end lands, so the
    job's end that follows meets a conflict."""

    store: NatsEventStore
    appended: list[str] = field(default_factory=list)

    async def append(self, job_id: str, events: Sequence[Event], expected_seq: int) -> int:
        seq = await self.store.append(job_id, events, expected_seq)
        self.appended.extend(event.type for event in events)
        if isinstance(events[-1], StepFinished) and not any(t == "cancel_requested" for t in self.appended):
            other = await JobHandle.load(self.store, SystemClock(), job_id)
            await other.run(job_id, RequestCancel(by="someone"))
            self.appended.append("cancel_requested")
        return seq

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


async def running_job(store: NatsEventStore, executor_id: str, finished_steps: int) -> JobHandle:
    """A job on ``executor_id`` whose first ``finished_steps`` steps ended well (and nothing more was written)."""
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=SPEC), clock.now()), 0)
    job = await JobHandle.load(store, clock, job_id)
    for command in (QueueJob(), StartAttempt(1, executor_id), MarkPrepared(1)):
        await job.run(job_id, command)
    for index in range(finished_steps):
        await job.run(job_id, StartStep(1, index))
        if index == len(SPEC.steps) - 1:
            # The writer stops between the step's end and the job's: only the step's end lands.
            assert job.state is not None
            [finished, _] = decide(job.state, FinishStep(1, index, 0), clock.now())
            job.seq = await store.append(job_id, [finished], job.seq)
        else:
            await job.run(job_id, FinishStep(1, index, 0))
    return job


async def watchdog_over(store: NatsEventStore, nc: Client, job_id: str, clock: LaterClock) -> Watchdog:
    view = JobsView()
    for recorded in await store.history(job_id):
        view.apply(recorded)
    return Watchdog(store, clock, view, Heartbeats(nc), WatchdogPolicy(conclude_after=30))


async def test_a_due_end_left_by_a_lost_executor_is_recorded_not_run_again(
    nc: Client, event_store: NatsEventStore
) -> None:
    job = await running_job(event_store, "gone-executor", finished_steps=2)
    job_id = job.state.job_id  # type: ignore[union-attr]

    watchdog = await watchdog_over(event_store, nc, job_id, LaterClock())
    assert await watchdog.tick() == 1

    history = [r.event.type for r in await event_store.history(job_id)]
    assert history[-2:] == ["step_finished", "succeeded"]
    assert "queued" not in history[2:]  # not handed back for a second run
    final = await JobHandle.load(event_store, SystemClock(), job_id)
    assert final.state is not None and final.state.status is Status.SUCCEEDED and final.state.attempt == 1


async def test_a_due_end_on_a_live_executor_waits_for_it_then_is_recorded(
    nc: Client, event_store: NatsEventStore
) -> None:
    heartbeats = Heartbeats(nc)
    await heartbeats.beat("live-executor", {"busy": 1})
    job = await running_job(event_store, "live-executor", finished_steps=2)
    job_id = job.state.job_id  # type: ignore[union-attr]

    clock = LaterClock()
    assert await (await watchdog_over(event_store, nc, job_id, clock)).tick() == 0  # its executor may still write it

    clock.ahead = timedelta(seconds=31)
    assert await (await watchdog_over(event_store, nc, job_id, clock)).tick() == 1
    final = await JobHandle.load(event_store, SystemClock(), job_id)
    assert final.state is not None and final.state.status is Status.SUCCEEDED
    await heartbeats.remove("live-executor")


async def test_a_job_still_running_has_no_due_end(nc: Client, event_store: NatsEventStore) -> None:
    heartbeats = Heartbeats(nc)
    await heartbeats.beat("busy-executor", {"busy": 1})
    job = await running_job(event_store, "busy-executor", finished_steps=1)  # step 2 still to run
    job_id = job.state.job_id  # type: ignore[union-attr]

    watchdog = await watchdog_over(event_store, nc, job_id, LaterClock(timedelta(hours=1)))
    assert await watchdog.tick() == 0
    assert [r.event.type for r in await event_store.history(job_id)][-1] == "step_finished"
    await heartbeats.remove("busy-executor")


async def test_a_cancel_between_a_step_end_and_the_job_end_still_ends_the_job_once(
    event_store: NatsEventStore,
) -> None:
    job = await running_job(event_store, "exec", finished_steps=1)
    job_id = job.state.job_id  # type: ignore[union-attr]
    await job.run(job_id, StartStep(1, 1))
    racing = CancelAfterStepEnd(event_store)
    job.store = racing  # type: ignore[assignment]

    events = await job.run(job_id, FinishStep(1, 1, 0))

    assert [e.type for e in events] == ["step_finished", "succeeded"]
    stored = [r.event for r in await event_store.history(job_id)]
    assert [e.type for e in stored[-3:]] == ["step_finished", "cancel_requested", "succeeded"]
    assert isinstance(stored[-2], JobCancelRequested)
    assert job.state is not None and job.state.status is Status.SUCCEEDED


async def half_cancelled_queued_job(event_store: NatsEventStore) -> tuple[str, SystemClock]:
    """A queued job whose cancel was recorded by a writer (the API) that stopped before appending `stopped`."""
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    await event_store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=SPEC), clock.now()), 0)
    job = await JobHandle.load(event_store, clock, job_id)
    await job.run(job_id, QueueJob())
    assert job.state is not None
    [requested, _] = decide(job.state, RequestCancel(by="api"), clock.now())
    await event_store.append(job_id, [requested], job.seq)
    return job_id, clock


async def test_a_queued_job_cancelled_by_a_writer_that_stopped_halfway_is_stopped(
    nc: Client, event_store: NatsEventStore
) -> None:
    job_id, clock = await half_cancelled_queued_job(event_store)

    assert await (await watchdog_over(event_store, nc, job_id, LaterClock())).tick() == 1
    final = await JobHandle.load(event_store, clock, job_id)
    assert final.state is not None and final.state.status is Status.STOPPED
    assert final.state.reason == "cancelled by api"


async def test_a_waiting_job_whose_cancel_is_due_is_not_started(event_store: NatsEventStore) -> None:
    job_id, clock = await half_cancelled_queued_job(event_store)

    executor_view = await JobHandle.load(event_store, clock, job_id)
    with pytest.raises(InvalidTransition):
        await executor_view.run(job_id, StartAttempt(1, "exec"))
    assert [r.event.type for r in await event_store.history(job_id)][-1] == "cancel_requested"


async def test_an_attempt_its_live_executor_lost_track_of_is_handed_back(
    nc: Client, event_store: NatsEventStore
) -> None:
    """The executor process lives on, but the attempt's runner died (the event log was away when it tried to record
    the step's end): its heartbeats stop listing the job, and the scheduler hands the attempt back."""
    heartbeats = Heartbeats(nc)
    job = await running_job(event_store, "forgetful", finished_steps=1)  # step 2 never ran
    job_id = job.state.job_id  # type: ignore[union-attr]
    started = job.state.started_at  # type: ignore[union-attr]
    assert started is not None

    async def beat(running: list[str], after: float) -> None:
        at = (started + timedelta(seconds=after)).isoformat()
        await heartbeats.beat("forgetful", {"busy": len(running), "running": running, "at": at})

    await beat([job_id], after=60)  # still runs it
    assert await (await watchdog_over(event_store, nc, job_id, LaterClock())).tick() == 0
    await beat([], after=5)  # said before the attempt could be listed: not yet a verdict
    assert await (await watchdog_over(event_store, nc, job_id, LaterClock())).tick() == 0

    await beat([], after=31)
    assert await (await watchdog_over(event_store, nc, job_id, LaterClock())).tick() == 1
    history = [r.event for r in await event_store.history(job_id)]
    assert history[-1].type == "queued" and getattr(history[-1], "attempt", None) == 2
    assert "executor forgetful no longer runs attempt 1" in (getattr(history[-1], "reason", "") or "")
    await heartbeats.remove("forgetful")
