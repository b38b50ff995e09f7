"""The deployment's timeout policy: a job without a timeout gets the default (else the maximum), one asking for more
than the maximum is capped, and the ``submitted`` event holds the effective value and records the client's."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hades.core.events import JobSubmitted
from hades.core.lifecycle import SubmitJob, decide, fold
from hades.core.spec import MAX_TIMEOUT_SECONDS, JobSpec, Step
from hades.core.stages import Stage, stage_spec
from hades.core.timeouts import TimeoutPolicy

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
STEPS = (Step(id=1, image="a"),)


@pytest.mark.parametrize(
    ("default", "maximum", "requested", "effective"),
    [
        (0, 0, 0, 0),  # nothing set: the Go contract's forever
        (0, 0, 7, 7),
        (60, 0, 0, 60),  # no timeout: the default
        (60, 0, 999, 999),  # no cap: a job's own stands, even above the default
        (0, 300, 0, 300),  # no timeout and no default: the maximum
        (60, 300, 0, 60),
        (60, 300, 120, 120),
        (60, 300, 301, 300),  # above the cap: capped
        (60, 300, MAX_TIMEOUT_SECONDS, 300),
    ],
)
def test_the_effective_timeout(default: int, maximum: int, requested: int, effective: int) -> None:
    assert TimeoutPolicy(default, maximum).effective(requested) == effective


@given(
    default=st.integers(0, 10_000),
    maximum=st.integers(0, 10_000),
    requested=st.integers(0, MAX_TIMEOUT_SECONDS),
)
def test_a_capped_policy_never_gives_forever_nor_more_than_the_cap(default: int, maximum: int, requested: int) -> None:
    seconds = TimeoutPolicy(min(default, maximum) if maximum else default, maximum).effective(requested)
    if maximum:
        assert 0 < seconds <= maximum
    if requested and (not maximum or requested <= maximum):
        assert seconds == requested  # what the client asked, when allowed, is what it gets


def submitted(spec: JobSpec, policy: TimeoutPolicy) -> JobSubmitted:
    [event] = decide(None, SubmitJob(job_id=str(uuid.uuid4()), spec=spec, timeouts=policy), NOW)
    assert isinstance(event, JobSubmitted)
    return event


def test_the_submitted_event_holds_the_effective_timeout_and_records_the_clients() -> None:
    policy = TimeoutPolicy(default_seconds=60, max_seconds=300)

    defaulted = submitted(JobSpec(name="none", steps=STEPS), policy)
    capped = submitted(JobSpec(name="large", steps=STEPS, timeout_seconds=10**6), policy)
    kept = submitted(JobSpec(name="fine", steps=STEPS, timeout_seconds=100), policy)

    assert (defaulted.spec.timeout_seconds, defaulted.requested_timeout_seconds) == (60, 0)
    assert (capped.spec.timeout_seconds, capped.requested_timeout_seconds) == (300, 10**6)
    assert (kept.spec.timeout_seconds, kept.requested_timeout_seconds) == (100, None)
    state = fold([capped])
    assert state is not None and state.spec.timeout_seconds == 300 and state.requested_timeout_seconds == 10**6


def test_without_a_policy_the_submission_is_as_before() -> None:
    event = submitted(JobSpec(name="go", steps=STEPS), TimeoutPolicy())
    assert event.spec.timeout_seconds == 0 and event.requested_timeout_seconds is None
    assert "requested_timeout_seconds" not in event.model_dump(exclude_none=True)


def test_a_pipelines_stages_are_capped_and_the_others_inherit_its_effective_timeout() -> None:
    stages = (Stage(name="own", steps=STEPS, timeout_seconds=10**6), Stage(name="inherits", steps=STEPS))
    event = submitted(JobSpec(name="p", stages=stages), TimeoutPolicy(default_seconds=60, max_seconds=300))

    pipeline_id = str(event.spec.id)
    own, inherits = (stage_spec(event.spec, stage, pipeline_id) for stage in event.spec.stages)
    assert (own.timeout_seconds, inherits.timeout_seconds) == (300, 60)


def test_added_stages_are_capped_and_one_without_a_timeout_keeps_none_of_its_own() -> None:
    stages = [Stage(name="big", steps=STEPS, timeout_seconds=900), Stage(name="none", steps=STEPS)]
    capped = TimeoutPolicy(default_seconds=60, max_seconds=300).capped_stages(stages)
    assert [stage.timeout_seconds for stage in capped] == [300, 0]
