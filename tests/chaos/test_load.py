"""A deep queue (no executor running) does not slow submission down: the fast counterpart of bench/load.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from hades.adapters.nats.connection import connect
from hades.adapters.nats.server import start_nats
from hades.adapters.nats.topology import EVENTS_STREAM, apply, load_topology
from hades.config import Settings
from hades.runtime import Roles, serve
from tests.conftest import eventually, free_port

pytestmark = pytest.mark.chaos

JOBS = 600
WINDOW = 100
PRIORITIES = ("high", "medium", "low")
JOB = {"name": "queued", "steps": [{"id": 1, "image": "busybox", "script": "true"}]}


async def test_submission_keeps_answering_while_the_queue_grows(tmp_path: Path) -> None:
    server = start_nats(tmp_path / "nats")  # its own server: these jobs stay queued, no other test should meet them
    stop = asyncio.Event()
    try:
        nc = await connect(server.url)
        await apply(nc.jetstream(), load_topology())
        port = free_port()
        settings = Settings(API_PORT=port, API_HOST="127.0.0.1", METRICS_PORT=0, HADES_DATA_DIR=tmp_path)
        hades = asyncio.create_task(serve(settings, Roles(api=True, scheduler=True), server.url, stop))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:

            async def answering() -> bool:
                assert not hades.done()
                try:
                    return (await client.get("/ping")).status_code == 200
                except httpx.HTTPError:
                    return False

            await eventually(answering, timeout=30)
            latencies = []
            for _ in range(JOBS):
                began = time.perf_counter()
                response = await client.post("/build", json=JOB)
                latencies.append(time.perf_counter() - began)
                assert response.status_code == 200, response.text

            async def all_queued() -> bool:
                infos = [await nc.jetstream().consumer_info(EVENTS_STREAM, f"executor-{p}") for p in PRIORITIES]
                return sum(info.num_pending for info in infos) == JOBS

            await eventually(all_queued, timeout=30)
        first, last = sorted(latencies[:WINDOW]), sorted(latencies[-WINDOW:])
        print(f"\nPOST /build p50 first {first[WINDOW // 2] * 1000:.1f} ms, last {last[WINDOW // 2] * 1000:.1f} ms")
        # The median of the last jobs stays within a small factor of the first's (plus a floor for a noisy machine):
        # a submission does nothing whose cost grows with the queue.
        assert last[WINDOW // 2] < 3 * first[WINDOW // 2] + 0.02
        await nc.close()
    finally:
        stop.set()
        if "hades" in locals():
            await asyncio.wait_for(hades, 30)
        server.stop()
