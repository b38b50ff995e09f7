"""The event codec: every event kind survives the trip to bytes and back; bad bodies are refused."""

from __future__ import annotations

import json
import typing
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pydantic
import pytest

from hades.core.artifacts import Input, SkippedArtifact, StoredArtifact
from hades.core.codec import CURRENT_VERSION, CURRENT_VERSIONS, UPCASTERS, decode_event, encode_event
from hades.core.events import (
    ArtifactsStored,
    Event,
    JobCancelRequested,
    JobFailed,
    JobMarkedSchedulable,
    JobMarkedUnschedulable,
    JobPrepared,
    JobQueued,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    LogsForwarded,
    LogsForwardFailed,
    PipelineRef,
    StageEnded,
    StageLaunched,
    StagesAdded,
    StepFinished,
    StepOutcome,
    StepStarted,
    WebhookDelivered,
    WebhookFailed,
)
from hades.core.spec import JobSpec, Priority, Step
from hades.core.stages import Stage

JOB_ID = "5a8f1c2e-0b4d-4e7a-9c3f-1d2e3f4a5b6c"
AT = datetime(2025, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)

SPEC = JobSpec(
    id=uuid.UUID(JOB_ID),
    name="grade submission",
    timestamp=datetime(2025, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))),
    metadata={"COURSE": "eist", "ünïcode": "✓"},
    steps=(
        Step(id=1, name="clone", image="alpine:3.22", script="git clone x", metadata={"A": "1"}),
        Step(
            id=2,
            name="test",
            image="localhost:5000/runner",
            script="make test",
            continue_on_error=True,
            cpu_limit=2,
            memory_limit="512M",
            memory_swap="1G",
            network="none",
            pids_limit=64,
        ),
    ),
    callback_url="https://example.org/hook",
    status_callback_url="https://example.org/job-status",
    timeout_seconds=600,
    priority=2,
)

EVENTS: list[Event] = [
    JobSubmitted(job_id=JOB_ID, at=AT, spec=SPEC, priority=Priority.MEDIUM, submitted_by="course-platform"),
    JobSubmitted(job_id=JOB_ID, at=AT, spec=JobSpec(name="bare"), priority=Priority.HIGH),
    JobQueued(job_id=JOB_ID, at=AT, attempt=1, priority=Priority.LOW),
    JobQueued(job_id=JOB_ID, at=AT, attempt=2, priority=Priority.HIGH, reason="executor lost"),
    JobStarted(job_id=JOB_ID, at=AT, attempt=1, executor_id="exec-7"),
    JobQueued(job_id=JOB_ID, at=AT, attempt=1, priority=Priority.LOW, pool="0123456789ab"),
    JobStarted(job_id=JOB_ID, at=AT, attempt=1, executor_id="exec-8", executor_labels={"os": "linux", "pool": "a"}),
    JobMarkedUnschedulable(job_id=JOB_ID, at=AT, attempt=1, reason="no executor with os=windows is alive"),
    JobMarkedSchedulable(job_id=JOB_ID, at=AT, attempt=1),
    JobPrepared(job_id=JOB_ID, at=AT, attempt=1, phases={"volume": 0.01, "images": 0.002}),
    StepStarted(job_id=JOB_ID, at=AT, attempt=1, step_index=0, step_id=1, image="alpine:3.22"),
    StepFinished(job_id=JOB_ID, at=AT, attempt=1, step_index=0, step_id=1, outcome=StepOutcome.SUCCEEDED, exit_code=0),
    StepFinished(
        job_id=JOB_ID,
        at=AT,
        attempt=1,
        step_index=1,
        step_id=2,
        outcome=StepOutcome.FAILED,
        exit_code=3,
        reason="container exited with status 3",
        tolerated=True,
        last_log_seq=42,
    ),
    JobCancelRequested(job_id=JOB_ID, at=AT, by="alice", reason="wrong branch"),
    LogsForwarded(
        job_id=JOB_ID, at=AT, url="http://r/logs", delivery_attempt=1, duration_ms=12, status_code=200, lines=3
    ),
    LogsForwardFailed(
        job_id=JOB_ID, at=AT, url="http://r/logs", delivery_attempt=2, duration_ms=5, error="refused", final=True
    ),
    WebhookDelivered(job_id=JOB_ID, at=AT, url="http://r/status", delivery_attempt=1, duration_ms=7, status_code=204),
    WebhookDelivered(
        job_id=JOB_ID,
        at=AT,
        url="http://r/status",
        delivery_attempt=9,
        duration_ms=3,
        status_code=200,
        redelivered_by="hades",
    ),
    WebhookFailed(
        job_id=JOB_ID,
        at=AT,
        url="http://r/status",
        delivery_attempt=2,
        duration_ms=10_000,
        error="no answer within 10 s",
    ),
    WebhookFailed(
        job_id=JOB_ID,
        at=AT,
        url="http://r/status",
        delivery_attempt=8,
        duration_ms=4,
        status_code=503,
        error="receiver answered HTTP 503",
        final=True,
    ),
    JobSucceeded(job_id=JOB_ID, at=AT, attempt=1),
    JobSucceeded(job_id=JOB_ID, at=AT, attempt=1, reason="done"),
    JobFailed(job_id=JOB_ID, at=AT, attempt=1, reason="z" * 500 + "…"),
    JobStopped(job_id=JOB_ID, at=AT, attempt=3, reason="cancelled by alice"),
    ArtifactsStored(
        job_id=JOB_ID,
        at=AT,
        attempt=1,
        files=(StoredArtifact(path="dist/app.tar", size=12, sha256="ab" * 32),),
        skipped=(SkippedArtifact(path="missing", reason="not found in the workspace"),),
    ),
    JobSubmitted(
        job_id=JOB_ID,
        at=AT,
        spec=JobSpec(
            name="artifacts",
            artifacts=("dist",),
            inputs=(Input(source="https://example.com/a.tgz"), Input(source=f"{JOB_ID}:dist", destination="in")),
        ),
        priority=Priority.HIGH,
    ),
    JobSubmitted(
        job_id=JOB_ID,
        at=AT,
        spec=JobSpec(
            name="pipeline",
            stages=(
                Stage(name="build", steps=(Step(id=1, script="make"),), artifacts=("dist",)),
                Stage(name="test", needs=("build",), steps=(Step(id=1),), inputs=(Input(source="build:dist"),)),
            ),
        ),
        priority=Priority.HIGH,
    ),
    JobSubmitted(
        job_id=JOB_ID,
        at=AT,
        spec=JobSpec(name="p/build"),
        priority=Priority.LOW,
        pipeline=PipelineRef(id=JOB_ID, stage="build"),
    ),
    StageLaunched(job_id=JOB_ID, at=AT, stage="build", stage_job_id=JOB_ID),
    StagesAdded(job_id=JOB_ID, at=AT, stages=(Stage(name="extra", needs=(), steps=(Step(id=1),)),), by="stage:build"),
    StageEnded(job_id=JOB_ID, at=AT, stage="build", status="Failed", reason="container exited with status 1"),
]


def _ids(event: Event) -> str:
    return event.type


def test_the_examples_cover_every_event_kind() -> None:
    union = typing.get_args(typing.get_args(Event)[0])
    assert {type(event) for event in EVENTS} == set(union)


@pytest.mark.parametrize("event", EVENTS, ids=_ids)
def test_every_event_round_trips(event: Event) -> None:
    data = encode_event(event)
    decoded = decode_event(data)
    assert type(decoded) is type(event)
    assert decoded == event
    assert encode_event(decoded) == data


@pytest.mark.parametrize("event", EVENTS, ids=_ids)
def test_the_body_carries_a_stable_type_tag_and_version(event: Event) -> None:
    raw = json.loads(encode_event(event))
    assert raw["type"] == event.type
    assert "." not in raw["type"], "the tag is never an import path"
    assert raw["version"] == CURRENT_VERSION
    assert raw["job_id"] == JOB_ID
    assert None not in raw.values(), "unset optional fields are left out"


def test_the_submitted_spec_keeps_its_id_as_text_and_its_times() -> None:
    raw = json.loads(encode_event(EVENTS[0]))
    assert raw["spec"]["id"] == JOB_ID
    decoded = decode_event(encode_event(EVENTS[0]))
    assert isinstance(decoded, JobSubmitted)
    assert decoded.spec.timestamp == SPEC.timestamp
    assert decoded.at == AT


def test_the_queued_subject_token_names_the_priority() -> None:
    assert EVENTS[2].subject_token == "queued.low"
    assert EVENTS[4].subject_token == "started"


def test_an_unknown_type_is_rejected() -> None:
    raw = json.loads(encode_event(EVENTS[8]))
    raw["type"] = "exploded"
    with pytest.raises(pydantic.ValidationError):
        decode_event(json.dumps(raw).encode())


def test_a_python_path_as_type_is_rejected() -> None:
    raw = json.loads(encode_event(EVENTS[8]))
    raw["type"] = "hades.core.events.JobSucceeded"
    with pytest.raises(pydantic.ValidationError):
        decode_event(json.dumps(raw).encode())


def test_a_missing_type_or_field_is_rejected() -> None:
    raw = json.loads(encode_event(EVENTS[4]))
    with pytest.raises(pydantic.ValidationError):
        decode_event(json.dumps({k: v for k, v in raw.items() if k != "type"}).encode())
    with pytest.raises(pydantic.ValidationError):
        decode_event(json.dumps({k: v for k, v in raw.items() if k != "executor_id"}).encode())


@pytest.mark.parametrize("event", EVENTS, ids=_ids)
def test_extra_fields_are_ignored(event: Event) -> None:
    raw = json.loads(encode_event(event))
    raw["added_in_a_later_version"] = {"nested": [1, 2, 3]}
    raw["trace_id"] = "abc"
    if "spec" in raw:
        raw["spec"]["unknown_spec_field"] = True
        raw["spec"]["steps"] = [{**step, "gpu": 1} for step in raw["spec"]["steps"]]
    decoded = decode_event(json.dumps(raw).encode())
    assert decoded == event
    assert not hasattr(decoded, "trace_id")


def test_a_missing_version_reads_as_version_1() -> None:
    raw = json.loads(encode_event(EVENTS[4]))
    del raw["version"]
    decoded = decode_event(json.dumps(raw).encode())
    assert decoded == EVENTS[4]
    assert decoded.version == 1


@pytest.mark.parametrize("body", [b"", b"not json", b"{", b'{"type": "started"}'], ids=repr)
def test_undecodable_bodies_raise_value_error(body: bytes) -> None:
    # The executor drops a queue message whose body raises ValueError; anything else escapes its handler.
    with pytest.raises(ValueError):
        decode_event(body)


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"42",
        b'"started"',
        b"null",
        b'{"type": "started", "version": null}',
        b'{"type": "started", "version": 0}',
    ],
    ids=repr,
)
def test_malformed_bodies_raise_value_error_too(body: bytes) -> None:
    with pytest.raises(ValueError):
        decode_event(body)


# -- upcasting: what `docs/upgrades.md` promises ------------------------------------------------------------------


def _started_v1() -> bytes:
    """A ``started`` body as a hypothetical version 1 wrote it, before ``executor`` was renamed ``executor_id``."""
    return json.dumps(
        {"type": "started", "version": 1, "job_id": JOB_ID, "at": AT.isoformat(), "attempt": 2, "executor": "exec-7"}
    ).encode()


def _rename_executor(raw: dict[str, typing.Any]) -> dict[str, typing.Any]:
    raw["executor_id"] = raw.pop("executor")
    return raw


def test_every_kind_is_at_version_1_and_none_needs_an_upcaster_yet() -> None:
    union = typing.get_args(typing.get_args(Event)[0])
    assert set(CURRENT_VERSIONS) == {model.model_fields["type"].default for model in union}
    assert set(CURRENT_VERSIONS.values()) == {1} and CURRENT_VERSION == 1 and UPCASTERS == {}


def test_a_version_1_event_is_read_into_the_current_model() -> None:
    decoded = decode_event(_started_v1(), upcasters={("started", 1): _rename_executor}, current={"started": 2})

    assert isinstance(decoded, JobStarted)
    assert (decoded.executor_id, decoded.attempt, decoded.version, decoded.at) == ("exec-7", 2, 2, AT)


def test_an_older_body_that_would_validate_as_it_is_is_still_upcast() -> None:
    """A v1 ``stopped`` body is valid v2 too; v2 changed what ``reason`` says, so the upcaster must run anyway."""
    body = encode_event(JobStopped(job_id=JOB_ID, at=AT, attempt=1, reason="cancelled"))

    def qualify(raw: dict[str, typing.Any]) -> dict[str, typing.Any]:
        return {**raw, "reason": f"{raw['reason']} (before v2)"}

    decoded = decode_event(body, upcasters={("stopped", 1): qualify}, current={"stopped": 2})

    assert isinstance(decoded, JobStopped) and decoded.reason == "cancelled (before v2)" and decoded.version == 2


def test_upcasters_chain_version_by_version() -> None:
    steps = {
        ("started", 1): _rename_executor,
        ("started", 2): lambda raw: {**raw, "attempt": raw["attempt"] * 10},
    }

    decoded = decode_event(_started_v1(), upcasters=steps, current={"started": 3})

    assert isinstance(decoded, JobStarted) and decoded.attempt == 20 and decoded.version == 3


def test_an_older_version_without_an_upcaster_names_the_gap() -> None:
    with pytest.raises(ValueError, match="no upcaster for 'started' version 1"):
        decode_event(_started_v1(), upcasters={}, current={"started": 2})


def test_the_registry_refuses_a_second_upcaster_for_one_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hades.core.codec.UPCASTERS", {})
    from hades.core import codec

    codec.upcaster("started", 1)(_rename_executor)
    with pytest.raises(ValueError, match="already registered"):
        codec.upcaster("started", 1)(_rename_executor)
