"""Load: 20,000 jobs queued with no executor running; does submission keep answering, and what does it cost?

One run on a fresh embedded nats-server (file storage):
  1. ``hades api`` and ``hades scheduler`` as subprocesses (HADES_SNAPSHOT_SECONDS=0), no executor: every job
     submitted stays Queued. The API's VmRSS once /ping answers (0 jobs).
  2. ``--jobs`` one-step jobs POSTed to /build over HTTP by ``--clients`` concurrent clients. Latency of each POST;
     p50/p99 of the first and of the last ``--window`` jobs (does submission slow down as the queue grows?). Every
     answer must be a 200.
  3. Once the scheduler queued them all (the executor queues' pending count), the API's VmRSS again (N jobs).
  4. A fresh ``hades api`` over the same log: the time from its start until /ping answers (it answers only once its
     views replayed every event), and its VmRSS then.

    .venv/bin/python bench/load.py [--jobs 20000] [--clients 32] [--window 1000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _support import REPO, emit_json, fleet, nats_with_topology, percentile, rss_bytes, run

from hades.adapters.nats.connection import connect
from hades.adapters.nats.topology import EVENTS_STREAM

HELLO = (REPO / "examples" / "hello.json").read_bytes()
QUEUES = ("executor-high", "executor-medium", "executor-low")


async def submit_all(api_url: str, jobs: int, clients: int) -> tuple[list[float], int]:
    """POST ``jobs`` jobs from ``clients`` concurrent clients: each POST's latency in submission order, and how many
    were sent again after a connection error (a kept-alive connection the server closed as it was reused)."""
    latencies: list[float] = [0.0] * jobs
    counter = iter(range(jobs))
    headers = {"Content-Type": "application/json"}
    resent = 0

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal resent
        for index in counter:
            began = time.perf_counter()
            while True:
                try:
                    response = await client.post(f"{api_url}/build", content=HELLO, headers=headers)
                    break
                except httpx.TransportError:
                    resent += 1
            latencies[index] = time.perf_counter() - began
            if response.status_code != 200:
                raise SystemExit(f"job {index}: {response.status_code} {response.text}")
            if index % 5000 == 4999:
                print(f"  {index + 1} jobs submitted", flush=True)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client, asyncio.TaskGroup() as group:
        for _ in range(clients):
            group.create_task(client_loop(client))
    return latencies, resent


async def queued(nats_url: str) -> int:
    """Messages waiting in the executor queues (nothing takes them: no executor runs)."""
    nc = await connect(nats_url)
    try:
        js = nc.jetstream()
        return sum([(await js.consumer_info(EVENTS_STREAM, name)).num_pending for name in QUEUES])
    finally:
        await nc.close()


async def wait_queued(nats_url: str, jobs: int, timeout: float = 300) -> float:
    """Seconds until the scheduler queued every job."""
    began = time.monotonic()
    while await queued(nats_url) < jobs:
        if time.monotonic() - began > timeout:
            raise SystemExit(f"the scheduler queued {await queued(nats_url)} of {jobs} jobs in {timeout} s")
        await asyncio.sleep(0.2)
    return time.monotonic() - began


def figures(latencies: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hades-bench-load-") as tmp:
        server = await nats_with_topology(Path(tmp) / "nats")
        try:
            with fleet(server.url, Path(tmp) / "fleet", HADES_SNAPSHOT_SECONDS="0", METRICS_PORT="0") as group:
                api = group.start("api")
                group.start("scheduler")
                await asyncio.to_thread(group.wait_api)
                rss_empty = rss_bytes(api.process.pid)
                began = time.perf_counter()
                latencies, resent = await submit_all(group.api_url, args.jobs, args.clients)
                submit_seconds = time.perf_counter() - began
                queue_seconds = await wait_queued(server.url, args.jobs)
                rss_full = rss_bytes(api.process.pid)

                started = time.perf_counter()
                fresh = group.start("api", name="api-fresh")
                await asyncio.to_thread(group.wait_api)
                replay_seconds = time.perf_counter() - started
                rss_fresh = rss_bytes(fresh.process.pid)
            nc = await connect(server.url)
            try:
                events = (await nc.jetstream().stream_info(EVENTS_STREAM)).state.messages
            finally:
                await nc.close()
        finally:
            server.stop()
    window = min(args.window, args.jobs)
    return {
        "bench": "load",
        "jobs": args.jobs,
        "clients": args.clients,
        "events": events,
        "submit_seconds": round(submit_seconds, 2),
        "submit_per_s": round(args.jobs / submit_seconds, 1),
        "resent_after_connection_error": resent,
        "queued_after_submit_s": round(queue_seconds, 2),
        "post_first": figures(latencies[:window]),
        "post_last": figures(latencies[-window:]),
        "rss_empty": rss_empty,
        "rss_full": rss_full,
        "fresh_api_ready_s": round(replay_seconds, 2),
        "rss_fresh": rss_fresh,
    }


def report(result: dict[str, Any]) -> None:
    jobs, first, last = result["jobs"], result["post_first"], result["post_last"]
    print(f"{jobs} jobs queued, no executor; {result['events']} events in {EVENTS_STREAM}")
    print(
        f"POST /build from {result['clients']} clients: {result['submit_seconds']} s "
        f"({result['submit_per_s']} jobs/s, {result['resent_after_connection_error']} sent again after a connection "
        f"error); all queued {result['queued_after_submit_s']} s after the last POST"
    )
    print(f"  first jobs: p50 {first['p50_ms']} ms, p99 {first['p99_ms']} ms")
    print(f"  last jobs:  p50 {last['p50_ms']} ms, p99 {last['p99_ms']} ms")
    print(
        f"API VmRSS: {result['rss_empty'] / 2**20:.1f} MiB at 0 jobs, {result['rss_full'] / 2**20:.1f} MiB at {jobs} "
        f"({(result['rss_full'] - result['rss_empty']) / jobs:.0f} bytes per queued job)"
    )
    print(
        f"fresh API over the log: answered after {result['fresh_api_ready_s']} s (start-up replay of "
        f"{result['events']} events), VmRSS {result['rss_fresh'] / 2**20:.1f} MiB"
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--window", type=int, default=1000, help="jobs in the first/last latency windows")
    parser.add_argument("--json", action="store_true", help="also print one BENCH-JSON line")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    outcome = run(main(arguments))
    report(outcome)
    if arguments.json:
        emit_json(outcome)
