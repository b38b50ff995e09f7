"""Replay rate: events folded into every read model per second, against reading the same stream raw.

Fills a fresh nats-server's HADES_EVENTS with N events of real jobs (submitted, queued, started, two
steps, succeeded: 8 events a job), then in the same run measures
  1. raw: an ordered consumer reading every message, nothing decoded (the floor),
  2. decoded: the same plus decoding each event,
  3. replay: `hades replay`'s path, decoding and folding into the jobs, timing and metrics views.

    .venv/bin/python bench/replay.py [EVENTS]      (default 100000)

Each line also gives this process's CPU time per event (user + system, the nats-server child excluded): on a
loaded machine the rates swing with what else runs, the CPU an event costs much less.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import NatsEventStore, event_subject
from hades.adapters.nats.server import start_nats
from hades.adapters.nats.topology import EVENTS_STREAM, apply, load_topology
from hades.core.codec import decode_event, encode_event
from hades.core.events import Event
from hades.core.lifecycle import (
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
from hades.replay import replay

SPEC = JobSpec(name="bench", steps=(Step(id=1, image="alpine", script="true"), Step(id=2, image="alpine")))


def job_events(now: datetime) -> list[Event]:
    job_id = str(uuid.uuid4())
    commands = [
        QueueJob(),
        StartAttempt(1, "exec-1"),
        StartStep(1, 0, prepare={"volume": 0.002, "images": 0.001}),
        FinishStep(1, 0, 0, phases={"create": 0.1, "start": 0.05, "run": 0.2, "logs": 0.0, "teardown": 0.02}),
        StartStep(1, 1),
        FinishStep(1, 1, 0, phases={"create": 0.1, "start": 0.05, "run": 0.2, "logs": 0.0, "teardown": 0.02}),
    ]
    events = decide(None, SubmitJob(job_id=job_id, spec=SPEC), now)
    state: JobState | None = evolve(None, events[0])
    for command in commands:
        new = decide(state, command, now)
        for event in new:
            state = evolve(state, event)
        events += new
    return events


async def fill(nc_url: str, total: int) -> int:
    """Whole jobs' events until there are at least ``total``; returns how many were written."""
    nc = await connect(nc_url)
    js = nc.jetstream(publish_async_max_pending=4000)
    now = datetime.now(UTC)
    written = 0
    while written < total:
        for event in job_events(now):
            await js.publish_async(event_subject(event), encode_event(event))
            written += 1
        if written % 4000 < 8:
            await js.publish_async_completed()
    await js.publish_async_completed()
    await nc.close()
    return written


async def raw_read(url: str, total: int, decode: bool) -> float:
    """The fastest plain read: an ordered consumer with a callback that only counts (and maybe decodes)."""
    nc = await connect(url)
    js = nc.jetstream()
    seen = 0
    done = asyncio.Event()

    async def count(msg: Msg) -> None:
        nonlocal seen
        if decode:
            decode_event(msg.data)
        seen += 1
        if seen >= total:
            done.set()

    began = time.perf_counter()
    sub = await js.subscribe(
        "hades.events.>",
        stream=EVENTS_STREAM,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
        cb=count,
    )
    await asyncio.wait_for(done.wait(), 300)
    elapsed = time.perf_counter() - began
    await sub.unsubscribe()
    await nc.close()
    return total / elapsed


async def folded(url: str) -> tuple[float, int]:
    nc = await connect(url)
    store = NatsEventStore(nc)
    report = await replay(store, await store.stream_last_seq())
    await nc.close()
    return report.per_second, len(report.views.jobs.jobs)


def cpu_seconds() -> float:
    """This process's CPU time so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def main(total: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hades-bench-replay-") as store:
        server = start_nats(Path(store))
        try:
            nc = await connect(server.url)
            await apply(nc.jetstream(), load_topology())
            await nc.close()
            count = await fill(server.url, total)
            began = cpu_seconds()
            raw = await raw_read(server.url, count, decode=False)
            raw_cpu, began = (cpu_seconds() - began) / count * 1e6, cpu_seconds()
            decoded = await raw_read(server.url, count, decode=True)
            decoded_cpu, began = (cpu_seconds() - began) / count * 1e6, cpu_seconds()
            rate, jobs = await folded(server.url)
            rate_cpu = (cpu_seconds() - began) / count * 1e6
        finally:
            server.stop()
    print(f"events: {count} ({jobs} jobs)")
    print(f"raw ordered-consumer read   {raw:10.0f} events/s {'':14}{raw_cpu:6.1f} cpu-us/event")
    print(
        f"read + decode               {decoded:10.0f} events/s   {decoded / raw:5.2f}x raw"
        f" {decoded_cpu:6.1f} cpu-us/event ({raw_cpu / decoded_cpu:4.2f}x raw)"
    )
    print(
        f"hades replay (fold 3 views) {rate:10.0f} events/s   {rate / raw:5.2f}x raw"
        f" {rate_cpu:6.1f} cpu-us/event ({raw_cpu / rate_cpu:4.2f}x raw)"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
