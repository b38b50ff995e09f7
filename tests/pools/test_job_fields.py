"""``constraints`` and ``resources`` on a job: decoding, the 400 bodies, and what the lifecycle makes of them."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hades.core.codec import decode_event, encode_event
from hades.core.errors import InvalidTransition, SpecError
from hades.core.events import JobMarkedSchedulable, JobMarkedUnschedulable, JobQueued, JobStarted
from hades.core.lifecycle import (
    FailJob,
    MarkSchedulable,
    MarkUnschedulable,
    PromoteJob,
    QueueJob,
    RequeueJob,
    StartAttempt,
    SubmitJob,
    decide,
    evolve,
    fold,
)
from hades.core.spec import Priority, parse_job_request

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
JOB_ID = str(uuid.uuid4())


def body(**fields: Any) -> bytes:
    return json.dumps({"name": "build", "steps": [{"id": 1, "image": "alpine", "script": "true"}], **fields}).encode()


def problem(**fields: Any) -> str:
    with pytest.raises(SpecError) as raised:
        parse_job_request(body(**fields))
    return str(raised.value)


def test_a_go_payload_is_read_and_stored_as_before() -> None:
    spec = parse_job_request(body(priority=2))
    assert spec.constraints == () and spec.resources is None and spec.placement is None
    assert "constraints" not in spec.model_dump_json() and "resources" not in spec.model_dump_json()


def test_constraints_and_resources_are_read_in_their_nomad_shapes() -> None:
    spec = parse_job_request(
        body(
            constraints=[
                {"attribute": "${attr.os}", "value": "windows"},
                {"LTarget": "pool", "Operand": "!=", "RTarget": "gpu"},
                {"attribute": "tools", "operator": "set_contains", "value": "java,node"},
                {"attribute": "arch", "operator": "regexp", "value": "^(amd|arm)64$", "unknown": 1},
            ],
            resources={"cpu": 1.5, "memory": "2g"},
        )
    )
    assert [(c.attribute, c.operator, c.value) for c in spec.constraints][:2] == [
        ("${attr.os}", "=", "windows"),
        ("pool", "!=", "gpu"),
    ]
    assert spec.placement is not None and spec.placement.memory == 2 * 1024**3
    assert spec.placement.describe().startswith("arch matching ^(amd|arm)64$, os=windows, pool!=gpu")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"constraints": {"attribute": "os"}}, 'Invalid constraints: must be a list of objects such as {"attribute"'),
        ({"constraints": ["os=linux"]}, "Invalid constraints: must be a list of objects"),
        ({"constraints": [{"attribute": "os", "value": 7}]}, "Invalid constraints[0]: value must be a string"),
        ({"constraints": [{"value": "linux"}]}, "Invalid constraints[0]: attribute is required"),
        (
            {"constraints": [{"attribute": "os"}, {"attribute": "os", "operator": "~", "value": "x"}]},
            "Invalid constraints[1]: unknown operator '~'; use one of =, !=, regexp, set_contains",
        ),
        (
            {"constraints": [{"attribute": "os", "operator": "regexp", "value": "(win"}]},
            "Invalid constraints[0]: invalid regexp '(win': missing ), unterminated subpattern at position 0",
        ),
        (
            {"constraints": [{"attribute": "tools", "operator": "set_contains", "value": " , "}]},
            "Invalid constraints[0]: set_contains needs a value: a comma-separated list of items",
        ),
        ({"constraints": [{"attribute": "o s", "value": "x"}]}, "Invalid constraints[0]: attribute 'o s' is not"),
        ({"constraints": [{"attribute": "os"}] * 33}, "Invalid constraints: at most 32 are allowed, got 33"),
        ({"resources": [2]}, 'Invalid resources: must be an object such as {"cpu": 2, "memory": "4g"}'),
        ({"resources": {"cpu": "2"}}, "Invalid resources: cpu must be a number of cores"),
        ({"resources": {"cpu": True}}, "Invalid resources: cpu must be a number of cores"),
        ({"resources": {"cpu": -1}}, "Invalid resources: cpu cannot be negative"),
        ({"resources": {"memory": 512}}, 'Invalid resources: memory must be a size string such as "512m" or "2g"'),
        ({"resources": {"memory": "2x"}}, "Invalid resources: memory '2x' is not a size such as 512m or 2g"),
    ],
)
def test_bad_constraints_and_resources_get_a_400_naming_the_problem(fields: dict[str, Any], message: str) -> None:
    assert problem(**fields).startswith(message)


def test_go_checks_still_come_first() -> None:
    assert problem(name="", constraints=[{"attribute": "os", "operator": "~"}]) == (
        'Invalid request payload: "name" is required'
    )


def queued(constraints: list[dict[str, str]] | None = None) -> Any:
    spec = parse_job_request(body(constraints=constraints or []))
    state = None
    for command in (SubmitJob(JOB_ID, spec), QueueJob()):
        for event in decide(state, command, NOW):
            state = evolve(state, event)
    return state


def test_a_constrained_job_is_queued_in_its_pool_on_every_attempt() -> None:
    state = queued([{"attribute": "os", "value": "windows"}])
    pool = state.spec.placement.key
    (requeued,) = decide(evolve(state, decide(state, StartAttempt(1, "x"), NOW)[0]), RequeueJob(1, "lost"), NOW)
    assert isinstance(requeued, JobQueued) and requeued.pool == pool
    assert requeued.subject_token == f"queued.high.{pool}"
    plain = queued()
    (plain_requeued,) = decide(evolve(plain, decide(plain, StartAttempt(1, "x"), NOW)[0]), RequeueJob(1, "x"), NOW)
    assert plain.spec.placement is None and plain_requeued.subject_token == "queued.high"


def test_promotion_keeps_the_pool() -> None:
    spec = parse_job_request(body(priority=1, constraints=[{"attribute": "pool", "value": "a"}]))
    state = fold([*decide(None, SubmitJob(JOB_ID, spec), NOW)])
    state = evolve(state, decide(state, QueueJob(), NOW)[0])
    (promoted,) = decide(state, PromoteJob(1, Priority.MEDIUM, "aged"), NOW)
    assert isinstance(promoted, JobQueued) and promoted.subject_token == f"queued.medium.{spec.placement.key}"


def test_unschedulable_marks_record_changes_only_and_keep_their_first_moment() -> None:
    state = queued([{"attribute": "os", "value": "windows"}])
    (marked,) = decide(state, MarkUnschedulable(1, "no executor with os=windows is alive"), NOW)
    assert isinstance(marked, JobMarkedUnschedulable)
    state = evolve(state, marked)
    assert state.reason == "no executor with os=windows is alive" and state.unschedulable_since == NOW
    with pytest.raises(InvalidTransition):
        decide(state, MarkUnschedulable(1, "no executor with os=windows is alive"), NOW)
    later = NOW + timedelta(seconds=5)
    state = evolve(state, decide(state, MarkUnschedulable(1, "another reason"), later)[0])
    assert state.unschedulable_since == NOW  # the timeout counts from the first mark
    (cleared,) = decide(state, MarkSchedulable(1), later)
    state = evolve(state, cleared)
    assert isinstance(cleared, JobMarkedSchedulable) and state.reason is None and state.unschedulable_since is None
    with pytest.raises(InvalidTransition):
        decide(state, MarkSchedulable(1), later)
    failed = decide(state, FailJob(1, "gave up"), later)
    assert failed[0].type == "failed"


def test_a_started_attempt_records_its_executor_and_labels_and_ends_the_mark() -> None:
    state = queued([{"attribute": "os", "value": "windows"}])
    state = evolve(state, decide(state, MarkUnschedulable(1, "none alive"), NOW)[0])
    (started,) = decide(state, StartAttempt(1, "win-1", {"os": "windows"}), NOW)
    state = evolve(state, started)
    assert state.executor_labels == {"os": "windows"} and state.reason is None and state.unschedulable_since is None
    assert [(r.attempt, r.executor_id, r.executor_labels) for r in state.runs] == [(1, "win-1", {"os": "windows"})]
    with pytest.raises(InvalidTransition):
        decide(state, MarkUnschedulable(1, "none alive"), NOW)


def test_events_written_before_pools_still_decode() -> None:
    old_started = {"type": "started", "version": 1, "job_id": JOB_ID, "at": NOW.isoformat(), "attempt": 1}
    event = decode_event(json.dumps({**old_started, "executor_id": "old"}).encode())
    assert isinstance(event, JobStarted) and event.executor_labels is None
    old_queued = {"type": "queued", "job_id": JOB_ID, "at": NOW.isoformat(), "attempt": 1, "priority": "low"}
    queued_event = decode_event(json.dumps(old_queued).encode())
    assert isinstance(queued_event, JobQueued) and queued_event.pool is None
    assert b"pool" not in encode_event(queued_event) and b"executor_labels" not in encode_event(event)
