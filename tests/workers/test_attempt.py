"""The attempt runner against the real event store, with an executor that fails on purpose where a real engine
cannot be made to (a volume that cannot be created, a crash inside the executor): every way ends the job."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest
from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.clock import SystemClock
from hades.core.events import Event, JobStarted
from hades.core.lifecycle import JobState, QueueJob, RequestCancel, Status, SubmitJob, decide
from hades.core.ports import AttemptLost, ExecutionError, Recorded, StepLogs, StepResult
from hades.core.spec import JobSpec, Step
from hades.workers.attempt import AttemptRunner
from hades.workers.jobs import JobHandle


class FailingExecutor:
    """An Executor whose prepare or run_step raises what it is given; records its cleanups."""

    def __init__(self, on_prepare: Exception | None = None, on_step: Exception | None = None) -> None:
        self.on_prepare = on_prepare
        self.on_step = on_step
        self.cleaned: list[tuple[str, int]] = []

    async def prepare(self, job: JobState) -> dict[str, float]:
        if self.on_prepare is not None:
            raise self.on_prepare
        return {"volume": 0.001}

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        await logs.open(f"fake-{index}")
        if self.on_step is not None:
            raise self.on_step
        return StepResult(exit_code=0)

    async def cleanup(self, job: JobState) -> None:
        self.cleaned.append((job.job_id, job.attempt))

    async def sweep(self, running: Callable[[str], bool], live_executors: set[str]) -> int:
        return 0


async def queued_job(store: NatsEventStore) -> JobHandle:
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    spec = JobSpec(name="j", steps=(Step(id=1, image="x"),))
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
    job = await JobHandle.load(store, clock, job_id)
    await job.run(job_id, QueueJob())
    return job


@pytest.mark.parametrize(
    ("executor", "reason"),
    [
        (
            FailingExecutor(on_prepare=ExecutionError("failed to create the shared volume: no space")),
            "failed to create the shared volume: no space",
        ),
        (FailingExecutor(on_step=RuntimeError("boom")), "executor error: RuntimeError: boom"),
        (FailingExecutor(on_step=ExecutionError("lost the Docker engine")), "lost the Docker engine"),
    ],
)
async def test_every_failure_ends_the_job_and_cleans_up(
    nc: Client, event_store: NatsEventStore, executor: FailingExecutor, reason: str
) -> None:
    job = await queued_job(event_store)
    runner = AttemptRunner(executor, NatsLogStore(nc).writer, "exec-test", event_store.watch)

    assert await runner.run(job, attempt=1)

    final = await JobHandle.load(event_store, SystemClock(), job.state.job_id)  # type: ignore[union-attr]
    assert final.state is not None and final.state.status is Status.FAILED
    assert final.state.reason == reason
    assert executor.cleaned == [(final.state.job_id, 1)]


async def test_an_attempt_taken_by_someone_else_is_not_run(nc: Client, event_store: NatsEventStore) -> None:
    job = await queued_job(event_store)
    runner = AttemptRunner(FailingExecutor(), NatsLogStore(nc).writer, "late", event_store.watch)
    other = await JobHandle.load(event_store, SystemClock(), job.state.job_id)  # type: ignore[union-attr]
    first = AttemptRunner(FailingExecutor(), NatsLogStore(nc).writer, "early", event_store.watch)
    assert await first.run(other, attempt=1)

    assert not await runner.run(job, attempt=1)


@pytest.mark.parametrize(
    ("max_attempts", "status", "reason"),
    [
        (2, Status.QUEUED, "step 1's container was removed from outside while it ran; attempt 1 handed back"),
        (1, Status.FAILED, "step 1's container was removed from outside while it ran; gave up after 1 attempts"),
    ],
)
async def test_an_attempt_lost_to_the_engine_is_handed_back_while_attempts_are_left(
    nc: Client, event_store: NatsEventStore, max_attempts: int, status: Status, reason: str
) -> None:
    executor = FailingExecutor(on_step=AttemptLost("step 1's container was removed from outside while it ran"))
    job = await queued_job(event_store)
    runner = AttemptRunner(executor, NatsLogStore(nc).writer, "exec-test", event_store.watch, max_attempts=max_attempts)

    assert await runner.run(job, attempt=1)

    final = await JobHandle.load(event_store, SystemClock(), job.state.job_id)  # type: ignore[union-attr]
    assert final.state is not None and final.state.status is status
    assert final.state.attempt == 1 + (status is Status.QUEUED)
    assert final.state.reason == reason
    assert executor.cleaned == [(final.state.job_id, 1)]


@dataclass
class CountedReads:
    """The real store, counting the reads an attempt makes of it; ``cancel_after_start`` has another writer
    append a cancel request right after the ``started`` append lands."""

    store: NatsEventStore
    cancel_after_start: bool = False
    reads: list[str] = field(default_factory=list)

    async def append(self, job_id: str, events: Sequence[Event], expected_seq: int) -> int:
        seq = await self.store.append(job_id, events, expected_seq)
        if self.cancel_after_start and isinstance(events[-1], JobStarted):
            other = await JobHandle.load(self.store, SystemClock(), job_id)
            await other.run(job_id, RequestCancel(by="someone"))
        return seq

    async def history(self, job_id: str) -> list[Recorded]:
        self.reads.append("history")
        return await self.store.history(job_id)

    async def last_seq(self, job_id: str) -> int:
        self.reads.append("last_seq")
        return await self.store.last_seq(job_id)

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


class StuckExecutor(FailingExecutor):
    """Prepares forever: only an interruption ends its attempts."""

    async def prepare(self, job: JobState) -> dict[str, float]:
        await asyncio.Event().wait()
        return {}


async def test_an_uninterrupted_attempt_reads_nothing_back_from_the_store(
    nc: Client, event_store: NatsEventStore
) -> None:
    job = await queued_job(event_store)
    counted = CountedReads(event_store)
    job.store = counted  # type: ignore[assignment]
    runner = AttemptRunner(FailingExecutor(), NatsLogStore(nc).writer, "exec-test", event_store.watch)

    assert await runner.run(job, attempt=1)

    assert job.state is not None and job.state.status is Status.SUCCEEDED
    assert counted.reads == []  # it listens before it starts: no read of the job's newest event per attempt


async def test_a_cancel_landing_right_after_the_start_stops_the_attempt(
    nc: Client, event_store: NatsEventStore
) -> None:
    job = await queued_job(event_store)
    job.store = CountedReads(event_store, cancel_after_start=True)  # type: ignore[assignment]
    executor = StuckExecutor()
    runner = AttemptRunner(executor, NatsLogStore(nc).writer, "exec-test", event_store.watch)

    async with asyncio.timeout(30):
        assert await runner.run(job, attempt=1)

    final = await JobHandle.load(event_store, SystemClock(), job.state.job_id)  # type: ignore[union-attr]
    assert final.state is not None and final.state.status is Status.STOPPED
    assert executor.cleaned == [(final.state.job_id, 1)]
