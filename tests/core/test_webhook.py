"""The job-status webhook's body and headers: the seed's ``job.completed`` object, field for field, and the
Stripe-style signature (checked against a vector computed with ``openssl dgst -sha256 -hmac``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from hades.core.lifecycle import (
    Command,
    FinishStep,
    JobState,
    QueueJob,
    RequestCancel,
    StartAttempt,
    StartStep,
    SubmitJob,
    decide,
    evolve,
)
from hades.core.spec import JobSpec, Step
from hades.core.webhook import encode_body, job_completed, signature, utc_text, webhook_headers

JOB_ID = "7f3a1c2b-5d0f-4f4e-9a53-2d6f8f1d6c11"
T0 = datetime(2026, 8, 21, 12, 0, 0, tzinfo=UTC)
SEED_KEYS = [
    "event",
    "job_id",
    "name",
    "status",
    "reason",
    "queued_at",
    "started_at",
    "finished_at",
    "duration_ms",
    "attempt",
]


def run(state: JobState | None, command: Command, at: datetime) -> JobState:
    for event in decide(state, command, at):
        state = evolve(state, event)
    assert state is not None
    return state


def ended(exit_code: int | None, *, start: bool = True) -> JobState:
    """Submitted at T0, queued at T0, started at +5 s, ended at +41 s (the seed's example times)."""
    spec = JobSpec(name="Example Job", steps=(Step(id=1, image="alpine:latest"),), status_callback_url="http://r/s")
    state = run(None, SubmitJob(job_id=JOB_ID, spec=spec), T0)
    state = run(state, QueueJob(), T0)
    if not start:
        return run(state, RequestCancel(by="alice"), T0 + timedelta(seconds=2))
    state = run(state, StartAttempt(attempt=1, executor_id="e"), T0 + timedelta(seconds=5))
    state = run(state, StartStep(attempt=1, step_index=0), T0 + timedelta(seconds=5, milliseconds=1))
    error = None if exit_code is not None else "ImagePullBackOff: no such image"
    return run(state, FinishStep(attempt=1, step_index=0, exit_code=exit_code, error=error), T0 + timedelta(seconds=41))


def test_a_failed_job_gives_the_seed_example_exactly() -> None:
    payload = job_completed(ended(None), attempt=1)
    assert list(payload) == SEED_KEYS
    assert payload == {
        "event": "job.completed",
        "job_id": JOB_ID,
        "name": "Example Job",
        "status": "Failed",
        "reason": "ImagePullBackOff: no such image",
        "queued_at": "2026-08-21T12:00:00Z",
        "started_at": "2026-08-21T12:00:05Z",
        "finished_at": "2026-08-21T12:00:41Z",
        "duration_ms": 36000,
        "attempt": 1,
    }


def test_a_succeeded_job_has_no_reason_and_the_attempt_is_the_delivery_attempt() -> None:
    payload = job_completed(ended(0), attempt=4)
    assert (payload["status"], payload["reason"], payload["attempt"], payload["duration_ms"]) == (
        "Succeeded",
        None,
        4,
        36000,
    )


def test_a_job_stopped_before_it_started_has_no_start_and_no_duration() -> None:
    payload = job_completed(ended(0, start=False), attempt=1)
    assert payload["status"] == "Stopped"
    assert payload["reason"] == "cancelled by alice"
    assert (payload["queued_at"], payload["started_at"], payload["duration_ms"]) == ("2026-08-21T12:00:00Z", None, None)
    assert payload["finished_at"] == "2026-08-21T12:00:02Z"


def test_a_job_that_has_not_ended_has_no_webhook() -> None:
    state = run(None, SubmitJob(job_id=JOB_ID, spec=JobSpec(name="x")), T0)
    with pytest.raises(ValueError, match="has not ended"):
        job_completed(state, attempt=1)


def test_times_are_utc_with_a_z_whatever_zone_they_carry() -> None:
    assert utc_text(datetime(2026, 8, 21, 14, 0, 5, 250000, tzinfo=timezone(timedelta(hours=2)))) == (
        "2026-08-21T12:00:05.250000Z"
    )
    assert utc_text(None) is None


def test_the_body_is_compact_json_that_reads_back_the_same() -> None:
    payload = job_completed(ended(1), attempt=2)
    body = encode_body(payload)
    assert b'": ' not in body and b", " not in body
    assert json.loads(body) == payload


def test_the_signature_matches_openssl() -> None:
    body = b'{"event":"job.completed","attempt":1}'
    expected = "sha256=67f64b39c176a1a6c6ed5fb988f6499c1b635a961ef8d303b2d4999a08b48e94"
    assert signature("whsec_test", 1767225600, body) == expected
    assert signature("whsec_test", 1767225601, body) != expected
    assert signature("whsec_other", 1767225600, body) != expected


def test_unsigned_headers_name_the_job_and_the_attempt() -> None:
    assert webhook_headers(JOB_ID, 3, b"{}", "", 1767225600) == {
        "Idempotency-Key": JOB_ID,
        "X-Hades-Delivery": f"{JOB_ID}:3",
    }


def test_signed_headers_carry_the_timestamp_and_the_signature_of_the_body() -> None:
    body = b'{"event":"job.completed","attempt":1}'
    assert webhook_headers(JOB_ID, 1, body, "whsec_test", 1767225600) == {
        "Idempotency-Key": JOB_ID,
        "X-Hades-Delivery": f"{JOB_ID}:1",
        "X-Hades-Timestamp": "1767225600",
        "X-Hades-Signature": "sha256=67f64b39c176a1a6c6ed5fb988f6499c1b635a961ef8d303b2d4999a08b48e94",
    }
