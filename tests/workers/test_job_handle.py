"""``JobHandle.run`` on a decision that holds already: nothing is appended, and nothing breaks."""

from __future__ import annotations

import uuid

from hades.adapters.nats.event_store import NatsEventStore
from hades.clock import SystemClock
from hades.core.lifecycle import QueueJob, RequestCancel, StartAttempt, SubmitJob, decide
from hades.core.spec import JobSpec, Step
from hades.workers.jobs import JobHandle


async def test_a_cancel_asked_for_twice_appends_once_and_the_second_is_no_error(event_store: NatsEventStore) -> None:
    clock = SystemClock()
    job_id = str(uuid.uuid4())
    spec = JobSpec(name="twice", steps=(Step(id=1, image="busybox"),))
    await event_store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
    job = await JobHandle.load(event_store, clock, job_id)
    await job.run(job_id, QueueJob())
    await job.run(job_id, StartAttempt(1, "executor-1"))
    assert [e.type for e in await job.run(job_id, RequestCancel(by="alice"))] == ["cancel_requested"]
    assert await job.run(job_id, RequestCancel(by="bob")) == []  # was an IndexError (POST .../cancel twice: a 500)
    kinds = [r.event.type for r in await event_store.history(job_id)]
    assert kinds == ["submitted", "queued", "started", "cancel_requested"]
