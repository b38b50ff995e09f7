"""Log throughput: a step that prints 1,000,000 lines, end to end into the log view, against the engine's own rate.

For each executor asked (``--executor docker,process``; Docker is the one the issue names), one run on a fresh
embedded nats-server with one ``hades up``-like process (every role, uvloop as ``hades`` runs) against it:
  1. Hades: POST /build a one-step job whose script is ``seq 1 N``, and stamp its terminal event as an ordered
     consumer sees it. A job ends only after its step's last log batch is stored (``step_finished`` records the
     batch's sequence), so POST → terminal is "every line is in the log store"; the lines are then counted
     straight from HADES_LOGS (a raw ordered consumer over the job's subject) to prove it. Figure: lines/s.
     Also timed: GET /jobs/{id}/logs returning all N lines (the log view over HTTP).
  2. The baseline, in the same run: the same output read straight from the engine.
     docker: the same image and command through aiodocker: create, start, follow the stdout log stream (with
             timestamps, as Hades asks for it) counting lines, wait, delete; and `docker run --rm` to /dev/null.
     process: ``sh -c 'seq 1 N'`` as an asyncio subprocess, its stdout pipe read by Python counting lines.
  Ratio = Hades lines/s ÷ baseline lines/s (target ≥ 50%).

Needs Docker and the image hades-test/busybox:1 (scripts/busybox-image.sh hades-test/busybox:1) for docker.

    .venv/bin/python bench/logs.py [--lines 1000000] [--executor docker,process] [--profile DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
from _support import CpuMeter, Profiler, emit_json, fleet, nats_with_topology, print_profile, run, watch_terminal
from nats.js.api import ConsumerConfig, DeliverPolicy

from hades.adapters.nats.connection import connect
from hades.adapters.nats.topology import LOGS_STREAM

IMAGE = "hades-test/busybox:1"


def job(lines: int) -> dict[str, Any]:
    return {"name": "logs", "steps": [{"id": 1, "name": "seq", "image": IMAGE, "script": f"seq 1 {lines}"}]}


async def stored_lines(nats_url: str, job_id: str) -> tuple[int, int]:
    """(lines, batches) stored on hades.logs.<job_id>, read raw (no pydantic) by an ordered consumer."""
    nc = await connect(nats_url)
    js = nc.jetstream()
    subject = f"hades.logs.{job_id}"
    last = (await js.get_last_msg(LOGS_STREAM, subject, direct=True)).seq
    lines = batches = 0
    done = asyncio.Event()

    async def count(msg: Any) -> None:
        nonlocal lines, batches
        batches += 1
        lines += len(json.loads(msg.data).get("logs") or [])
        if msg.metadata.sequence.stream >= last:
            done.set()

    config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
    sub = await js.subscribe(subject, stream=LOGS_STREAM, ordered_consumer=True, config=config, cb=count)
    await asyncio.wait_for(done.wait(), 300)
    await sub.unsubscribe()
    await nc.close()
    return lines, batches


ENDED_AS = {"succeeded": "Succeeded", "failed": "Failed", "stopped": "Stopped"}


async def read_view(api: str, job_id: str) -> tuple[int, float, int]:
    """(lines, seconds, bytes) of GET /jobs/{id}/logs."""
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        began = time.perf_counter()
        async with session.get(f"{api}/jobs/{job_id}/logs") as response:
            body = await response.read()
        seconds = time.perf_counter() - began
    logs = json.loads(body)["logs"]
    return sum(len(log["logs"] or []) for log in logs), seconds, len(body)


async def hades_run(args: argparse.Namespace, executor: str, workdir: Path) -> dict[str, Any]:
    server = await nats_with_topology(workdir / "nats")
    env = {"HADES_EXECUTOR": executor, "HADES_PROCESS_WORKSPACES": str(workdir / "ws"), "HADES_SNAPSHOT_SECONDS": "0"}
    try:
        with fleet(server.url, workdir / "hades", **env) as group:
            role = group.start("up")
            group.wait_api()
            nc, watch = await watch_terminal(server.url)
            async with aiohttp.ClientSession() as session:
                async with session.post(f"{group.api_url}/build", json=job(10)) as response:  # warm-up
                    warm = (await response.json())["job_id"]
                await watch.until([warm], 120)
                profiler = Profiler(Path(args.profile) / executor if args.profile else None)
                profiler.start("hades-up", role.process.pid)
                meter = CpuMeter({"hades up": role.process.pid, "nats-server": server.process.pid})
                meter.start()
                began = time.perf_counter()
                async with session.post(f"{group.api_url}/build", json=job(args.lines)) as response:
                    job_id = (await response.json())["job_id"]
                await watch.until([job_id], 600)
                seconds = watch.ended[job_id] - began
                cpu = meter.stop()
                profiles = profiler.stop()
                async with session.get(f"{group.api_url}/jobs/{job_id}") as response:
                    detail = await response.json()
            await nc.close()
            lines, batches = await stored_lines(server.url, job_id)
            view_lines, view_seconds, view_bytes = await read_view(group.api_url, job_id)
    finally:
        server.stop()
    return {
        # the terminal event itself says how the job ended: the API's read model may not have folded it yet
        "status": ENDED_AS[watch.kinds[job_id]],
        "reason": detail.get("reason"),
        "steps": detail.get("steps"),
        "seconds": round(seconds, 3),
        "lines_stored": lines,
        "batches": batches,
        "complete": lines == args.lines,
        "lines_per_s": round(lines / seconds, 1),
        "timing": detail.get("timing"),
        "view_lines": view_lines,
        "view_seconds": round(view_seconds, 3),
        "view_mb": round(view_bytes / 1e6, 1),
        "cpu": cpu,
        "profiles": profiles,
    }


async def engine_read(lines: int) -> tuple[int, float]:
    """The engine's own rate: create and start the container, then read its log endpoint (follow, timestamps, as
    Hades asks for it) in 64 KiB chunks straight off the socket, counting newlines; wait; delete."""
    async with aiodocker.Docker() as docker:
        began = time.perf_counter()
        container = await docker.containers.create({"Image": IMAGE, "Cmd": ["sh", "-c", f"seq 1 {lines}"]})
        await container.start()
        count = 0
        connector = aiohttp.UnixConnector(path="/var/run/docker.sock")
        async with aiohttp.ClientSession(connector=connector) as session:
            query = "follow=1&stdout=1&stderr=1&timestamps=1"
            async with session.get(f"http://docker/containers/{container.id}/logs?{query}") as response:
                async for chunk in response.content.iter_chunked(65536):
                    count += chunk.count(b"\n")
        await container.wait()
        await container.delete(force=True)
        return count, time.perf_counter() - began


async def docker_baseline(lines: int) -> dict[str, Any]:
    """The same container read straight from the engine: raw (the headline), through aiodocker's log iterator
    (one frame per line, as Hades reads it), and by ``docker run`` to /dev/null."""
    raw_lines, raw_seconds = await engine_read(lines)
    async with aiodocker.Docker() as docker:
        began = time.perf_counter()
        container = await docker.containers.create(
            {"Image": IMAGE, "Cmd": ["sh", "-c", f"seq 1 {lines}"], "AttachStdout": False}
        )
        stream = container.log(stdout=True, follow=True, timestamps=True)
        await container.start()
        count = 0
        buffer = ""
        async for chunk in stream:
            buffer += chunk
            count += buffer.count("\n")
            buffer = buffer[buffer.rfind("\n") + 1 :]
        await container.wait()
        await container.delete(force=True)
        api_seconds = time.perf_counter() - began
    began = time.perf_counter()
    cli = await asyncio.create_subprocess_exec(
        "docker", "run", "--rm", IMAGE, "sh", "-c", f"seq 1 {lines}", stdout=subprocess.DEVNULL
    )
    if await cli.wait() != 0:
        raise SystemExit("docker run failed")
    cli_seconds = time.perf_counter() - began
    return {
        "how": "engine log endpoint read raw (follow, timestamps), container create/start/wait/delete included",
        "lines_seen": raw_lines,
        "seconds": round(raw_seconds, 3),
        "lines_per_s": round(lines / raw_seconds, 1),
        "aiodocker_lines_seen": count,
        "aiodocker_seconds": round(api_seconds, 3),
        "aiodocker_lines_per_s": round(lines / api_seconds, 1),
        "docker_run_seconds": round(cli_seconds, 3),
        "docker_run_lines_per_s": round(lines / cli_seconds, 1),
    }


async def process_baseline(lines: int) -> dict[str, Any]:
    """``sh -c 'seq 1 N'`` writing to a pipe that Python reads, counting lines."""
    began = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", f"seq 1 {lines}", stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
    )
    assert process.stdout is not None
    count = 0
    while chunk := await process.stdout.read(65536):
        count += chunk.count(b"\n")
    await process.wait()
    seconds = time.perf_counter() - began
    return {
        "how": "sh -c 'seq 1 N' piped to asyncio, lines counted",
        "lines_seen": count,
        "seconds": round(seconds, 3),
        "lines_per_s": round(lines / seconds, 1),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    results = {}
    with tempfile.TemporaryDirectory(prefix="hades-bench-logs-") as tmp:
        for executor in args.executor.split(","):
            baseline = await (docker_baseline if executor == "docker" else process_baseline)(args.lines)
            hades = await hades_run(args, executor, Path(tmp) / executor)
            hades["ratio"] = round(hades["lines_per_s"] / baseline["lines_per_s"], 4)
            results[executor] = {"hades": hades, "baseline": baseline}
    return {"bench": "logs", "lines": args.lines, "executors": results}


def report(result: dict[str, Any]) -> None:
    print(f"lines: {result['lines']} (`seq 1 {result['lines']}` in one step)")
    for executor, part in result["executors"].items():
        base, hades = part["baseline"], part["hades"]
        print(f"[{executor}]")
        print(f"  engine baseline: {base['how']}: {base['seconds']:.2f} s  {base['lines_per_s']:10.0f} lines/s")
        if "docker_run_seconds" in base:
            print(
                f"  aiodocker container.log(follow, timestamps) iterated: {base['aiodocker_seconds']:.2f} s  "
                f"{base['aiodocker_lines_per_s']:10.0f} lines/s"
            )
            print(
                f"  docker run --rm > /dev/null: {base['docker_run_seconds']:.2f} s  "
                f"{base['docker_run_lines_per_s']:10.0f} lines/s"
            )
        print(
            f"  hades POST → {hades['status']}, its lines stored: {hades['seconds']:.2f} s  "
            f"{hades['lines_per_s']:10.0f} lines/s   {hades['ratio'] * 100:5.1f}% of the engine"
        )
        print(f"  stored: {hades['lines_stored']} lines in {hades['batches']} batches")
        phases = (hades.get("timing") or {}).get("phases") or {}
        shown = {name: seconds for name, seconds in phases.items() if seconds}
        print("  the job's phases (s): " + ", ".join(f"{name} {seconds:.3f}" for name, seconds in shown.items()))
        if hades["status"] != "Succeeded":
            print(f"  !! the job {hades['status']}: {hades['reason']}; steps: {hades['steps']}")
        if not hades["complete"]:
            print(
                f"  !! INCOMPLETE: {result['lines'] - hades['lines_stored']} of {result['lines']} lines never reached "
                f"the log store although the job {hades['status']} (lines/s counts stored lines only)"
            )
        print(
            f"  GET /jobs/{{id}}/logs: {hades['view_lines']} lines, {hades['view_mb']} MB "
            f"in {hades['view_seconds']:.2f} s  ({hades['view_lines'] / max(hades['view_seconds'], 1e-9):.0f} lines/s)"
        )
        cpu = hades["cpu"]
        print(
            "  CPU during the job: "
            + ", ".join(f"{name} {p['cpu_s']:.1f} s" for name, p in cpu["processes"].items())
            + f" over {cpu['wall_s']:.1f} s"
        )
        if hades["profiles"]:
            print_profile(hades["profiles"])


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--executor", default="docker,process", help="docker, process, or both as docker,process")
    parser.add_argument("--profile", help="py-spy the Hades process during the job; raw files here")
    parser.add_argument("--json", action="store_true", help="also print one BENCH-JSON line")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    outcome = run(main(arguments))
    report(outcome)
    if arguments.json:
        emit_json(outcome)
