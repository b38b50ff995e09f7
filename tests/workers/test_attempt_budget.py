"""Every role gives up on a job by the job's own attempt budget (stamped by the API that accepted it), whatever its
own MAX_ATTEMPTS says: roles configured apart cannot disagree about a job."""

from __future__ import annotations

import uuid

from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.clock import SystemClock
from hades.core.lifecycle import MarkPrepared, QueueJob, StartAttempt, Status, SubmitJob, decide
from hades.core.spec import JobSpec, Step
from hades.projections.jobs import JobsView
from hades.runtime import Roles
from hades.workers.jobs import JobHandle
from hades.workers.watchdog import Watchdog, WatchdogPolicy
from tests.conftest import StartHades

SPEC = JobSpec(name="budget", steps=(Step(id=1, image="x"),))


async def test_the_watchdog_gives_up_by_the_jobs_budget(nc: Client, event_store: NatsEventStore) -> None:
    job_id, clock = str(uuid.uuid4()), SystemClock()
    await event_store.append(job_id, decide(None, SubmitJob(job_id, SPEC, max_attempts=1), clock.now()), 0)
    job = await JobHandle.load(event_store, clock, job_id)
    for command in (QueueJob(), StartAttempt(1, "an-executor-long-gone"), MarkPrepared(1)):
        await job.run(job_id, command)
    view = JobsView()
    for recorded in await event_store.history(job_id):
        view.apply(recorded)

    watchdog = Watchdog(event_store, clock, view, Heartbeats(nc), WatchdogPolicy(max_attempts=3))
    assert await watchdog.tick() == 1

    final = await JobHandle.load(event_store, clock, job_id)
    assert final.state is not None and final.state.status is Status.FAILED
    assert final.state.reason == (
        "executor an-executor-long-gone was lost (its heartbeat expired); gave up after 1 attempts"
    )


async def test_the_api_stamps_its_max_attempts_on_every_job(start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True), MAX_ATTEMPTS="2")
    job_id = await api.submit({"name": "stamped", "steps": [{"id": 1, "image": "busybox", "script": "true"}]})

    events = (await api.client.get(f"/jobs/{job_id}/events")).json()["events"]
    assert events[0]["type"] == "submitted" and events[0]["max_attempts"] == 2
