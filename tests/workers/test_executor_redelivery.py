"""A queue message redelivered to the executor that runs its attempt never starts the attempt a second time.

The case the chaos campaign found: while a NATS node was down the executor could not extend its message's ack
deadline, so the message came back to that same executor, which judged it on a read from a replica that lagged
behind its own ``started``. Its start then met a conflict, and the job's newest event, its own ``started``, carried
the message id the retry would have had: it was taken for "my append landed" and the step ran twice.

Here a real ExecutorWorker on a real nats-server runs a job with the process executor; its keep-alive is silenced
(NATS never hears ``in_progress``) and its store answers from a replica stuck before the attempt started.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.interruptions import JobInterruptions
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.pools import queue_consumer
from hades.adapters.nats.slots import Lease
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.adapters.process.executor import ProcessExecutor
from hades.clock import SystemClock
from hades.core.errors import InvalidTransition
from hades.core.lifecycle import JobState, QueueJob, StartAttempt, SubmitJob, decide
from hades.core.ports import Recorded
from hades.core.spec import JobSpec, Priority, Step
from hades.tasks import stop
from hades.workers.attempt import AttemptRunner
from hades.workers.executor import ExecutorOptions, ExecutorWorker
from hades.workers.jobs import JobHandle
from hades.workers.keepalive import KeepAlive
from tests.conftest import eventually


class LaggingReplica(NatsEventStore):
    """Answers a job's history as it stood when first read, as an R3 follower behind the leader may."""

    def __init__(self, nc: Client) -> None:
        super().__init__(nc)
        self.first_reads: dict[str, Sequence[Recorded]] = {}

    async def history(self, job_id: str) -> Sequence[Recorded]:
        if job_id not in self.first_reads:
            self.first_reads[job_id] = await super().history(job_id)
        return self.first_reads[job_id]


class SlowPull(ProcessExecutor):
    """Holds the attempts of one job in ``prepare`` (an image pull that takes long) until the gate opens; what
    earlier tests left in the shared queue passes."""

    def __init__(self, root: Path, executor_id: str, job_id: str) -> None:
        super().__init__(root, executor_id)
        self.job_id = job_id
        self.gate = asyncio.Event()
        self.prepares = 0

    async def prepare(self, job: JobState) -> dict[str, float]:
        if job.job_id == self.job_id:
            self.prepares += 1
            await self.gate.wait()
        return await super().prepare(job)


async def silenced(self: KeepAlive, msg: Msg, lease: Lease | None) -> None:
    await asyncio.Event().wait()  # ``in_progress`` never reaches NATS (a node of the cluster is down)


async def test_a_redelivery_to_the_executor_running_its_attempt_does_not_start_it_again(
    nc: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hades.workers.redelivery")
    monkeypatch.setattr(KeepAlive, "keep", silenced)
    clock, store = SystemClock(), LaggingReplica(nc)
    js = nc.jetstream()
    consumer = queue_consumer(Priority.HIGH)
    config = (await js.consumer_info(EVENTS_STREAM, consumer)).config
    original = config.ack_wait
    config.ack_wait = 1
    await js.add_consumer(EVENTS_STREAM, config=config)
    runs = tmp_path / "runs"
    script = f"echo run >> {runs}"
    spec = JobSpec(name="once", steps=(Step(id=1, image="none", script=script),))
    job_id = str(uuid.uuid4())
    executor_id = f"redelivery-{job_id[:8]}"
    interruptions = JobInterruptions(nc)
    engine = SlowPull(tmp_path / "work", executor_id, job_id)
    runner = AttemptRunner(engine, NatsLogStore(nc).writer, executor_id, interruptions.watch)
    worker = ExecutorWorker(
        nc, store, runner, engine, clock, ExecutorOptions(executor_id, concurrency=4), Heartbeats(nc)
    )
    before = (await js.consumer_info(EVENTS_STREAM, consumer)).delivered.consumer_seq
    task = asyncio.create_task(worker.run())
    try:
        writer = NatsEventStore(nc)
        seq = await writer.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
        await writer.append(
            job_id, decide((await JobHandle.load(writer, clock, job_id)).state, QueueJob(), clock.now()), seq
        )

        async def came_again() -> bool:  # and was either left to the run or (the bug) started a second time
            return "came again while its attempt runs here" in caplog.text or engine.prepares > 1

        # its ``started`` is the job's newest event while the attempt is held in prepare, as in the chaos run
        await eventually(came_again, timeout=20)
        engine.gate.set()

        async def ended() -> str | None:
            state = (await JobHandle.load(writer, clock, job_id)).state
            return state.status.value if state is not None and state.status.is_terminal else None

        assert await eventually(ended) == "Succeeded"
        assert engine.prepares == 1 and runs.read_text().splitlines() == ["run"]  # the attempt ran once
        types = [r.event.type for r in await writer.history(job_id)]
        assert types.count("started") == 1

        async def acked() -> bool:
            info = await js.consumer_info(EVENTS_STREAM, consumer)
            return info.num_ack_pending == 0 and info.delivered.consumer_seq - before >= 2

        await eventually(acked)  # the run acked its message, delivered twice (at least) meanwhile
    finally:
        engine.gate.set()
        await stop(task)
        await interruptions.stop()
        config.ack_wait = original
        await js.add_consumer(EVENTS_STREAM, config=config)


async def test_a_start_decided_again_on_a_stale_read_is_a_conflict_not_its_own_retry(
    event_store: NatsEventStore,
) -> None:
    clock = SystemClock()
    job_id = str(uuid.uuid4())
    spec = JobSpec(name="stale", steps=(Step(id=1, image="busybox"),))
    await event_store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
    await (await JobHandle.load(event_store, clock, job_id)).run(job_id, QueueJob())
    stale = await JobHandle.load(event_store, clock, job_id)  # the job queued, as a lagging replica still has it
    retried = await JobHandle.load(event_store, clock, job_id)
    first = await JobHandle.load(event_store, clock, job_id)

    await first.run(job_id, StartAttempt(1, "executor-1", claim="7.1"))

    # the same delivery's append sent again (its ack lost): recognised as landed, nothing appended twice
    assert [e.type for e in await retried.run(job_id, StartAttempt(1, "executor-1", claim="7.1"))] == ["started"]
    # the next delivery of the message, decided on the stale read: a conflict, and on a fresh read no longer queued
    with pytest.raises(InvalidTransition):
        await stale.run(job_id, StartAttempt(1, "executor-1", claim="7.2"))
    assert [r.event.type for r in await event_store.history(job_id)] == ["submitted", "queued", "started"]
