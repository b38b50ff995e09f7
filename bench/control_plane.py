"""Control-plane throughput: N one-step no-op jobs on the process executor, against raw JetStream.

One run, each part on its own fresh embedded nats-server:
  1. Hades: ``hades`` role processes against the server, with ``HADES_EXECUTOR=process`` (steps run in the host
     shell, so no container cost). ``--mode up`` runs one ``hades up``-like process with every role (executor
     CONCURRENCY=2×16); ``--mode split`` (the default) runs ``hades api``, ``hades scheduler``, ``hades notifier``
     and two ``hades executor`` processes with CONCURRENCY=16 each, as a fleet would. C concurrent HTTP clients
     (aiohttp, in this process) POST /build the job ``true`` N times. A job's end is seen here by an ordered
     consumer on ``hades.events.>`` (deliver new) that stamps each terminal event (succeeded/failed/stopped) as it
     arrives. Figures: completed jobs/s (N / first POST → last terminal event), submit→terminal latency p50/p99,
     and events/s = jobs/s × the events one such job writes, counted from a real job's GET /jobs/{id}/events.
  2. The raw baseline: the same number of events per job, appended by nats-py with awaited acks (the expected
     last subject sequence chained per job, and a msg id, as Hades appends) by 32 concurrent chains, while one
     durable pull consumer (fetch 500, ack each) consumes them. Rate = events / (first append → last consumed).
  Ratio = Hades events/s ÷ raw events/s (target ≥ 50%). (Such a job also writes one log batch, its step's empty
  slot, to HADES_LOGS; the baseline leaves it out, as it counts events only.)

Also printed: the submit→terminal latency of jobs sent one at a time before the burst (``--solo``) with the median
gap between consecutive events; the CPU each process (roles, nats-server, this one) spent per job over the
measured part, from /proc; with ``--traffic``, the requests every process made of the server per job, by kind
(plain subscriptions to the request subjects); with ``--profile DIR``, py-spy (--gil) of every role.
``--loop asyncio`` runs the roles on asyncio's default loop instead of uvloop (which ``hades`` picks), for an A/B.

    .venv/bin/python bench/control_plane.py [--jobs 2000] [--clients 16] [--mode split|up|split,up]
        [--loop uvloop|asyncio|uvloop,asyncio] [--solo 20] [--traffic] [--profile DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import os
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from _support import (
    CpuMeter,
    Fleet,
    Profiler,
    Watch,
    emit_json,
    finished_job_events,
    fleet,
    nats_with_topology,
    percentile,
    print_profile,
    run,
    watch_terminal,
)
from floor import floor_run
from floor import report as report_floor
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from hades.adapters.nats.connection import connect
from hades.core.codec import encode_event
from hades.core.spec import JobSpec, Step

JOB = {"name": "noop", "steps": [{"id": 1, "name": "noop", "image": "busybox", "script": "true"}]}
WARM_UP = 32
RAW_CHAINS = 32


class Traffic:
    """Counts what every process asks of the server, by kind, from plain subscriptions to the request subjects
    (a NATS subscriber sees a copy of every publish): JetStream API calls, acks, appends, log batches, KV puts."""

    SUBJECTS = ("$JS.API.>", "$JS.ACK.>", "hades.>", "$KV.>")

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.on = False

    async def on_msg(self, msg: Msg) -> None:
        if self.on:
            self.counts[_kind(msg.subject, msg.data)] += 1


def _kind(subject: str, data: bytes) -> str:
    tokens = subject.split(".")
    if subject.startswith("$JS.API.DIRECT.GET."):
        return f"JS direct get {tokens[4]}" + (" (last by subject)" if len(tokens) > 5 else " (by seq/next)")
    if subject.startswith("$JS.API.CONSUMER.MSG.NEXT."):
        return f"JS pull request {tokens[5]}/{tokens[6]}"
    if subject.startswith("$JS.API.CONSUMER."):
        return f"JS consumer {tokens[3].lower()} {tokens[4] if len(tokens) > 4 else ''}"
    if subject.startswith("$JS.API."):
        return "JS " + " ".join(tokens[2:4]).lower() + (f" {tokens[4]}" if len(tokens) > 4 else "")
    if subject.startswith("$JS.ACK."):
        what = {b"+WPI": "in-progress", b"-NAK": "nak", b"+TERM": "term"}.get(data[:5].split(b" ")[0], "ack")
        return f"JS {what} {tokens[2]}/{tokens[3]}"
    if subject.startswith("hades.events."):
        return f"append {'.'.join(tokens[3:4])}"
    if subject.startswith("hades.logs."):
        return "log batch publish"
    if subject.startswith("$KV."):
        return f"KV put {tokens[1]}"
    return subject


async def submit_all(api: str, jobs: int, clients: int) -> tuple[dict[str, float], list[float], float]:
    """POST /build ``jobs`` times from ``clients`` concurrent clients: (job id → POST start, POST seconds, began)."""
    submitted: dict[str, float] = {}
    post_seconds: list[float] = []
    remaining = iter(range(jobs))

    async def client(session: aiohttp.ClientSession) -> None:
        for _ in remaining:
            began = time.perf_counter()
            async with session.post(f"{api}/build", json=JOB) as response:
                if response.status != 200:
                    raise SystemExit(f"POST /build answered {response.status}: {await response.text()}")
                job_id = (await response.json())["job_id"]
            post_seconds.append(time.perf_counter() - began)
            submitted[job_id] = began

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        began = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
    return submitted, post_seconds, began


async def solo(api: str, count: int, watch: Watch) -> tuple[list[float], dict[str, float]]:
    """Submit→terminal of jobs sent one at a time (no queue in front of them): the path's own latency, and the
    median gap between each pair of consecutive events (from their ``at`` stamps)."""
    latencies = []
    gaps: dict[str, list[float]] = collections.defaultdict(list)
    async with aiohttp.ClientSession() as session:
        for _ in range(count):
            began = time.perf_counter()
            async with session.post(f"{api}/build", json=JOB) as response:
                job_id = (await response.json())["job_id"]
            await watch.until([job_id], 60)
            latencies.append(watch.ended[job_id] - began)
            async with session.get(f"{api}/jobs/{job_id}/events") as response:
                events = (await response.json())["events"]
            for before, after in itertools.pairwise(events):
                span = _stamp(after["at"]) - _stamp(before["at"])
                gaps[f"{before['type']} → {after['type']}"].append(span)
    return latencies, {name: round(statistics.median(spans) * 1000, 2) for name, spans in gaps.items()}


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def events_per_job(api: str, job_id: str) -> tuple[int, list[str]]:
    async with aiohttp.ClientSession() as session, session.get(f"{api}/jobs/{job_id}/events") as response:
        events = (await response.json())["events"]
    return len(events), [event["type"] for event in events]


def start_roles(group: Fleet, mode: str, concurrency: int, executors: int) -> None:
    if mode == "up":
        group.start("up", CONCURRENCY=str(concurrency * executors))
    else:
        group.start("api")
        group.start("scheduler")
        group.start("notifier")
        for number in range(executors):
            group.start("executor", f"executor-{number + 1}", CONCURRENCY=str(concurrency))
    group.wait_api()


async def hades_run(args: argparse.Namespace, mode: str, loop: str, workdir: Path) -> dict[str, Any]:
    """Part 1 for one arrangement of roles on one event loop."""
    server = await nats_with_topology(workdir / "nats")
    env = {"HADES_EXECUTOR": "process", "HADES_PROCESS_WORKSPACES": str(workdir / "ws"), "HADES_SNAPSHOT_SECONDS": "0"}
    try:
        with fleet(server.url, workdir / "hades", loop, **env) as group:
            start_roles(group, mode, args.concurrency, args.executors)
            names = [role.name for role in group.roles]
            nc, watch = await watch_terminal(server.url)
            traffic = Traffic()
            if args.traffic:
                for subject in Traffic.SUBJECTS:
                    await nc.subscribe(subject, cb=traffic.on_msg)
            warm, _, _ = await submit_all(group.api_url, WARM_UP, args.clients)
            await watch.until(list(warm), 120)
            count, kinds = await events_per_job(group.api_url, next(iter(warm)))
            alone, gaps = await solo(group.api_url, args.solo, watch)
            profiler = Profiler(Path(args.profile) / f"{mode}-{loop}" if args.profile else None)
            for role in group.roles:
                profiler.start(role.name, role.process.pid)
            pids = {role.name: role.process.pid for role in group.roles}
            meter = CpuMeter({**pids, "nats-server": server.process.pid, "bench (clients)": os.getpid()})
            meter.start()
            traffic.on = True
            submitted, posts, began = await submit_all(group.api_url, args.jobs, args.clients)
            submit_seconds = time.perf_counter() - began
            await watch.until(list(submitted), 600)
            cpu = meter.stop()
            traffic.on = False
            profiles = profiler.stop()
            await nc.close()
    finally:
        server.stop()
    latencies = [watch.ended[job_id] - at for job_id, at in submitted.items()]
    stages = _stages(submitted, watch)
    elapsed = max(watch.ended[job_id] for job_id in submitted) - began
    succeeded = sum(watch.kinds[job_id] == "succeeded" for job_id in submitted)
    rate = args.jobs / elapsed
    return {
        "mode": mode,
        "loop": loop,
        "processes": names,
        "jobs": args.jobs,
        "succeeded": succeeded,
        "seconds": round(elapsed, 3),
        "submit_seconds": round(submit_seconds, 3),
        "jobs_per_s": round(rate, 1),
        "post_p50_ms": round(statistics.median(posts) * 1000, 2),
        "latency_p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
        "latency_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "solo_p50_ms": round(statistics.median(alone) * 1000, 1) if alone else None,
        "solo_gaps_ms": gaps,
        "stages_p50_ms": stages,
        "events_per_job": count,
        "event_kinds": kinds,
        "events_per_s": round(rate * count, 1),
        "cpu": cpu,
        "traffic_per_job": {kind: round(n / args.jobs, 2) for kind, n in traffic.counts.most_common()},
        "load_avg": os.getloadavg()[0],
        "profiles": profiles,
    }


def _stages(submitted: dict[str, float], watch: Watch) -> dict[str, float]:
    """Median time of the burst's jobs from POST to queued, queued to started, started to terminal (ms): where
    the jobs waited."""
    spans: dict[str, list[float]] = collections.defaultdict(list)
    for job_id, began in submitted.items():
        seen = watch.seen.get(job_id, {})
        if "queued" in seen and "started" in seen:
            spans["POST → queued"].append(seen["queued"] - began)
            spans["queued → started"].append(seen["started"] - seen["queued"])
            spans["started → ended"].append(watch.ended[job_id] - seen["started"])
    return {name: round(statistics.median(values) * 1000, 1) for name, values in spans.items()}


def sample_bodies() -> list[bytes]:
    """The encoded events of one real no-op job (the bodies the raw baseline appends)."""
    spec = JobSpec(name="noop", steps=(Step(id=1, name="noop", image="busybox", script="true"),))
    events = finished_job_events(str(uuid.uuid4()), spec, datetime.now(UTC))
    return [encode_event(event) for event in events]


async def raw_run(jobs: int, per_job: int, chains: int, workdir: Path) -> dict[str, Any]:
    """Part 2: awaited-ack appends chained per job by ``chains`` tasks, consumed by one durable pull consumer."""
    server = await nats_with_topology(workdir / "nats-raw")
    try:
        producer, consumer = await connect(server.url), await connect(server.url)
        js = producer.jetstream(timeout=10)
        await js.add_stream(
            StreamConfig(
                name="BENCH_RAW",
                subjects=["bench.raw.>"],
                storage=StorageType.FILE,
                allow_direct=True,
                duplicate_window=120,
            )
        )
        pull = await consumer.jetstream().pull_subscribe(
            "bench.raw.>",
            durable="raw",
            stream="BENCH_RAW",
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=20000, ack_wait=30),
        )
        bodies = sample_bodies()
        total = jobs * per_job
        remaining = iter(range(jobs))

        async def chain() -> None:
            for number in remaining:
                job = f"job{number}"
                last = 0
                for k in range(per_job):
                    headers = {
                        "Nats-Msg-Id": f"{job}:{k}",
                        "Nats-Expected-Last-Subject-Sequence": str(last),
                        "Nats-Expected-Last-Subject-Sequence-Subject": f"bench.raw.{job}.>",
                    }
                    ack = await js.publish(f"bench.raw.{job}.{k}", bodies[k % len(bodies)], headers=headers)
                    last = ack.seq

        async def consume() -> float:
            seen = 0
            while seen < total:
                try:
                    msgs = await pull.fetch(500, timeout=1)
                except TimeoutError:
                    continue
                for msg in msgs:
                    await msg.ack()
                seen += len(msgs)
            return time.perf_counter()

        meter = CpuMeter({"nats-server": server.process.pid, "bench (nats-py)": os.getpid()})
        meter.start()
        began = time.perf_counter()
        consuming = asyncio.create_task(consume())
        await asyncio.gather(*(chain() for _ in range(chains)))
        appended = time.perf_counter()
        consumed = await asyncio.wait_for(consuming, 300)
        cpu = meter.stop()
        await producer.close()
        await consumer.close()
    finally:
        server.stop()
    return {
        "events": total,
        "chains": chains,
        "append_events_per_s": round(total / (appended - began), 1),
        "events_per_s": round(total / (consumed - began), 1),
        "cpu_ms_per_event": {name: round(p["cpu_s"] * 1000 / total, 4) for name, p in cpu["processes"].items()},
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    variants = [(mode, loop) for mode in args.mode.split(",") for loop in args.loop.split(",")]
    with tempfile.TemporaryDirectory(prefix="hades-bench-cp-") as tmp:
        runs = [await hades_run(args, mode, loop, Path(tmp) / f"{mode}-{loop}") for mode, loop in variants]
        per_job = runs[0]["events_per_job"]
        raw = await raw_run(args.jobs, per_job, args.raw_chains, Path(tmp))
        floors = [await floor_run(args.jobs, Path(tmp) / f"floor-{step}", step) for step in (False, True)]
    for result in runs:
        result["ratio"] = round(result["events_per_s"] / raw["events_per_s"], 4)
    for floor in floors:
        floor["ratio"] = round(floor["jobs_per_s"] * per_job / raw["events_per_s"], 4)
    return {"bench": "control_plane", "runs": runs, "raw": raw, "floor": floors, "clients": args.clients}


def report(result: dict[str, Any]) -> None:
    raw = result["raw"]
    first = result["runs"][0]
    print(f"jobs: {first['jobs']} one-step `true` jobs, process executor, {result['clients']} HTTP clients")
    print(f"events per job (GET /jobs/{{id}}/events): {first['events_per_job']}  {' '.join(first['event_kinds'])}")
    print(
        f"raw nats-py: {raw['chains']} chains of awaited-ack appends + 1 pull consumer: "
        f"{raw['events_per_s']:9.0f} events/s end to end  (appends alone {raw['append_events_per_s']:.0f}/s)"
    )
    print(
        "   CPU per event: "
        + ", ".join(f"{name} {ms * 1000:.0f} µs" for name, ms in raw["cpu_ms_per_event"].items())
        + f"  → {sum(raw['cpu_ms_per_event'].values()) * first['events_per_job']:.2f} CPU-ms per "
        f"{first['events_per_job']}-event job"
    )
    for floor in result["floor"]:
        report_floor(floor, first["events_per_job"])
        print(f"   {floor['ratio'] * 100:5.1f}% of raw")
    for run_ in result["runs"]:
        print(
            f"hades [{run_['mode']}, {run_['loop']}: {', '.join(run_['processes'])}]\n"
            f"   {run_['jobs_per_s']:8.1f} jobs/s = {run_['events_per_s']:8.0f} events/s   "
            f"{run_['ratio'] * 100:5.1f}% of raw   submit→terminal p50 {run_['latency_p50_ms']:.1f} ms  "
            f"p99 {run_['latency_p99_ms']:.1f} ms\n"
            + _solo_line(run_)
            + "   where the burst's jobs waited (p50 ms): "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in run_["stages_p50_ms"].items())
            + "\n"
            + f"   POST p50 {run_['post_p50_ms']:.1f} ms, all POSTs took {run_['submit_seconds']:.1f} s;  "
            f"{run_['succeeded']}/{run_['jobs']} succeeded;  load average {run_['load_avg']:.1f}"
        )
        print_cpu(run_["cpu"], run_["jobs"])
        print(_against_floor(run_, result["floor"][-1]))
        if run_["traffic_per_job"]:
            total = sum(run_["traffic_per_job"].values())
            print(f"   requests to the server per job: {total:.1f}")
            for kind, per_job in run_["traffic_per_job"].items():
                print(f"     {per_job:6.2f}  {kind}")
        if run_["profiles"]:
            print_profile(run_["profiles"])


def _against_floor(run_: dict[str, Any], floor: dict[str, Any]) -> str:
    """Hades's CPU per job (roles and server, not the bench's clients) against the floor with a step process."""
    spent = run_["cpu"]["processes"]
    hades = sum(p["cpu_s"] + p["children_cpu_s"] for name, p in spent.items() if not name.startswith("bench"))
    hades_ms, floor_ms = hades * 1000 / run_["jobs"], floor["cpu_ms_per_job_total"]
    return (
        f"   against the floor with a step process: {hades_ms:.2f} / {floor_ms:.2f} CPU-ms per job "
        f"= {hades_ms / floor_ms:.2f}x;  jobs/s {run_['jobs_per_s'] / floor['jobs_per_s']:.2f}x"
    )


def _solo_line(run_: dict[str, Any]) -> str:
    if run_["solo_p50_ms"] is None:
        return ""
    gaps = ", ".join(f"{name} {ms:.1f}" for name, ms in run_["solo_gaps_ms"].items())
    return f"   one job at a time (no queue): submit→terminal p50 {run_['solo_p50_ms']:.1f} ms; median gaps: {gaps}\n"


def print_cpu(cpu: dict[str, Any], jobs: int) -> None:
    """CPU per job of each process over the measured part (the machine has 2 cores: 2 CPU-s per wall second)."""
    total = sum(p["cpu_s"] + p["children_cpu_s"] for p in cpu["processes"].values())
    print(f"   CPU over the measured {cpu['wall_s']:.1f} s: {total:.1f} CPU-s ({total / cpu['wall_s']:.2f} cores busy)")
    for name, spent in cpu["processes"].items():
        kids = spent["children_cpu_s"]
        children = f" + {kids * 1000 / jobs:5.2f} ms in child processes" if kids else ""
        print(f"     {name:<16} {spent['cpu_s'] * 1000 / jobs:6.2f} CPU-ms/job{children}")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--mode", default="split", help="split, up, or both as split,up (the first is the headline)")
    parser.add_argument(
        "--loop", default="uvloop", help="the roles' event loop: uvloop (as `hades` runs), asyncio, or uvloop,asyncio"
    )
    parser.add_argument("--concurrency", type=int, default=16, help="CONCURRENCY per executor process")
    parser.add_argument("--executors", type=int, default=2, help="executor processes (split) or slot multiplier (up)")
    parser.add_argument("--solo", type=int, default=20, help="jobs sent one at a time first, for the bare latency")
    parser.add_argument("--raw-chains", type=int, default=RAW_CHAINS)
    parser.add_argument("--profile", help="py-spy every Hades process during the measured part; raw files here")
    parser.add_argument("--traffic", action="store_true", help="count the server requests per job, by kind")
    parser.add_argument("--json", action="store_true", help="also print one BENCH-JSON line")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    outcome = run(main(arguments))
    report(outcome)
    if arguments.json:
        emit_json(outcome)
