"""The roles acting on terminal events trust what the event says follows the end (``FollowUps``): for a job with
nothing to deliver and no pipeline, nothing of the job is read; an event that does not say falls back to the
job's ``submitted``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from hades.adapters.http_delivery import DeliveryResult
from hades.clock import SystemClock
from hades.core.events import FollowUps, JobFailed, JobSubmitted, JobSucceeded, PipelineRef
from hades.core.ports import EventStore, LogStore, Recorded
from hades.core.spec import JobSpec, Step
from hades.workers.notifier import LogForwarder, NotifierSettings, wants_a_delivery_to
from hades.workers.pipelines import PipelineCoordinator
from hades.workers.webhooks import WebhookSender, WebhookSettings

JOB_ID = "0b7e3b52-5d0f-4f4e-9a53-2d6f8f1d6c11"
PIPELINE_ID = "5d0f2d6f-0b7e-4f4e-9a53-8f1d6c113b52"
AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


class CountingStore:
    """An event store that knows one stage job's ``submitted`` and counts every read of the job."""

    def __init__(self) -> None:
        self.reads = 0

    async def submitted(self, job_id: str) -> Recorded | None:
        self.reads += 1
        spec = JobSpec(name="stage", steps=(Step(id=1, image="busybox"),))
        ref = PipelineRef(id=PIPELINE_ID, stage="build")
        return Recorded(seq=1, event=JobSubmitted(job_id=job_id, at=AT, spec=spec, priority="high", pipeline=ref))

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the job was read ({name})")


async def never_sent(*_: object) -> DeliveryResult:
    raise AssertionError("nothing is to be sent")


@pytest.mark.parametrize("follow_ups", [FollowUps(), FollowUps(pipeline=PIPELINE_ID)])
async def test_an_end_with_nothing_to_deliver_reads_nothing(follow_ups: FollowUps) -> None:
    store = CountingStore()
    events = cast(EventStore, store)
    forwarder = LogForwarder(events, SystemClock(), cast(LogStore, store), never_sent, NotifierSettings())
    sender = WebhookSender(events, SystemClock(), never_sent, WebhookSettings())
    assert await forwarder.forward(JOB_ID, 1, 7, follow_ups) is None
    assert await sender.deliver(JOB_ID, 1, 7, follow_ups) is None
    assert store.reads == 0


async def test_what_the_end_says_decides_and_an_end_that_does_not_say_is_looked_up() -> None:
    store = CountingStore()
    events = cast(EventStore, store)
    assert await wants_a_delivery_to(events, JOB_ID, "callback_url", FollowUps(logs=True)) is True
    assert await wants_a_delivery_to(events, JOB_ID, "status_callback_url", FollowUps(logs=True)) is False
    assert await wants_a_delivery_to(events, JOB_ID, "status_callback_url", FollowUps(webhook=True)) is True
    assert store.reads == 0
    assert await wants_a_delivery_to(events, JOB_ID, "callback_url") is False  # an older end: read its submitted
    assert store.reads == 1


class RecordingCoordinator(PipelineCoordinator):
    def __init__(self, store: EventStore) -> None:
        super().__init__(store, SystemClock())
        self.reconciled: list[str] = []

    async def reconcile(self, pipeline_id: str) -> int:
        self.reconciled.append(pipeline_id)
        return 0


async def test_the_coordinator_moves_the_pipeline_a_stage_end_names_without_reading_it() -> None:
    store = CountingStore()
    coordinator = RecordingCoordinator(cast(EventStore, store))
    await coordinator.on_event(JobSucceeded(job_id=JOB_ID, at=AT, attempt=1, follow_ups=FollowUps()))
    await coordinator.on_event(JobFailed(job_id=JOB_ID, at=AT, attempt=1, reason="x", follow_ups=FollowUps()))
    assert coordinator.reconciled == [] and store.reads == 0
    await coordinator.on_event(JobSucceeded(job_id=JOB_ID, at=AT, attempt=1, follow_ups=FollowUps(pipeline="p")))
    assert coordinator.reconciled == ["p"] and store.reads == 0
    await coordinator.on_event(JobSucceeded(job_id=JOB_ID, at=AT, attempt=1))  # an older end: its submitted says
    assert coordinator.reconciled == ["p", PIPELINE_ID] and store.reads == 1
