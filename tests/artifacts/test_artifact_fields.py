"""The artifact fields of a job: what decodes, the 400 bodies naming each mistake, and where inputs land."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hades.core.artifacts import Input, placed_at
from hades.core.errors import SpecError
from hades.core.spec import parse_job_request

JOB = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def parse(**fields: Any) -> Any:
    return parse_job_request(json.dumps({"name": "x", "steps": [{"image": "alpine"}], **fields}).encode())


def test_a_job_without_the_fields_is_stored_as_before_and_one_with_them_keeps_them() -> None:
    assert "artifacts" not in parse().model_dump(mode="json")
    spec = parse(artifacts=["dist"], artifacts_when="on_failure", inputs=[f"{JOB}:dist", {"source": "https://e.x/a"}])
    assert spec.artifacts == ("dist",) and spec.artifacts_when == "on_failure"
    assert [(i.job_id, i.path, i.target) for i in spec.inputs] == [(JOB, "dist", "dist"), ("", "", "a")]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"artifacts": "dist"}, "Invalid artifacts: must be a list of paths relative to the workspace"),
        ({"artifacts": ["/etc/passwd"]}, "Invalid artifacts[0]: '/etc/passwd' is absolute; paths are relative"),
        ({"artifacts": ["a", "x/../../y"]}, "Invalid artifacts[1]: 'x/../../y' leaves the workspace ('..')"),
        ({"artifacts": ["./"]}, "Invalid artifacts[0]: './' names no file or directory inside the workspace"),
        ({"artifacts": [str(n) for n in range(65)]}, "Invalid artifacts: at most 64 paths, not 65"),
        ({"artifacts_when": "never"}, "Invalid artifacts_when: 'never'; use one of always, on_success, on_failure"),
        ({"inputs": ["abc:dist"]}, "Invalid inputs[0]: 'abc:dist' names no job: use \"<job id>:<path>\""),
        ({"inputs": [f"{JOB}:../x"]}, "Invalid inputs[0]: '../x' leaves the workspace ('..')"),
        ({"inputs": ["ftp://e.x/a"]}, "Invalid inputs[0]: URL scheme 'ftp' is not supported; use http or https"),
        ({"inputs": ["https:///a"]}, "Invalid inputs[0]: input URL must include a host"),
        ({"inputs": [{"source": "https://e.x/a", "destination": "/abs"}]}, "Invalid inputs[0]: destination '/abs'"),
        ({"inputs": [{"destination": "a"}]}, "Invalid inputs[0]: source (and destination, if given) must be strings"),
        ({"inputs": [f"{JOB}:a"] * 33}, "Invalid inputs: at most 32 inputs, not 33"),
    ],
)
def test_mistakes_are_400s_naming_the_field_and_the_problem(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse(**fields)
    assert str(refused.value).startswith(message)


def test_an_input_places_a_file_or_everything_below_a_directory() -> None:
    into = Input(source=f"{JOB}:dist", destination="in")
    assert [placed_at(p, into) for p in ("dist", "dist/bin/app", "distx/a", "other")] == [
        "in",
        "in/bin/app",
        None,
        None,
    ]
    assert placed_at("dist/a", Input(source=f"{JOB}:dist/")) == "dist/a"
