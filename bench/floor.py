"""The floor under the control plane: one Hades job's NATS traffic, made by bare nats-py processes doing nothing else.

How fast could any Python implementation of Hades's event flow go on this machine? This bench sends exactly the
messages a one-step no-op job causes (as ``control_plane.py --traffic`` counts them) through the real topology
(streams.yaml applied, the real subjects and durable consumers), from role processes that do nothing but the
messaging: no HTTP, no pydantic, no state folding, no shell for the step, no logging.

  submitter (this process, 16 tasks) append ``submitted`` (an awaited, chained append, as the API makes)
  follower ×2 (the API's and the scheduler's projections) an ordered consumer on every event; json.loads each
  scheduler  the ``scheduler`` consumer: append ``queued.high`` chained after the message, ack; the ``pipelines``
             consumer: ack each terminal event
  executor ×2 (16 at a time each) the ``executor-high`` consumer: one direct get of the job's ``submitted``; then
             ``started``, ``step_started`` (with the preparation), one log batch, ``step_finished``, ``succeeded``, each
             awaited and chained after the one before; ack
  notifier   the ``notifier`` and ``webhooks`` consumers: ack each terminal event

Figures: jobs/s (first append → last terminal event seen), and the CPU each process spent per job. Against the
raw figure of ``control_plane.py`` (the same events appended and consumed with nothing else), floor ÷ raw is the
most any implementation of this message flow can reach there; Hades ÷ floor is how much of the rest is Hades.

    .venv/bin/python bench/floor.py [--jobs 2000]           (a role: floor.py --role NAME --url URL)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from _support import CpuMeter, nats_with_topology, run, watch_terminal
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

from hades.adapters.nats.connection import connect
from hades.adapters.nats.topology import EVENTS_STREAM, LOGS_STREAM
from hades.adapters.process.step_process import StepProcess

ROLES = ("follower-api", "follower-scheduler", "scheduler", "executor-1", "executor-2", "notifier")
SUBMITTERS = 16
SLOTS = 16  # per executor process, as CONCURRENCY in control_plane.py
BODY = json.dumps({"type": "x", "job_id": "0" * 36, "at": "2026-01-01T00:00:00+00:00", "pad": "x" * 200}).encode()
LOG_BODY = json.dumps({"jobID": "0" * 36, "stepID": 1, "logs": []}).encode()


def _headers(job: str, kind: str, after: int) -> dict[str, str]:
    return {
        "Nats-Msg-Id": f"{job}:{kind}",
        "Nats-Expected-Last-Subject-Sequence": str(after),
        "Nats-Expected-Last-Subject-Sequence-Subject": f"hades.events.{job}.>",
    }


async def append(js: JetStreamContext, job: str, kind: str, after: int) -> int:
    """One awaited append chained after ``after``, as Hades appends; its sequence."""
    ack = await js.publish(f"hades.events.{job}.{kind}", BODY, headers=_headers(job, kind, after))
    return ack.seq


Handler = Callable[[Msg], Coroutine[Any, Any, None]]


async def _pull(js: JetStreamContext, durable: str, handle: Handler, slots: int = 200) -> None:
    """Fetch from a durable consumer and handle each message in its own task, at most ``slots`` at a time."""
    sub = await js.pull_subscribe_bind(durable, stream=EVENTS_STREAM)
    busy = 0
    room = asyncio.Event()

    async def one(msg: Msg) -> None:
        nonlocal busy
        try:
            await handle(msg)
        finally:
            busy -= 1
            room.set()

    while True:
        while busy >= slots:
            room.clear()
            await room.wait()
        try:
            msgs = await sub.fetch(min(slots - busy, 100), timeout=1)
        except TimeoutError:
            continue
        busy += len(msgs)
        for msg in msgs:
            asyncio.create_task(one(msg))  # noqa: RUF006 - the role runs until it is killed


async def _ack(msg: Msg) -> None:
    await msg.ack()


async def _step() -> None:
    """A no-op step's process, started and reaped as the process executor does (vfork, own session, pipes)."""
    process = await StepProcess.start(["/bin/sh", "-c", "true"], _WORKDIR, {"PATH": os.environ["PATH"]})
    try:
        await process.exited()
    finally:
        process.close()


_WORKDIR = tempfile.gettempdir()


async def _follower(js: JetStreamContext, step: bool) -> list[Coroutine[Any, Any, None]]:
    async def fold(msg: Msg) -> None:
        json.loads(msg.data)

    config = ConsumerConfig(deliver_policy=DeliverPolicy.NEW)
    await js.subscribe("hades.events.>", stream=EVENTS_STREAM, ordered_consumer=True, config=config, cb=fold)
    return []


async def _scheduler(js: JetStreamContext, step: bool) -> list[Coroutine[Any, Any, None]]:
    async def queue(msg: Msg) -> None:
        job = msg.subject.split(".")[2]
        await append(js, job, "queued.high", msg.metadata.sequence.stream)
        await msg.ack()

    return [_pull(js, "scheduler", queue), _pull(js, "pipelines", _ack)]


async def _executor(js: JetStreamContext, step: bool) -> list[Coroutine[Any, Any, None]]:
    async def execute(msg: Msg) -> None:
        job = msg.subject.split(".")[2]
        await js.get_last_msg(EVENTS_STREAM, f"hades.events.{job}.submitted", direct=True)
        seq = msg.metadata.sequence.stream
        for kind in ("started", "step_started"):  # the first step_started carries the preparation
            seq = await append(js, job, kind, seq)
        if step:
            await _step()
        await js.publish(f"hades.logs.{job}", LOG_BODY, stream=LOGS_STREAM)
        for kind in ("step_finished", "succeeded"):
            seq = await append(js, job, kind, seq)
        await msg.ack()

    return [_pull(js, "executor-high", execute, SLOTS)]


async def _notifier(js: JetStreamContext, step: bool) -> list[Coroutine[Any, Any, None]]:
    return [_pull(js, "notifier", _ack), _pull(js, "webhooks", _ack)]


async def role(name: str, url: str, step: bool) -> None:
    """Run one role until killed."""
    nc: Client = await connect(url)
    make = {"follower": _follower, "scheduler": _scheduler, "executor": _executor, "notifier": _notifier}
    loops = await make[name.split("-")[0]](nc.jetstream(timeout=10), step)
    running = [asyncio.create_task(loop) for loop in loops]
    print("ready", flush=True)
    await asyncio.gather(*running, asyncio.Event().wait())  # a follower has only its subscription's callback


def _start_roles(url: str, step: bool) -> dict[str, subprocess.Popen[bytes]]:
    """Every role's process, once each has said it is ready."""
    processes: dict[str, subprocess.Popen[bytes]] = {}
    for name in ROLES:
        argv = [sys.executable, __file__, "--role", name, "--url", url, *(["--step"] if step else [])]
        processes[name] = subprocess.Popen(argv, stdout=subprocess.PIPE)
    for name, process in processes.items():
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            raise SystemExit(f"floor role {name} did not start")
    return processes


async def floor_run(jobs: int, workdir: Path, step: bool) -> dict[str, Any]:
    """The floor's figures on a fresh nats-server of its own; with ``step``, each job's step runs ``sh -c true``."""
    server = await nats_with_topology(workdir / "nats-floor")
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        processes = _start_roles(server.url, step)
        watcher, watch = await watch_terminal(server.url)
        nc = await connect(server.url)
        js = nc.jetstream(timeout=10)
        ids = [uuid.uuid4().hex for _ in range(jobs)]
        pending = iter(ids)

        async def submit() -> None:
            for job in pending:
                await append(js, job, "submitted", 0)

        meter = CpuMeter({**{n: p.pid for n, p in processes.items()}, "nats-server": server.process.pid})
        meter.start()
        began = time.perf_counter()
        await asyncio.gather(*(submit() for _ in range(SUBMITTERS)))
        await watch.until(ids, timeout=300)
        last = max(watch.ended.values())
        cpu = meter.stop()
        await nc.close()
        await watcher.close()
    finally:
        for process in processes.values():
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
        server.stop()
    spent = cpu["processes"]
    per_job = {name: round((p["cpu_s"] + p["children_cpu_s"]) * 1000 / jobs, 3) for name, p in spent.items()}
    return {
        "step": step,
        "jobs": jobs,
        "jobs_per_s": round(jobs / (last - began), 1),
        "cpu_ms_per_job": per_job,
        "cpu_ms_per_job_total": round(sum(per_job.values()), 3),
        "cores_busy": round(sum(per_job.values()) * jobs / 1000 / cpu["wall_s"], 2),
    }


def report(result: dict[str, Any], events_per_job: int = 7) -> None:
    what = "the same messages per job, and `sh -c true`" if result["step"] else "the same messages per job"
    print(
        f"floor (bare nats-py roles, {what}): {result['jobs_per_s']:8.1f} jobs/s = "
        f"{result['jobs_per_s'] * events_per_job:8.0f} events/s;  {result['cpu_ms_per_job_total']:.2f} CPU-ms/job "
        f"({result['cores_busy']:.2f} cores busy)"
    )
    print("   " + ", ".join(f"{name} {ms:.2f}" for name, ms in result["cpu_ms_per_job"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--role", choices=ROLES, help=argparse.SUPPRESS)
    parser.add_argument("--step", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        run(role(args.role, args.url, args.step))
        return
    with tempfile.TemporaryDirectory(prefix="hades-bench-floor-") as tmp:
        for step in (False, True):
            report(run(floor_run(args.jobs, Path(tmp) / str(step), step)))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
