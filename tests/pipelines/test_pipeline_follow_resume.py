"""Following a pipeline's logs resumes from ``Last-Event-ID`` as a job's does: a client that loses the stream in the
middle of a stage and reconnects gets the rest of that stage and the stages after it, nothing lost and nothing twice
(over a real uvicorn server; the process executor, so no Docker)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import httpx

from tests.conftest import StartHades
from tests.integration.test_follow_resume import lines, sse
from tests.pipelines.test_process_pipelines import process_hades, stage

SSE = tuple[str, str, str]  # (event, id, data)


async def until_stage(client: httpx.AsyncClient, path: str, name: str) -> list[SSE]:
    """The stream's events up to the first ``log`` event of stage ``name``; then the connection is dropped."""
    events: list[SSE] = []
    fields = {"event": "", "id": "", "data": ""}
    async with client.stream("GET", path, timeout=60) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            key, _, value = line.partition(":")
            if key in fields:
                fields[key] = value.strip()
            elif line == "" and fields["event"]:
                events.append((fields["event"], fields["id"], fields["data"]))
                if fields["event"] == "log" and json.loads(fields["data"])["stage"] == name:
                    return events
                fields = {"event": "", "id": "", "data": ""}
    raise AssertionError(f"the stream ended before stage {name} wrote: {events}")


async def test_a_client_reconnecting_mid_pipeline_loses_and_duplicates_nothing(
    start_hades: StartHades, tmp_path: Path
) -> None:
    api = await process_hades(start_hades, tmp_path)
    gate = shlex.quote(str(tmp_path / "gate"))
    held = f"echo b-1; while [ ! -e {gate} ]; do sleep 0.05; done; echo b-2; echo b-3"
    pipeline = {
        "name": "resumed",
        "stages": [stage("a", "echo a-1; echo a-2; echo a-3"), stage("b", held), stage("c", "echo c-1")],
    }
    pid = await api.submit(pipeline)
    path = f"/jobs/{pid}/logs?follow=true"

    before = await until_stage(api.client, path, "b")  # stage b runs on, held at its gate: the client drops out
    (tmp_path / "gate").touch()
    last_id = before[-1][1]
    after = await sse(api.client, path, last_event_id=last_id)

    assert last_id.startswith("b:")
    assert lines(before) + lines(after) == ["a-1", "a-2", "a-3", "b-1", "b-2", "b-3", "c-1"]
    assert next(json.loads(data)["stage"] for name, _, data in after if name == "log") == "b"
    assert after[-1][0] == "end" and json.loads(after[-1][2])["status"] == "Succeeded"
    whole = await sse(api.client, path)
    ids = [ident for name, ident, _ in whole if name == "log"]
    assert [ident for name, ident, _ in before + after if name == "log"] == ids  # every batch once, in order
    # Ids that name no launched stage (or no position) are ignored, as a job's are: the whole log again.
    for foreign in ("z:3", "7", "b:x", "not-an-id"):
        assert lines(await sse(api.client, path, last_event_id=foreign)) == lines(whole)
