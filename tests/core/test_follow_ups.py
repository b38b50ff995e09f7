"""A terminal event says what the job's end sets going (``FollowUps``), from the job's spec and pipeline, on every
path that ends a job; a body written before it did reads back without it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hades.core.codec import decode_event, encode_event
from hades.core.events import Event, FollowUps, JobFailed, JobStopped, JobSucceeded, PipelineRef
from hades.core.lifecycle import (
    Command,
    ConcludeJob,
    FailJob,
    FinishStep,
    JobState,
    QueueJob,
    RequestCancel,
    RequeueJob,
    StartAttempt,
    StartStep,
    StopJob,
    SubmitJob,
    decide,
    evolve,
)
from hades.core.spec import JobSpec, Step

JOB_ID = "0b7e3b52-5d0f-4f4e-9a53-2d6f8f1d6c11"
PIPELINE_ID = "5d0f2d6f-0b7e-4f4e-9a53-8f1d6c113b52"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
RUNNING = (QueueJob(), StartAttempt(1, "executor-1"), StartStep(1, 0))


def spec(callback: str = "", status_callback: str = "") -> JobSpec:
    step = Step(id=1, name="s", image="busybox", script="true")
    return JobSpec(name="job", steps=(step,), callback_url=callback, status_callback_url=status_callback)


def ended(job: JobSpec, commands: tuple[Command, ...], pipeline: PipelineRef | None = None) -> Event:
    """The job's last event after ``commands``."""
    events: list[Event] = list(decide(None, SubmitJob(job_id=JOB_ID, spec=job), T0))
    if pipeline is not None:
        events = [events[0].model_copy(update={"pipeline": pipeline})]
    state: JobState | None = None
    for event in events:
        state = evolve(state, event)
    for command in commands:
        for event in decide(state, command, T0):
            state = evolve(state, event)
            events.append(event)
    return events[-1]


@pytest.mark.parametrize(
    ("commands", "kind"),
    [
        ((*RUNNING, FinishStep(1, 0, 0)), JobSucceeded),
        ((*RUNNING, FinishStep(1, 0, 1)), JobFailed),
        ((*RUNNING, FailJob(1, "timed out")), JobFailed),
        ((*RUNNING, StopJob(1, "cancelled by alice")), JobStopped),
        ((QueueJob(), RequestCancel(by="alice")), JobStopped),
        ((*RUNNING, RequestCancel(by="alice"), RequeueJob(1, "executor lost")), JobStopped),
    ],
    ids=["last-step", "failed-step", "fail", "stop", "cancel-queued", "requeue-after-cancel"],
)
def test_every_end_says_which_deliveries_follow(commands: tuple[Command, ...], kind: type[Event]) -> None:
    event = ended(spec("http://logs.example/in", ""), commands)
    assert isinstance(event, kind)
    assert event.follow_ups == FollowUps(logs=True, webhook=False, pipeline=None)  # type: ignore[union-attr]
    quiet = ended(spec(), commands)
    assert quiet.follow_ups == FollowUps(logs=False, webhook=False)  # type: ignore[union-attr]


def test_an_end_due_later_says_so_too() -> None:
    event = ended(spec("", "http://hook.example/in"), (*RUNNING, FinishStep(1, 0, 0)))
    assert event.follow_ups == FollowUps(webhook=True)  # type: ignore[union-attr]
    state: JobState | None = None
    for one in decide(None, SubmitJob(job_id=JOB_ID, spec=spec("", "http://hook.example/in")), T0):
        state = evolve(state, one)
    for command in RUNNING:
        [one] = decide(state, command, T0)
        state = evolve(state, one)
    [finished, *_] = decide(state, FinishStep(1, 0, 0), T0)
    [due] = decide(evolve(state, finished), ConcludeJob(), T0)  # the watchdog appending an end left due
    assert isinstance(due, JobSucceeded) and due.follow_ups == FollowUps(webhook=True)


def test_a_stage_jobs_end_names_its_pipeline() -> None:
    event = ended(spec(), (*RUNNING, FinishStep(1, 0, 0)), PipelineRef(id=PIPELINE_ID, stage="build"))
    assert event.follow_ups == FollowUps(pipeline=PIPELINE_ID)  # type: ignore[union-attr]


def test_the_follow_ups_survive_the_codec_and_an_older_body_reads_without_them() -> None:
    event = JobSucceeded(job_id=JOB_ID, at=T0, attempt=1, follow_ups=FollowUps(logs=True, pipeline=PIPELINE_ID))
    assert decode_event(encode_event(event)) == event
    older = b'{"version":1,"job_id":"%s","at":"2025-03-01T12:00:00Z","type":"succeeded","attempt":1}' % JOB_ID.encode()
    read = decode_event(older)
    assert isinstance(read, JobSucceeded) and read.follow_ups is None
