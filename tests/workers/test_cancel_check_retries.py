"""A heard cancel is checked against the store before the attempt's work is interrupted; a store that cannot be read
at that moment (NATS restarting) is asked again while the work runs. The check's task used to die with the error
("Task exception was never retrieved") and the cancel went unheeded until the attempt's next append."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from hades.adapters.nats.event_store import NatsEventStore
from hades.clock import SystemClock
from hades.core.events import JobCancelRequested
from hades.core.lifecycle import QueueJob, StartAttempt, SubmitJob
from hades.core.spec import JobSpec, Step
from hades.workers.attempt import _Interruptions
from hades.workers.jobs import JobHandle


async def test_a_cancel_whose_check_meets_an_unreadable_store_is_checked_again(
    event_store: NatsEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, job_id = SystemClock(), str(uuid.uuid4())
    job = JobHandle.known(event_store, clock, [])
    spec = JobSpec(name="long", steps=(Step(id=1, image="x", script="sleep 3600"),))
    for command in (SubmitJob(job_id=job_id, spec=spec), QueueJob(), StartAttempt(executor_id="e", attempt=1)):
        await job.run(job_id, command)
    state = job.state
    assert state is not None
    cancel = JobCancelRequested(job_id=job_id, at=clock.now(), by="api", reason="resubmitted")
    await event_store.append(job_id, [cancel], job.seq)

    real, failures = event_store.last_seq, [1]

    async def unreadable_once(self: Any, wanted: str) -> int:
        if failures:
            failures.pop()
            raise TimeoutError("nats: timeout")
        return await real(wanted)

    monkeypatch.setattr(NatsEventStore, "last_seq", unreadable_once)
    interruptions = _Interruptions(job, job_id, state.attempt)
    work = asyncio.create_task(asyncio.sleep(3600))
    interruptions.follow(work)
    interruptions.on_event(cancel)
    try:
        await asyncio.wait({work}, timeout=10)
        interrupted = work.cancelled()
    finally:
        interruptions.stop()
        work.cancel()
    assert interrupted
    assert failures == []
