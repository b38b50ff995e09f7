"""The dashboard's live streams against a real server: real frames over HTTP while real jobs run.

``/api/stream`` must show a job's changes as they happen; ``/api/jobs/<id>/logs/stream`` the backlog, then the
live tail, then the end. Jobs run on the process executor so the test controls when a step finishes (a marker file).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import bcrypt
import httpx
import pytest

from hades.http.dashboard.feed import JobFeed, Subscriber, metrics_frame, stream_frames
from hades.runtime import Roles
from tests.conftest import RunningHades, StartHades, eventually

PASSWORD = "pw-for-streams"
DASHBOARD = {
    "DASHBOARD_USERNAME": "admin",
    "DASHBOARD_PASSWORD_HASH": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode(),
    "DASHBOARD_SESSION_SECRET": "s" * 40,
    "DASHBOARD_COOKIE_INSECURE": "true",
}


async def start(start_hades: StartHades, tmp_path: Path) -> RunningHades:
    hades = await start_hades(
        Roles(api=True, scheduler=True, executor=True),
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path / "work"),
        CONCURRENCY=2,
        **DASHBOARD,
    )
    response = await hades.client.post("/api/login", json={"username": "admin", "password": PASSWORD})
    assert response.status_code == 200
    return hades


def waiting_job(marker: Path, name: str = "streamed") -> dict[str, Any]:
    script = f"echo first line; while [ ! -f {marker} ]; do sleep 0.05; done; echo second line"
    return {"name": name, "steps": [{"id": 1, "name": "wait", "image": "local", "script": script}]}


@asynccontextmanager
async def frames(client: httpx.AsyncClient, path: str) -> AsyncIterator[asyncio.Queue[dict[str, Any] | str]]:
    """The stream's frames (decoded ``data:``, or the text of a ``:`` comment) as they arrive."""
    queue: asyncio.Queue[dict[str, Any] | str] = asyncio.Queue()
    opened = asyncio.Event()

    async def read() -> None:
        async with client.stream("GET", path, timeout=httpx.Timeout(10, read=None)) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            assert response.headers["x-accel-buffering"] == "no"
            opened.set()
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    await queue.put(json.loads(line[6:]))
                elif line.startswith(":"):
                    await queue.put(line)
            await queue.put("closed")

    reader = asyncio.create_task(read())
    await asyncio.wait_for(opened.wait(), 10)
    try:
        yield queue
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def next_frame(queue: asyncio.Queue[dict[str, Any] | str], timeout: float = 20) -> dict[str, Any] | str:
    return await asyncio.wait_for(queue.get(), timeout)


@pytest.mark.timeout(90)
async def test_the_feed_shows_a_job_going_queued_running_succeeded(start_hades: StartHades, tmp_path: Path) -> None:
    hades = await start(start_hades, tmp_path)
    marker = tmp_path / "go"
    async with frames(hades.client, "/api/stream") as queue:
        first = await next_frame(queue)
        assert isinstance(first, dict)
        assert first["type"] == "metrics"
        assert first["job"] == {"id": "", "status": ""}
        assert first["metrics"]["streamClients"] == 1
        job_id = await hades.submit(waiting_job(marker))
        seen: list[str] = []
        arrived: dict[str, float] = {}
        while "Succeeded" not in seen:
            frame = await next_frame(queue)
            if isinstance(frame, dict) and frame["type"] == "job" and frame["job"]["id"] == job_id:
                status = frame["job"]["status"]
                if not seen or seen[-1] != status:
                    seen.append(status)
                    arrived[status] = time.time()
                if status == "Running" and not marker.exists():
                    marker.touch()
        assert seen == ["Queued", "Running", "Succeeded"]
    events = (await hades.client.get(f"/jobs/{job_id}/events")).json()["events"]
    at = {row["type"]: datetime.fromisoformat(row["at"].replace("Z", "+00:00")).timestamp() for row in events}
    lags = {status: arrived[status] - at[kind] for status, kind in (("Running", "started"), ("Succeeded", "succeeded"))}
    print(f"event appended -> frame received: {', '.join(f'{s} {1000 * lag:.1f} ms' for s, lag in lags.items())}")
    assert all(lag < 5 for lag in lags.values())


@pytest.mark.timeout(90)
async def test_the_log_stream_sends_the_backlog_then_live_lines_then_the_end(
    start_hades: StartHades, tmp_path: Path
) -> None:
    hades = await start(start_hades, tmp_path)
    marker = tmp_path / "go"
    job_id = await hades.submit(waiting_job(marker))

    async def first_line_stored() -> bool:
        logs = (await hades.client.get(f"/api/jobs/{job_id}/logs")).json()["logs"]
        return any(entry["message"] == "first line" for log in logs for entry in log["logs"] or [])

    await eventually(first_line_stored)
    async with frames(hades.client, f"/api/jobs/{job_id}/logs/stream") as queue:
        messages: list[str] = []
        while "first line" not in messages:  # the backlog
            frame = await next_frame(queue)
            assert isinstance(frame, dict) and frame["type"] == "log", frame
            assert frame["job"] == {"id": "", "status": ""}
            messages += [entry["message"] for entry in frame["log"]["logs"] or []]
        marker.touch()
        while True:
            frame = await next_frame(queue)
            assert isinstance(frame, dict)
            if frame["type"] == "end":
                break
            messages += [entry["message"] for entry in frame["log"]["logs"] or []]
        assert frame["job"] == {"id": job_id, "status": "Succeeded"}
        assert messages == ["first line", "second line"]
        assert await next_frame(queue) == "closed"


async def test_the_log_stream_of_an_unknown_or_bad_job(start_hades: StartHades, tmp_path: Path) -> None:
    hades = await start(start_hades, tmp_path)
    bad = await hades.client.get("/api/jobs/nope/logs/stream")
    assert (bad.status_code, bad.json()) == (400, {"error": "invalid job id"})
    unknown = await hades.client.get("/api/jobs/00000000-0000-4000-8000-000000000000/logs/stream")
    assert unknown.status_code == 404


async def test_a_stream_client_leaving_is_no_longer_counted(start_hades: StartHades, tmp_path: Path) -> None:
    hades = await start(start_hades, tmp_path)
    async with frames(hades.client, "/api/stream") as queue:
        await next_frame(queue)
        assert (await hades.client.get("/api/metrics")).json()["streamClients"] == 1

    async def none_left() -> bool:
        return (await hades.client.get("/api/metrics")).json()["streamClients"] == 0

    await eventually(none_left, timeout=10)


# -- the frame schedule, on a fast clock ------------------------------------------------------------------------


async def test_metrics_and_pings_come_on_schedule_even_while_jobs_keep_changing() -> None:
    subscriber = Subscriber()
    stream = stream_frames(subscriber, lambda: {"n": 1}, metrics_every=0.2, ping_every=0.5)
    assert await anext(stream) == metrics_frame({"n": 1})
    kinds: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.1
    while loop.time() < deadline:
        subscriber.offer(json.dumps({"type": "job"}))  # a busy feed: a job frame is always waiting
        frame = await anext(stream)
        kinds.append("ping" if frame is None else json.loads(frame)["type"])
    assert kinds.count("metrics") >= 4
    assert kinds.count("ping") >= 2
    assert kinds.count("job") > 10


async def test_a_slow_client_loses_frames_but_is_told_to_resync() -> None:
    subscriber = Subscriber()
    for i in range(40):
        subscriber.offer(json.dumps({"type": "job", "n": i}))
    assert subscriber.dropped == 8
    stream = stream_frames(subscriber, lambda: {}, metrics_every=60, ping_every=60)
    await anext(stream)  # metrics
    received = [json.loads(str(await anext(stream))) for _ in range(33)]
    assert [frame.get("n") for frame in received[:32]] == list(range(32))
    assert received[32]["type"] == "resync"
    assert not subscriber.lagging


def test_the_feed_builds_nothing_without_subscribers() -> None:
    class Exploding:
        def get(self, job_id: str) -> None:
            raise AssertionError("looked up a job with nobody listening")

    feed = JobFeed(Exploding(), None, datetime.now)  # type: ignore[arg-type]
    feed.on_event(None)  # type: ignore[arg-type]
