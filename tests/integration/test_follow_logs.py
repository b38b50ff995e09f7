"""``GET /jobs/{id}/logs?follow=true`` over a real uvicorn server: lines arrive while the job runs, the stream
ends with the job's status once every batch was sent."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from hades.runtime import Roles
from tests.conftest import StartHades

pytestmark = pytest.mark.docker


async def read_events(client: Any, path: str) -> list[tuple[str, str, float]]:
    """(event, data, arrival time) for each Server-Sent Event until the server closes the stream."""
    events: list[tuple[str, str, float]] = []
    name = data = ""
    async with client.stream("GET", path, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data = line.split(":", 1)[1].strip()
            elif line == "" and name:
                events.append((name, data, time.time()))
                name = data = ""
    return events


async def test_following_a_running_job_streams_its_lines_then_its_end(
    docker_images: list[str], start_hades: StartHades
) -> None:
    hades = await start_hades()
    script = "echo one; sleep 2; echo two >&2"
    job_id = await hades.submit({"name": "follow", "steps": [{"id": 1, "image": "alpine:latest", "script": script}]})

    events = await read_events(hades.client, f"/jobs/{job_id}/logs?follow=true")

    detail = (await hades.client.get(f"/jobs/{job_id}")).json()
    finished = datetime.fromisoformat(detail["finished_at"].replace("Z", "+00:00")).timestamp()
    logs = [(json.loads(data), at) for name, data, at in events if name == "log"]
    lines = [(line["message"], line["output_stream"], at) for batch, at in logs for line in batch["logs"] or []]
    assert [(m, s) for m, s, _ in lines] == [("one", "stdout"), ("two", "stderr")]
    assert lines[0][2] < finished  # "one" arrived while the job still ran
    assert events[-1][0] == "end"
    assert json.loads(events[-1][1]) == {"status": "Succeeded", "reason": None}


async def test_following_a_finished_job_gives_its_backlog_and_ends(
    docker_images: list[str], start_hades: StartHades
) -> None:
    hades = await start_hades()
    job_id = await hades.submit({"name": "done", "steps": [{"id": 1, "image": "alpine:latest", "script": "echo a"}]})
    await hades.wait_terminal(job_id)

    events = await read_events(hades.client, f"/jobs/{job_id}/logs?follow=true")

    assert [name for name, _, _ in events] == ["log", "log", "end"]  # the empty slot, the line, the end


async def test_following_an_unknown_job_says_so(start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True))
    events = await read_events(api.client, f"/jobs/{uuid.uuid4()}/logs?follow=true")
    assert [name for name, _, _ in events] == ["error"]
    assert UTC
