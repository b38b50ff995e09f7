"""A pipeline's ``stages`` as ``POST /build`` reads them: decoding, every refusal with its message, the stage jobs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hades.core.errors import SpecError
from hades.core.spec import JobSpec, parse_job_request, parse_stages_request, validate_job_spec
from hades.core.stages import stage_job_id, stage_spec, stages_problem

PID = "7d1c2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
OTHER = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def stage(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "steps": [{"id": 1, "image": "alpine", "script": "true"}], **fields}


def parse(body: Any) -> JobSpec:
    return parse_job_request(json.dumps(body).encode())


def refusal(body: Any) -> str:
    with pytest.raises(SpecError) as error:
        parse(body)
    return str(error.value)


def test_a_pipeline_decodes_and_a_plain_job_is_stored_as_before() -> None:
    spec = parse(
        {
            "name": "ship",
            "priority": 1,
            "metadata": {"A": "pipeline", "B": "pipeline"},
            "timeout_seconds": 60,
            "constraints": [{"attribute": "os", "value": "linux"}],
            "Stages": [
                stage("build", artifacts=["dist"], metadata={"B": "stage"}),
                stage("test", needs=["build"], inputs=["build:dist"], priority=3),
            ],
        }
    )
    assert spec.is_pipeline and [s.name for s in spec.stages] == ["build", "test"]
    assert spec.stages[1].needs == ("build",) and spec.stages[0].needs is None
    plain = parse({"name": "plain", "steps": [{"id": 1, "image": "alpine"}]})
    assert "stages" not in plain.model_dump(mode="json") and not plain.is_pipeline

    build = stage_spec(spec, spec.stages[0], PID)
    assert str(build.id) == stage_job_id(PID, "build") and build.name == "ship/build"
    assert build.metadata == {"A": "pipeline", "B": "stage"} and build.timeout_seconds == 60
    assert build.priority == 1 and build.constraints == spec.constraints and not build.stages
    assert build.callback_url == "" and build.status_callback_url == ""
    test = stage_spec(spec, spec.stages[1], PID)
    assert test.priority == 3 and [i.source for i in test.inputs] == [f"{stage_job_id(PID, 'build')}:dist"]
    assert stage_job_id(PID, "build") == stage_job_id(PID, "build") != stage_job_id(OTHER, "build")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"name": "p", "steps": [{"id": 1}], "stages": [stage("a")]},
            "Invalid stages: a job has steps or stages, not both",
        ),
        (
            {"name": "p", "stages": [stage("Build")]},
            "Invalid stages[0].name: 'Build' must match [a-z0-9][a-z0-9_-]{0,62}",
        ),
        ({"name": "p", "stages": [stage("")]}, "Invalid stages[0].name: '' must match [a-z0-9][a-z0-9_-]{0,62}"),
        (
            {"name": "p", "stages": [stage("a" * 64)]},
            f"Invalid stages[0].name: {'a' * 64!r} must match [a-z0-9][a-z0-9_-]{{0,62}}",
        ),
        ({"name": "p", "stages": [stage("a"), stage("a")]}, "Invalid stages[1].name: stage 'a' is declared twice"),
        (
            {"name": "p", "stages": [stage("a", needs=["b"]), stage("b")]},
            "Invalid stages[0].needs: 'b' is not a stage declared before 'a'",
        ),
        (
            {"name": "p", "stages": [stage("a", needs=["a"])]},
            "Invalid stages[0].needs: 'a' is not a stage declared before 'a'",
        ),
        (
            {"name": "p", "stages": [stage("a"), stage("b", needs=[]), stage("c", needs=["b"], inputs=["a:x"])]},
            "Invalid stages[2].inputs[0]: 'a:x' reads stage 'a', which stage 'c' does not need",
        ),
        ({"name": "p", "stages": [{"name": "a"}]}, "Invalid stages[0].steps: stage 'a' has no steps"),
        (
            {"name": "p", "stages": [stage("a", steps=[{"id": 1, "memory_limit": "lots"}])]},
            "Invalid stages[0] (a): Failed to parse RAM limit",
        ),
        (
            {"name": "p", "stages": [stage("a", artifacts=["/etc"])]},
            "Invalid stages[0] (a): Invalid artifacts[0]: '/etc' is absolute; paths are relative to the workspace"
            " (/shared)",
        ),
        (
            {"name": "p", "stages": [stage("a", constraints=[{"attribute": "os", "operator": "~", "value": "x"}])]},
            "Invalid stages[0] (a): Invalid constraints[0]: unknown operator '~'; use one of =, !=, regexp,"
            " set_contains",
        ),
        (
            {"name": "p", "stages": [stage("a", timeout_seconds=-1)]},
            "Invalid stages[0] (a): timeout_seconds cannot be negative",
        ),
        (
            {"name": "p", "artifacts": ["d"], "stages": [stage("a")]},
            "Invalid artifacts: a pipeline keeps and reads artifacts in its stages; declare artifacts there",
        ),
        (
            {"name": "p", "inputs": [f"{OTHER}:d"], "stages": [stage("a")]},
            "Invalid inputs: a pipeline keeps and reads artifacts in its stages; declare inputs there",
        ),
        (
            {"name": "p", "stages": "build"},
            'Invalid stages: must be a list of objects such as {"name": "build", "steps": [...], "needs": []}',
        ),
        (
            {"name": "p", "stages": [stage("a", needs="b")]},
            'Invalid needs: must be a list of stage names, such as ["build"]',
        ),
        ({"stages": [stage("a")]}, 'Invalid request payload: "name" is required'),
        (
            {"name": "p", "stages": [stage("a", priority="high")]},
            "Invalid JSON body: stages[0].priority: expected an integer, not a string",
        ),
        ({"name": "p", "stages": [stage("a", stpes=[])]}, 'unknown field "stages[0].stpes" (did you mean "steps"?)'),
        (
            {"name": "p", "stages": [stage("a", steps=[{"id": 1, "script": "true"}])]},
            "Invalid stages[0] (a): Invalid steps[0].image: a step needs an image to run in",
        ),
    ],
)
def test_every_refusal_names_the_field(body: Any, message: str) -> None:
    assert refusal(body) == message


def test_an_input_may_name_a_stage_needed_through_others_or_an_earlier_job() -> None:
    spec = parse(
        {
            "name": "p",
            "stages": [
                stage("a", artifacts=["x"]),
                stage("b"),
                stage("c", inputs=["a:x", f"{OTHER}:y", "https://e.com/t"]),
            ],
        }
    )
    assert [i.source for i in stage_spec(spec, spec.stages[2], PID).inputs] == [
        f"{stage_job_id(PID, 'a')}:x",
        f"{OTHER}:y",
        "https://e.com/t",
    ]


def test_added_stages_are_checked_against_those_before_them() -> None:
    pipeline = parse({"name": "p", "stages": [stage("plan")]})
    added, by = parse_stages_request(json.dumps({"stages": [stage("extra", needs=["plan"])], "stage": "plan"}).encode())
    assert by == "plan" and stages_problem(pipeline, added, validate_job_spec, pipeline.stages, limit=2) is None
    assert stages_problem(pipeline, added, validate_job_spec, pipeline.stages, limit=1) == (
        "Invalid stages: a pipeline has at most 1 stages (MAX_PIPELINE_STAGES), not 2"
    )
    again, _ = parse_stages_request(json.dumps({"stages": [stage("plan")]}).encode())
    assert stages_problem(pipeline, again, validate_job_spec, pipeline.stages) == (
        "Invalid stages[0].name: stage 'plan' is declared twice"
    )
    for body, message in [
        (b"[]", 'Invalid body: must be an object such as {"stages": [...]}; stages must be a list of objects such as'),
        (b"{}", "Invalid stages: must be a list of objects"),
        (b'{"stages": []}', "Invalid stages: name at least one stage to add"),
        (b'{"stages": [{"name": "x"}], "stage": 3}', "Invalid stage: must be the adding stage's name"),
        (b"{", "Invalid JSON body"),
    ]:
        with pytest.raises(SpecError) as error:
            parse_stages_request(body)
        assert str(error.value).startswith(message)
