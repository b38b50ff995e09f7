"""The dashboard's API on a busy log: route latency over 10,000 jobs, and the live feed fanned out to many clients.

One run against a fresh embedded nats-server:
  1. The log is filled with N real jobs (decide/evolve, appended straight to HADES_EVENTS as bench/replay.py does;
     most succeeded, some running, some queued, a few failed, spread over the last 40 minutes so all are within
     the default 1 h retention). The API (Roles(api=True), dashboard on) is started and the time until it answers
     is the start-up replay. Then each route is timed sequentially (3 warm-up + 30 requests, median and p95)
     against the baseline GET /ping on the same server, in the same run: ratio = route median / ping median.
  2. C clients hold /api/stream open; once every one has its first (metrics) frame, K jobs are submitted by
     store appends, one every 10 ms. For every (job, client) pair: time from the append returning to the client
     reading the job's frame. The same with 1 client is the baseline. The clients run in a child process (raw
     sockets, a line scan per frame), so their parsing costs neither the server's event loop nor its memory:
     the server runs in this process, and its RSS (/proc/self/status VmRSS) before and after the clients
     connect gives the memory per connected client. Both processes read CLOCK_MONOTONIC. "missing" counts
     (job, client) frames never read (dropped by the server's 32-frame buffer per client), "resyncs" the resync
     frames read instead; "append ms" is the median append round trip, which grows when the event loop the
     server shares with the appender is busy (the latencies, counted from the append's return, then understate).

    .venv/bin/python bench/dashboard.py [--jobs 10000] [--clients 200] [--events 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import logging
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bcrypt
import httpx

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import NatsEventStore, event_subject
from hades.adapters.nats.server import start_nats
from hades.adapters.nats.topology import apply, load_topology
from hades.config import Settings
from hades.core.codec import encode_event
from hades.core.events import Event
from hades.core.lifecycle import (
    Command,
    FinishStep,
    JobState,
    QueueJob,
    StartAttempt,
    StartStep,
    SubmitJob,
    decide,
    evolve,
)
from hades.core.spec import JobSpec, Step
from hades.http.dashboard.session import COOKIE
from hades.runtime import Roles, serve

SPEC = JobSpec(
    name="bench",
    metadata={"repository": "hades", "branch": "main"},
    steps=(Step(id=1, image="alpine", script="make test"), Step(id=2, image="alpine", script="make dist")),
)
PHASES = {"create": 0.1, "start": 0.05, "run": 0.2, "logs": 0.0, "teardown": 0.02}
RUNNING: list[Command] = [QueueJob(), StartAttempt(1, "exec-1"), StartStep(1, 0, prepare={"volume": 0.002})]
COMMANDS: dict[str, list[Command]] = {
    "queued": [QueueJob()],
    "running": RUNNING,
    "failed": [*RUNNING, FinishStep(1, 0, 1, phases=PHASES)],
    "succeeded": [*RUNNING, FinishStep(1, 0, 0, phases=PHASES), StartStep(1, 1), FinishStep(1, 1, 0, phases=PHASES)],
}
PASSWORD = "bench-password"
SPREAD = timedelta(minutes=40)
WARM_UP, REQUESTS = 3, 30
JOB_LINE = b'data: {"type": "job", "job": {"id": "'
METRICS_LINE = b'data: {"type": "metrics"'
RESYNC_LINE = b'data: {"type": "resync"'


def kind(index: int) -> str:
    """85 % succeeded, 8 % running, 5 % queued, 2 % failed."""
    share = index % 100
    return "failed" if share < 2 else "queued" if share < 7 else "running" if share < 15 else "succeeded"


def job_events(kind: str, at: datetime) -> list[Event]:
    """A job's events, one second apart from ``at``."""
    job_id = str(uuid.uuid4())
    events = decide(None, SubmitJob(job_id=job_id, spec=SPEC), at)
    state: JobState | None = evolve(None, events[0])
    for step, command in enumerate(COMMANDS[kind], start=1):
        new = decide(state, command, at + timedelta(seconds=step))
        for event in new:
            state = evolve(state, event)
        events += new
    return events


async def fill(url: str, jobs: int) -> tuple[int, str]:
    """Append ``jobs`` jobs without expectations (the fast path); the event count and a succeeded job's id."""
    nc = await connect(url)
    js = nc.jetstream(publish_async_max_pending=4000)
    now = datetime.now(UTC)
    written, succeeded = 0, ""
    for index in range(jobs):
        events = job_events(kind(index), now - SPREAD * (jobs - index) / jobs)
        for event in events:
            await js.publish_async(event_subject(event), encode_event(event))
        written += len(events)
        succeeded = events[0].job_id if kind(index) == "succeeded" else succeeded
        if index % 500 == 499:
            await js.publish_async_completed()
    await js.publish_async_completed()
    await nc.close()
    return written, succeeded


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def vm_rss_kib() -> int:
    """This process's resident set (the API server runs in it), after giving freed memory back to the system, so
    that what the first part's 3 MB answers left behind does not show up as a shrink."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settings(port: int) -> Settings:
    password_hash = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    return Settings(
        **{
            "API_PORT": port,
            "API_HOST": "127.0.0.1",
            "DASHBOARD_USERNAME": "admin",
            "DASHBOARD_PASSWORD_HASH": password_hash,
            "DASHBOARD_SESSION_SECRET": "s" * 40,
            "DASHBOARD_COOKIE_INSECURE": "true",
        }
    )


# --- 1. routes ------------------------------------------------------------------------------------------------


@dataclass
class Timed:
    label: str
    times: list[float]
    size: int

    @property
    def median(self) -> float:
        return statistics.median(self.times)


async def timed(client: httpx.AsyncClient, label: str, path: str) -> Timed:
    """Sequential GETs: a warm-up, then REQUESTS timed ones (ms)."""
    for _ in range(WARM_UP):
        (await client.get(path)).raise_for_status()
    times = []
    for _ in range(REQUESTS):
        began = time.perf_counter()
        response = await client.get(path)
        times.append((time.perf_counter() - began) * 1000)
        response.raise_for_status()
    return Timed(label, times, len(response.content))


async def until_serving(client: httpx.AsyncClient, task: asyncio.Task[None]) -> None:
    while True:
        if task.done():
            task.result()  # the API died: say why
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get("/ping")).status_code == 200:
                return
        await asyncio.sleep(0.02)


async def routes(client: httpx.AsyncClient, job_id: str) -> list[Timed]:
    return [
        await timed(client, "GET /ping (baseline)", "/ping"),
        await timed(client, "GET /api/jobs (limit 500)", "/api/jobs"),
        await timed(client, "GET /api/jobs?limit=10000", "/api/jobs?limit=10000"),
        await timed(client, "GET /api/jobs?status=running", "/api/jobs?status=running"),
        await timed(client, "GET /api/jobs/{id}", f"/api/jobs/{job_id}"),
        await timed(client, "GET /api/metrics", "/api/metrics"),
    ]


# --- 2. the live feed -----------------------------------------------------------------------------------------


@dataclass
class FanOut:
    clients: int
    latencies: list[float]  # ms, every (job, client) pair that arrived
    missing: int
    resyncs: int
    ack: float  # median append round trip, ms
    rss_kib: int  # this process's growth once the clients were connected
    connected: int  # streamClients as the server counted them


async def append_jobs(store: NatsEventStore, count: int, every: float) -> tuple[dict[str, float], list[float]]:
    """``count`` submissions, one every ``every`` s; when each append returned (monotonic), and its round trips."""
    returned: dict[str, float] = {}
    acks: list[float] = []
    start = time.monotonic()
    for index in range(count):
        await asyncio.sleep(max(0.0, start + index * every - time.monotonic()))
        job_id = str(uuid.uuid4())
        events = decide(None, SubmitJob(job_id=job_id, spec=SPEC), datetime.now(UTC))
        began = time.monotonic()
        await store.append(job_id, events, 0)
        returned[job_id] = time.monotonic()
        acks.append((returned[job_id] - began) * 1000)
    return returned, acks


async def no_stream_clients(client: httpx.AsyncClient) -> None:
    for _ in range(200):
        if (await client.get("/api/metrics")).json()["streamClients"] == 0:
            return
        await asyncio.sleep(0.05)


async def fan_out(client: httpx.AsyncClient, store: NatsEventStore, port: int, clients: int, events: int) -> FanOut:
    await no_stream_clients(client)
    before = vm_rss_kib()
    env = {**os.environ, "BENCH_COOKIE": client.cookies[COOKIE]}
    args = ["--reader", str(port), str(clients), str(events)]
    reader = await asyncio.create_subprocess_exec(
        sys.executable, __file__, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
    )
    assert reader.stdin is not None and reader.stdout is not None
    try:
        assert await asyncio.wait_for(reader.stdout.readline(), 120) == b"ready\n"
        grown = vm_rss_kib() - before
        connected = (await client.get("/api/metrics")).json()["streamClients"]
        returned, acks = await append_jobs(store, events, 0.01)
        reader.stdin.write(b"done\n")
        await reader.stdin.drain()
        result = json.loads(await asyncio.wait_for(reader.stdout.read(), 60))
        await reader.wait()
    finally:
        if reader.returncode is None:
            reader.kill()
            await reader.wait()
    latencies = [
        (arrivals[job_id] - at) * 1000
        for arrivals in result["arrivals"]
        for job_id, at in returned.items()
        if job_id in arrivals
    ]
    missing = clients * events - len(latencies)
    return FanOut(clients, latencies, missing, sum(result["resyncs"]), statistics.median(acks), grown, connected)


async def read_stream(port: int, cookie: str, got: dict[str, float], first: asyncio.Event) -> int:
    """One /api/stream client on a raw socket; job frames' arrival times into ``got``; returns resyncs seen."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {COOKIE}={cookie}\r\n\r\n"
    writer.write(request.encode())
    resyncs, tail = 0, b""
    try:
        status = await reader.readline()
        assert b" 200 " in status, status
        while chunk := await reader.read(65536):
            now = time.monotonic()
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                if line.startswith(JOB_LINE):
                    got.setdefault(line[len(JOB_LINE) : len(JOB_LINE) + 36].decode(), now)
                elif line.startswith(METRICS_LINE):
                    first.set()
                elif line.startswith(RESYNC_LINE):
                    resyncs += 1
    except asyncio.CancelledError:
        pass
    finally:
        writer.close()
    return resyncs


async def reader_main(port: int, clients: int, events: int) -> None:
    """The child process: hold ``clients`` streams, say ``ready``, and after ``done`` print what arrived when."""
    cookie = os.environ["BENCH_COOKIE"]
    arrivals: list[dict[str, float]] = [{} for _ in range(clients)]
    firsts = [asyncio.Event() for _ in range(clients)]
    tasks = [asyncio.create_task(read_stream(port, cookie, arrivals[i], firsts[i])) for i in range(clients)]
    await asyncio.wait_for(asyncio.gather(*(first.wait() for first in firsts)), 100)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    deadline = time.monotonic() + 5  # the stragglers' frames
    while time.monotonic() < deadline and any(len(got) < events for got in arrivals):  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    for task in tasks:
        task.cancel()
    resyncs = await asyncio.gather(*tasks)
    sys.stdout.write(json.dumps({"arrivals": arrivals, "resyncs": resyncs}))
    sys.stdout.flush()


# --- the run --------------------------------------------------------------------------------------------------


@dataclass
class Figures:
    events: int
    start_up: float
    routes: list[Timed]
    baseline: FanOut
    fanned: FanOut


async def measure(args: argparse.Namespace) -> Figures:
    with tempfile.TemporaryDirectory(prefix="hades-bench-dashboard-") as data:
        server = start_nats(Path(data) / "nats")
        try:
            nc = await connect(server.url)
            await apply(nc.jetstream(), load_topology())
            await nc.close()
            events, job_id = await fill(server.url, args.jobs)
            return await against_api(server.url, args, events, job_id)
        finally:
            server.stop()


async def against_api(url: str, args: argparse.Namespace, events: int, job_id: str) -> Figures:
    port = free_port()
    stop = asyncio.Event()
    began = time.perf_counter()
    task = asyncio.create_task(serve(settings(port), Roles(api=True), url, stop))
    nc = await connect(url)
    limits = httpx.Limits(max_connections=4)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60) as client:
            await until_serving(client, task)
            start_up = time.perf_counter() - began
            login = await client.post("/api/login", json={"username": "admin", "password": PASSWORD})
            login.raise_for_status()
            timings = await routes(client, job_id)
            store = NatsEventStore(nc)
            baseline = await fan_out(client, store, port, 1, args.events)
            fanned = await fan_out(client, store, port, args.clients, args.events)
            await no_stream_clients(client)
    finally:
        await nc.close()
        stop.set()
        await asyncio.wait_for(task, 60)
    return Figures(events, start_up, timings, baseline, fanned)


def report(args: argparse.Namespace, figures: Figures) -> None:
    ping = figures.routes[0].median
    print(f"jobs: {args.jobs} ({figures.events} events; 85% succeeded, 8% running, 5% queued, 2% failed)")
    rate = figures.events / figures.start_up
    print(f"API start-up (replay until it answers): {figures.start_up:6.2f} s, {rate:8.0f} events/s")
    print()
    print(f"{'route (30 sequential GETs)':32} {'median ms':>10} {'p95 ms':>8} {'x /ping':>8} {'bytes':>10}")
    for row in figures.routes:
        ratio = row.median / ping
        print(f"{row.label:32} {row.median:10.2f} {percentile(row.times, 0.95):8.2f} {ratio:8.1f} {row.size:10d}")
    print()
    one = figures.baseline
    base50, base95 = statistics.median(one.latencies), percentile(one.latencies, 0.95)
    print(f"/api/stream: {args.events} job submissions, one every 10 ms; append returned -> client read the frame")
    head = f"{'clients':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'x p50(1)':>9} {'x p95(1)':>9}"
    print(f"{head} {'missing':>8} {'resyncs':>8} {'append ms':>10} {'connected':>10}")
    for row in (one, figures.fanned):
        p50, p95 = statistics.median(row.latencies), percentile(row.latencies, 0.95)
        line = f"{row.clients:8d} {p50:8.2f} {p95:8.2f} {max(row.latencies):8.2f} {p50 / base50:9.1f}"
        print(f"{line} {p95 / base95:9.1f} {row.missing:8d} {row.resyncs:8d} {row.ack:10.2f} {row.connected:10d}")
    fanned = figures.fanned
    print(
        f"API process RSS growth with {fanned.clients} streams open: {fanned.rss_kib} KiB, "
        f"{fanned.rss_kib / fanned.clients:.1f} KiB per client (server in this process, clients in a child process)"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--reader":
        asyncio.run(reader_main(*(int(arg) for arg in sys.argv[2:5])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the log (default 10000)")
    parser.add_argument("--clients", type=int, default=200, help="/api/stream clients (default 200)")
    parser.add_argument("--events", type=int, default=200, help="job submissions during the fan-out (default 200)")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    report(args, asyncio.run(measure(args)))


if __name__ == "__main__":
    main()
