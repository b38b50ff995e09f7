"""Artifacts on a real Docker engine: files written in a step's /shared are kept through the engine's archive API,
listed and downloadable, and placed into a second job's volume before its first step."""

from __future__ import annotations

import hashlib

import pytest

from tests.artifacts.test_process_artifacts import kept
from tests.conftest import StartHades, eventually
from tests.integration.test_docker_jobs import no_leftovers

pytestmark = pytest.mark.docker


async def test_a_docker_job_keeps_files_and_a_second_one_reads_them(
    docker_images: list[str], start_hades: StartHades
) -> None:
    api = await start_hades()
    write = (
        "mkdir -p /shared/dist/bin && echo built > /shared/dist/bin/app && head -c 200000 /dev/urandom > /shared/blob"
    )
    first = await api.submit(
        {
            "name": "build",
            "steps": [{"id": 1, "image": "alpine:latest", "script": write}],
            "artifacts": ["dist", "blob"],
        }
    )
    assert (await api.wait_terminal(first))["status"] == "Succeeded"
    rows = {row["path"]: row for row in (await kept(api, first))["artifacts"]}
    assert sorted(rows) == ["blob", "dist/bin/app"] and rows["blob"]["size"] == 200_000
    blob = await api.client.get(f"/jobs/{first}/artifacts/blob")
    assert hashlib.sha256(blob.content).hexdigest() == rows["blob"]["sha256"]
    assert (await api.client.get(f"/jobs/{first}/artifacts/dist/bin/app")).content == b"built\n"

    digest = rows["blob"]["sha256"]
    read = f'test "$(cat /shared/in/bin/app)" = built && test "$(sha256sum blob | cut -d" " -f1)" = {digest}'
    inputs = [{"source": f"{first}:dist", "destination": "in"}, f"{first}:blob"]
    second = await api.submit(
        {"name": "test", "steps": [{"id": 1, "image": "alpine:latest", "script": read}], "inputs": inputs}
    )
    ended = await api.wait_terminal(second)
    assert ended["status"] == "Succeeded", ended["reason"]
    for job_id in (first, second):  # the helper containers that read and wrote the volumes are gone with them
        await eventually(lambda job_id=job_id: no_leftovers(job_id), timeout=15)
