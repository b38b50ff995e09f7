"""Delivery bookkeeping: webhook (and logs) delivery attempts are recorded only after a job has ended, never move
its status, and settle the delivery on a success or a final failure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from hades.core.codec import decode_event, encode_event
from hades.core.errors import InvalidTransition
from hades.core.events import Event, LogsForwardFailed, WebhookDelivered, WebhookFailed
from hades.core.lifecycle import (
    Command,
    FinishStep,
    JobState,
    QueueJob,
    RecordLogsDelivery,
    RecordWebhookDelivery,
    RequestCancel,
    StartAttempt,
    StartStep,
    Status,
    SubmitJob,
    decide,
    evolve,
    fold,
)
from hades.core.spec import JobSpec, Step

JOB_ID = "2c1d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
URL = "http://receiver/status"


class Job:
    """One job driven through decide + evolve, a second per command."""

    def __init__(self) -> None:
        self.state: JobState | None = None
        self.history: list[Event] = []
        spec = JobSpec(name="j", steps=(Step(id=1, image="busybox"),), status_callback_url=URL)
        self.run(SubmitJob(job_id=JOB_ID, spec=spec))

    def run(self, command: Command) -> list[Event]:
        events = decide(self.state, command, T0 + timedelta(seconds=len(self.history)))
        for event in events:
            self.state = evolve(self.state, event)
        self.history.extend(events)
        return events

    @property
    def current(self) -> JobState:
        assert self.state is not None
        return self.state


def running() -> Job:
    job = Job()
    job.run(QueueJob())
    job.run(StartAttempt(attempt=1, executor_id="e"))
    job.run(StartStep(attempt=1, step_index=0))
    return job


def ended(how: str) -> Job:
    job = Job()
    job.run(QueueJob())
    if how == "stopped":
        job.run(RequestCancel(by="alice"))
        return job
    job.run(StartAttempt(attempt=1, executor_id="e"))
    job.run(StartStep(attempt=1, step_index=0))
    job.run(FinishStep(attempt=1, step_index=0, exit_code=0 if how == "succeeded" else 1))
    return job


def failed(attempt: int, *, final: bool = False, by: str | None = None) -> RecordWebhookDelivery:
    return RecordWebhookDelivery(
        url=URL,
        delivery_attempt=attempt,
        duration_ms=3,
        status_code=500,
        error="receiver answered HTTP 500",
        final=final,
        redelivered_by=by,
    )


def delivered(attempt: int, *, by: str | None = None) -> RecordWebhookDelivery:
    return RecordWebhookDelivery(url=URL, delivery_attempt=attempt, duration_ms=2, status_code=200, redelivered_by=by)


@pytest.mark.parametrize("setup", [Job, running], ids=["queued", "running"])
def test_a_webhook_attempt_is_refused_before_the_job_has_ended(setup: Callable[[], Job]) -> None:
    job = setup()
    with pytest.raises(InvalidTransition, match="once it has ended"):
        job.run(delivered(1))


def test_no_delivery_is_recorded_for_an_unknown_job() -> None:
    with pytest.raises(InvalidTransition):
        decide(None, delivered(1), T0)


@pytest.mark.parametrize("how", ["succeeded", "failed", "stopped"])
def test_attempts_after_the_end_are_recorded_and_never_move_the_status(how: str) -> None:
    job = ended(how)
    status = job.current.status
    [first] = job.run(failed(1))
    [second] = job.run(delivered(2))
    assert isinstance(first, WebhookFailed) and isinstance(second, WebhookDelivered)
    assert (first.delivery_attempt, first.status_code, first.error, first.final) == (
        1,
        500,
        "receiver answered HTTP 500",
        False,
    )
    assert (second.delivery_attempt, second.status_code, second.url) == (2, 200, URL)
    assert job.current.status is status and status.is_terminal
    assert (job.current.webhook_delivery, job.current.webhook_delivery_attempts) == ("delivered", 2)


def test_non_final_failures_leave_the_delivery_open_and_a_final_one_settles_it() -> None:
    job = ended("failed")
    job.run(failed(1))
    job.run(failed(2))
    assert (job.current.webhook_delivery, job.current.webhook_delivery_attempts) == (None, 2)
    job.run(failed(3, final=True))
    assert (job.current.webhook_delivery, job.current.webhook_delivery_attempts) == ("failed", 3)


def test_a_manual_redelivery_is_recorded_with_who_asked_and_its_outcome_is_the_latest() -> None:
    job = ended("succeeded")
    job.run(delivered(1))
    [again] = job.run(failed(2, final=True, by="hades"))
    assert isinstance(again, WebhookFailed) and again.redelivered_by == "hades"
    assert job.current.webhook_delivery == "failed"
    job.run(delivered(3, by="hades"))
    assert (job.current.webhook_delivery, job.current.webhook_delivery_attempts) == ("delivered", 3)


def test_the_attempt_count_never_goes_back() -> None:
    job = ended("succeeded")
    job.run(failed(5))
    job.run(failed(4))
    assert job.current.webhook_delivery_attempts == 5


def test_webhook_and_logs_deliveries_are_accounted_separately() -> None:
    job = ended("succeeded")
    job.run(RecordLogsDelivery(url="http://r/logs", delivery_attempt=1, duration_ms=1, error="refused", final=True))
    job.run(failed(1))
    job.run(delivered(2))
    state = job.current
    assert (state.logs_delivery, state.logs_delivery_attempts) == ("failed", 1)
    assert (state.webhook_delivery, state.webhook_delivery_attempts) == ("delivered", 2)
    assert isinstance(job.history[-3], LogsForwardFailed)


def test_a_long_error_is_capped_like_a_reason() -> None:
    job = ended("succeeded")
    [event] = job.run(RecordWebhookDelivery(url=URL, delivery_attempt=1, duration_ms=1, error="e" * 2000))
    assert isinstance(event, WebhookFailed) and event.error == "e" * 500 + "…"


def test_the_job_still_absorbs_every_other_command_after_its_deliveries() -> None:
    job = ended("succeeded")
    job.run(delivered(1))
    with pytest.raises(InvalidTransition):
        job.run(RequestCancel(by="bob"))
    assert job.current.status is Status.SUCCEEDED


def test_replaying_the_stored_history_gives_the_same_state() -> None:
    job = ended("stopped")
    job.run(failed(1))
    job.run(failed(2, final=True))
    job.run(delivered(3, by="api"))
    stored = [decode_event(encode_event(event)) for event in job.history]
    assert fold(stored) == job.current
