"""Delay from a job's terminal event to its status webhook arriving at the receiver, p50 over N jobs.

Runs every role in one process (as `hades up` does) with the process executor, so the engine's container cost
does not blur the figure, and a real HTTP receiver on loopback. The baseline is the same receiver hit by a plain
httpx POST of the same size, measured in the same run: the raw cost of one delivery.

    .venv/bin/python bench/webhook_latency.py [JOBS]      (default 100)
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hades.adapters.nats.connection import connect  # noqa: E402
from hades.adapters.nats.server import start_nats  # noqa: E402
from hades.adapters.nats.topology import apply, load_topology  # noqa: E402
from hades.config import Settings  # noqa: E402
from hades.runtime import Roles, serve  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.support.receiver import receiving  # noqa: E402


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main(jobs: int) -> None:
    with tempfile.TemporaryDirectory() as data:
        server = start_nats(Path(data) / "nats")
        try:
            nc = await connect(server.url)
            await apply(nc.jetstream(), load_topology())
            await nc.close()
            port = free_port()
            settings = Settings(
                API_PORT=port,
                API_HOST="127.0.0.1",
                HADES_EXECUTOR="process",
                HADES_PROCESS_WORKSPACES=str(Path(data) / "work"),
                CONCURRENCY=4,
                WEBHOOK_SECRET="bench",
            )
            stop = asyncio.Event()
            task = asyncio.create_task(serve(settings, Roles.all(), server.url, stop))
            async with receiving(200) as receiver, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                while True:
                    try:
                        if (await client.get("/ping")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.05)
                baseline = []
                async with httpx.AsyncClient() as plain:
                    for _ in range(jobs):
                        began = time.perf_counter()
                        await plain.post(f"{receiver.url}/baseline", json={"event": "job.completed", "pad": "x" * 300})
                        baseline.append((time.perf_counter() - began) * 1000)
                job = {
                    "name": "hello",
                    "steps": [{"id": 1, "image": "-", "script": "echo hi"}],
                    "status_callback_url": f"{receiver.url}/hook",
                }
                for _ in range(jobs):
                    await client.post("/build", json=job)
                deadline = time.monotonic() + 300
                while len(receiver.for_path("/hook")) < jobs and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
                delays = []
                for request in receiver.for_path("/hook"):
                    body = request.json()
                    assert isinstance(body, dict)
                    finished = datetime.fromisoformat(str(body["finished_at"]).replace("Z", "+00:00")).timestamp()
                    delays.append((request.at - finished) * 1000)
            stop.set()
            await asyncio.wait_for(task, 60)
        finally:
            server.stop()
    p50, base = statistics.median(delays), statistics.median(baseline)
    print(f"jobs: {len(delays)} of {jobs}")
    print(f"plain POST to the receiver (baseline)       p50 {base:7.1f} ms")
    print(
        f"terminal event -> webhook received           p50 {p50:7.1f} ms   p90 {percentile(delays, 0.9):7.1f} ms"
        f"   max {max(delays):7.1f} ms   {p50 / base:5.1f}x baseline"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
