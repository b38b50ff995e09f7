"""The watchdog queues a job the scheduler's consumer never did: its scheduler died holding the ``submitted``
message (which comes back only after the consumer's ack wait), or the message ran out of deliveries while the log
was away. Before, such a job waited forever."""

from __future__ import annotations

import uuid
from datetime import timedelta

from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.clock import SystemClock
from hades.core.lifecycle import SubmitJob, decide
from hades.core.spec import JobSpec, Step
from hades.projections.jobs import JobsView
from hades.workers.watchdog import Watchdog, WatchdogPolicy
from tests.workers.test_conclusion import LaterClock

SPEC = JobSpec(name="forgotten", steps=(Step(id=1, image="x"),))


async def submitted_only(store: NatsEventStore) -> str:
    """A job whose ``submitted`` landed and nothing else: no scheduler queued it."""
    job_id = str(uuid.uuid4())
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=SPEC), SystemClock().now()), 0)
    return job_id


async def view_of(store: NatsEventStore, job_ids: list[str]) -> JobsView:
    view = JobsView()
    every = [recorded for job_id in job_ids for recorded in await store.history(job_id)]
    for recorded in sorted(every, key=lambda recorded: recorded.seq):  # a view takes the log in order
        view.apply(recorded)
    return view


async def kinds(store: NatsEventStore, job_id: str) -> list[str]:
    return [recorded.event.type for recorded in await store.history(job_id)]


async def test_a_job_submitted_long_ago_and_never_queued_is_queued(nc: Client, event_store: NatsEventStore) -> None:
    job_id = await submitted_only(event_store)
    policy = WatchdogPolicy(queue_after=10)

    soon = Watchdog(
        event_store, LaterClock(timedelta(seconds=5)), await view_of(event_store, [job_id]), Heartbeats(nc), policy
    )
    assert await soon.tick() == 0  # its scheduler may still be on it
    assert await kinds(event_store, job_id) == ["submitted"]

    later = LaterClock(timedelta(seconds=11))
    watchdog = Watchdog(event_store, later, await view_of(event_store, [job_id]), Heartbeats(nc), policy)
    assert await watchdog.tick() == 1
    assert await kinds(event_store, job_id) == ["submitted", "queued"]
    assert await watchdog.tick() == 0  # queued once: the view still says unqueued, the log does not


async def test_at_most_so_many_are_queued_a_round(nc: Client, event_store: NatsEventStore) -> None:
    jobs = [await submitted_only(event_store) for _ in range(3)]
    policy = WatchdogPolicy(queue_after=10, queue_per_round=2)
    later = LaterClock(timedelta(seconds=11))

    first = Watchdog(event_store, later, await view_of(event_store, jobs), Heartbeats(nc), policy)
    assert await first.tick() == 2
    second = Watchdog(event_store, later, await view_of(event_store, jobs), Heartbeats(nc), policy)
    assert await second.tick() == 1
    assert [await kinds(event_store, job_id) for job_id in jobs] == [["submitted", "queued"]] * 3
