"""A client that loses the log stream reconnects with ``Last-Event-ID`` and gets only the batches after it, then
the end (over a real uvicorn server; the process executor, so no Docker)."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import StartHades


async def sse(client: Any, path: str, last_event_id: str | None = None) -> list[tuple[str, str, str]]:
    """(event, id, data) for each Server-Sent Event until the server closes the stream."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    events: list[tuple[str, str, str]] = []
    name = ident = data = ""
    async with client.stream("GET", path, headers=headers, timeout=60) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            key, _, value = line.partition(":")
            if key in ("event", "id", "data"):
                name, ident, data = (
                    value.strip() if key == "event" else name,
                    value.strip() if key == "id" else ident,
                    value.strip() if key == "data" else data,
                )
            elif line == "" and name:
                events.append((name, ident, data))
                name = ident = data = ""
    return events


def lines(events: list[tuple[str, str, str]]) -> list[str]:
    return [entry["message"] for name, _, data in events if name == "log" for entry in json.loads(data)["logs"] or []]


async def test_a_reconnecting_client_gets_only_the_batches_after_its_last_event(start_hades: StartHades) -> None:
    hades = await start_hades(HADES_EXECUTOR="process")
    steps = [{"id": n, "image": "-", "script": f"echo line-{n}"} for n in (1, 2, 3)]
    job_id = await hades.submit({"name": "resume", "steps": steps})
    await hades.wait_terminal(job_id)
    path = f"/jobs/{job_id}/logs?follow=true"

    whole = await sse(hades.client, path)
    assert lines(whole) == ["line-1", "line-2", "line-3"]
    logs = [(ident, data) for name, ident, data in whole if name == "log"]
    cut = next(i for i, (_, data) in enumerate(logs) if "line-2" in data)

    resumed = await sse(hades.client, path, last_event_id=logs[cut][0])

    assert [data for name, _, data in resumed if name == "log"] == [data for _, data in logs[cut + 1 :]]
    assert lines(resumed) == ["line-3"]
    assert resumed[-1][0] == "end" and json.loads(resumed[-1][2])["status"] == "Succeeded"
    assert lines(await sse(hades.client, path, last_event_id="not-a-sequence")) == lines(whole)  # ignored
