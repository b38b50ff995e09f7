"""Memory: resident size per finished job of an API process holding N finished jobs in its read models.

One run on a fresh embedded nats-server:
  1. Baseline: ``hades api`` (a subprocess, NATS_URL set, HADES_SNAPSHOT_SECONDS=0) on the empty log; once GET
     /ping answers, its VmRSS (/proc/<pid>/status).
  2. The log is filled with N finished one-step jobs (the examples/hello.json job: submitted, queued, started,
     step_started, step_finished, succeeded; 6 events each, pipelined straight into HADES_EVENTS as
     bench/replay.py does), then the same ``hades api`` is started again: the time until /ping answers is its
     start-up replay; once /jobs/{last id} is found, its VmRSS. Figure: (full − empty) / N bytes per job
     (target ≤ 2 KiB).
  3. A breakdown in this process (tracemalloc, ``--breakdown-jobs`` jobs): the same events, decoded as the API
     decodes them, folded into each read model on its own (jobs, timing with its distributions, metrics) and
     into all of them together (ReadModels, as the API keeps them; shared objects counted once), bytes per job
     each; and the allocation sites that hold the most, per job.

    .venv/bin/python bench/memory.py [--jobs 100000] [--breakdown-jobs 20000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import enum
import gc
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _support import REPO, emit_json, finished_job_events, fleet, nats_with_topology, rss_bytes, run

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import message_id
from hades.core.codec import decode_event, encode_event
from hades.core.ports import Recorded
from hades.core.spec import parse_job_request
from hades.projections.views import ReadModels

HELLO = (REPO / "examples" / "hello.json").read_bytes()


def template() -> tuple[str, list[tuple[str, bytes, str]]]:
    """One finished job's events as (subject, body, msg id), and the job id to substitute."""
    job_id = str(uuid.uuid4())
    events = finished_job_events(job_id, parse_job_request(HELLO), datetime.now(UTC))
    rows = [
        (f"hades.events.{job_id}.{event.subject_token}", encode_event(event), message_id(event)) for event in events
    ]
    return job_id, rows


def jobs(count: int) -> Iterator[tuple[str, list[tuple[str, bytes, str]]]]:
    """``count`` distinct finished jobs: the template with a fresh id each (same length, so a plain replace)."""
    old, rows = template()
    for _ in range(count):
        new = str(uuid.uuid4())
        raw = old.encode(), new.encode()
        yield new, [(s.replace(old, new), b.replace(*raw), m.replace(old, new)) for s, b, m in rows]


async def fill(url: str, count: int) -> tuple[str, int, float]:
    """Append ``count`` jobs; (last job id, events, seconds)."""
    nc = await connect(url)
    js = nc.jetstream(publish_async_max_pending=4000)
    began = time.perf_counter()
    events = 0
    last = ""
    for job_id, rows in jobs(count):
        last = job_id
        for subject, body, msg_id in rows:
            await js.publish_async(subject, body, headers={"Nats-Msg-Id": msg_id})
            events += 1
        if events % 4000 < len(rows):
            await js.publish_async_completed()
    await js.publish_async_completed()
    await nc.close()
    return last, events, time.perf_counter() - began


def api_rss(url: str, workdir: Path, last_job: str | None) -> tuple[int, float]:
    """Start ``hades api``, wait until it answers (and knows ``last_job``), return (VmRSS, seconds to answer)."""
    with fleet(url, workdir, HADES_SNAPSHOT_SECONDS="0") as group:
        began = time.perf_counter()
        role = group.start("api")
        group.wait_api(timeout=600)
        ready = time.perf_counter() - began
        with httpx.Client(base_url=group.api_url, timeout=60) as client:
            probe = last_job or str(uuid.uuid4())
            status = client.get(f"/jobs/{probe}").status_code
            if status != (200 if last_job else 404):
                raise SystemExit(f"GET /jobs/{probe} answered {status}")
            client.get("/jobs/none/status")
        time.sleep(1.0)
        rss = rss_bytes(role.process.pid)
    return rss, ready


def _traced(fold: Callable[[Recorded], None], count: int) -> int:
    """Bytes still traced after folding ``count`` jobs' decoded events with ``fold`` (inputs dropped)."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    seq = 0
    for _, rows in jobs(count):
        for _, body, msg_id in rows:
            seq += 1
            fold(Recorded(seq=seq, event=decode_event(body), msg_id=msg_id))
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before


def breakdown(count: int, top: int = 15) -> dict[str, Any]:
    """Bytes per job held by each read model alone and by all together, and the top allocation sites."""
    tracemalloc.start(4)
    per_view: dict[str, float] = {}
    keep: list[Any] = []
    for name, pick in (
        ("jobs (JobsView)", lambda v: v.jobs.apply),
        ("timing + distributions (TimingView)", lambda v: v.timing.apply),
        ("metrics (MetricsView)", lambda v: v.metrics.apply),
    ):
        views = ReadModels()
        per_view[name] = round(_traced(pick(views), count) / count, 1)
        keep.append(views)
        del views
    keep.clear()
    gc.collect()
    views = ReadModels()
    before = tracemalloc.take_snapshot()
    total = _traced(views.apply, count)
    after = tracemalloc.take_snapshot()
    per_view["all (ReadModels, as the API holds them)"] = round(total / count, 1)
    sites = []
    for stat in [s for s in after.compare_to(before, "lineno") if abs(s.size_diff) >= count][:top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).relative_to(REPO) if frame.filename.startswith(str(REPO)) else frame.filename}"
        sites.append(
            {
                "site": f"{_short(where)}:{frame.lineno}",
                "bytes_per_job": round(stat.size_diff / count, 1),
                "blocks_per_job": round(stat.count_diff / count, 2),
            }
        )
    stacks = []
    for stat in after.compare_to(before, "traceback")[:6]:
        frames = [f"{_short(f.filename)}:{f.lineno}" for f in reversed(stat.traceback)][:6]
        stacks.append({"bytes_per_job": round(stat.size_diff / count, 1), "stack": frames})
    tracemalloc.stop()
    return {
        "jobs": count,
        "bytes_per_job": per_view,
        "top_sites": sites,
        "top_stacks": stacks,
        "kept_objects": kept_objects(),
    }


def kept_objects() -> dict[str, Any]:
    """What each read model keeps for one finished job: the object and each field's own size (sys.getsizeof;
    enums, None, bools and small ints are shared and count 0)."""
    views = ReadModels()
    job_id, rows = next(jobs(1))
    for seq, (_, body, msg_id) in enumerate(rows, start=1):
        views.apply(Recorded(seq=seq, event=decode_event(body), msg_id=msg_id))
    kept = {
        "jobs": views.jobs.jobs.get(job_id),
        "timing": views.timing.jobs.get(job_id),
        "metrics": views.metrics.jobs.get(job_id),
    }
    described: dict[str, Any] = {}
    for view, obj in kept.items():
        if obj is None:
            described[view] = None
            continue
        names = [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
        fields = {}
        for name in names:
            value = getattr(obj, name)
            shared = value is None or isinstance(value, bool | enum.Enum) or (isinstance(value, int) and value < 256)
            fields[name] = (type(value).__name__, 0 if shared else sys.getsizeof(value))
        described[view] = {
            "type": type(obj).__name__,
            "object_bytes": sys.getsizeof(obj),
            "fields": fields,
            "total_bytes": sys.getsizeof(obj) + sum(size for _, size in fields.values()),
        }
    return described


def _short(path: str) -> str:
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hades-bench-memory-") as tmp:
        server = await nats_with_topology(Path(tmp) / "nats")
        try:
            empty, empty_ready = await asyncio.to_thread(api_rss, server.url, Path(tmp) / "empty", None)
            last, events, fill_seconds = await fill(server.url, args.jobs)
            full, full_ready = await asyncio.to_thread(api_rss, server.url, Path(tmp) / "full", last)
        finally:
            server.stop()
    result: dict[str, Any] = {
        "bench": "memory",
        "jobs": args.jobs,
        "events": events,
        "fill_seconds": round(fill_seconds, 2),
        "rss_empty": empty,
        "rss_full": full,
        "bytes_per_job": round((full - empty) / args.jobs, 1),
        "api_ready_empty_s": round(empty_ready, 2),
        "api_ready_full_s": round(full_ready, 2),
    }
    if args.breakdown_jobs:
        result["breakdown"] = breakdown(args.breakdown_jobs)
    return result


def report(result: dict[str, Any]) -> None:
    print(
        f"jobs: {result['jobs']} finished one-step jobs "
        f"({result['events']} events, filled in {result['fill_seconds']} s)"
    )
    print(
        f"hades api, empty log:   VmRSS {result['rss_empty'] / 2**20:8.1f} MiB  "
        f"(answered after {result['api_ready_empty_s']} s)"
    )
    print(
        f"hades api, {result['jobs']} jobs: VmRSS {result['rss_full'] / 2**20:8.1f} MiB  "
        f"(start-up replay: answered after {result['api_ready_full_s']} s)"
    )
    per_job = result["bytes_per_job"]
    print(
        f"resident per finished job: {per_job:8.0f} bytes = {per_job / 1024:.2f} KiB   "
        f"(target ≤ 2 KiB: {per_job / 2048:.2f}x)"
    )
    part = result.get("breakdown")
    if not part:
        return
    print(f"\nbreakdown (tracemalloc, {part['jobs']} jobs folded in this process; Python heap only):")
    for name, size in part["bytes_per_job"].items():
        print(f"  {size:8.0f} B/job  {name}")
    print("  top allocation sites still held (bytes per job, blocks per job):")
    for site in part["top_sites"]:
        print(f"  {site['bytes_per_job']:8.0f} B  {site['blocks_per_job']:6.2f}  {site['site']}")
    print("  top allocation stacks (innermost first):")
    for stack in part["top_stacks"]:
        print(f"  {stack['bytes_per_job']:8.0f} B  " + " < ".join(stack["stack"]))
    print("  what each view keeps for one finished job (sys.getsizeof; shared values count 0):")
    for view, kept in part["kept_objects"].items():
        if kept is None:
            print(f"  {view}: nothing")
            continue
        fields = ", ".join(f"{name} {kind} {size}" for name, (kind, size) in kept["fields"].items() if size)
        print(f"  {view}: {kept['type']} {kept['object_bytes']} B + {fields}  = {kept['total_bytes']} B")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--breakdown-jobs", type=int, default=20_000, help="0 to skip the in-process breakdown")
    parser.add_argument("--json", action="store_true", help="also print one BENCH-JSON line")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    outcome = run(main(arguments))
    report(outcome)
    if arguments.json:
        emit_json(outcome)
