"""A pipeline on a real Docker engine: two stages, the second reading the first's artifact; each stage's containers
get the pipeline's variables."""

from __future__ import annotations

from typing import Any

import pytest

from hades.core.stages import stage_job_id
from tests.conftest import StartHades, eventually
from tests.integration.test_docker_jobs import no_leftovers

pytestmark = pytest.mark.docker


def stage(name: str, script: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "steps": [{"id": 1, "image": "alpine:latest", "script": script}], **fields}


async def test_a_two_stage_pipeline_passes_an_artifact_on_docker(
    docker_images: list[str], start_hades: StartHades
) -> None:
    api = await start_hades()
    build = (
        'test "$HADES_STAGE" = build && test -n "$HADES_PIPELINE_TOKEN" && '
        'mkdir -p /shared/dist && echo "$HADES_PIPELINE_ID" > /shared/dist/made-by && echo built'
    )
    check = 'test "$(cat /shared/dist/made-by)" = "$HADES_PIPELINE_ID" && test "$HADES_STAGE" = test && echo checked'
    pid = await api.submit(
        {
            "name": "docker pipeline",
            "stages": [stage("build", build, artifacts=["dist"]), stage("test", check, inputs=["build:dist"])],
        }
    )
    ended = await api.wait_terminal(pid, timeout=90)
    assert ended["status"] == "Succeeded", ended
    assert [(row["name"], row["status"]) for row in ended["stages"]] == [("build", "Succeeded"), ("test", "Succeeded")]
    logs = (await api.client.get(f"/jobs/{pid}/logs")).json()["logs"]
    assert [(entry["stage"], [line["message"] for line in entry["logs"]]) for entry in logs] == [
        ("build", ["built"]),
        ("test", ["checked"]),
    ]
    listed = (await api.client.get(f"/jobs/{pid}/artifacts")).json()["artifacts"]
    assert [row["path"] for row in listed] == ["build/dist/made-by"]
    made_by = await api.client.get(f"/jobs/{pid}/artifacts/build/dist/made-by")
    assert made_by.content == f"{pid}\n".encode()
    for name in ("build", "test"):
        job_id = stage_job_id(pid, name)
        await eventually(lambda job_id=job_id: no_leftovers(job_id), timeout=15)
