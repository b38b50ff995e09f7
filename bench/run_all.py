"""Run every bench (sizes that keep the whole under 10 minutes on 2 cores), print and write bench/RESULTS.md.

Each bench runs as its own subprocess. The benches written for this table print one ``BENCH-JSON {...}`` line
with ``--json``; for the others (hello_latency, replay, webhook_latency, dashboard) the figures are read from
their text output. Every bench's full output follows the table in RESULTS.md. A bench that fails or times out
gets a row saying so; the others still run.

    .venv/bin/python bench/run_all.py [--only control_plane,logs] [--quick] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PYTHON = sys.executable


@dataclass
class Bench:
    name: str
    args: list[str]
    timeout: float
    quick: list[str] = field(default_factory=list)
    json: bool = False  # prints a BENCH-JSON line with --json


#: In run order; the sizes are the issue's where the time allows (budget ≈ 8 of the 10 minutes on 2 cores).
BENCHES = [
    Bench("control_plane", ["--jobs", "2000", "--solo", "20"], 240, ["--jobs", "300"], json=True),
    Bench("celery_baseline", ["--tasks", "2000", "--no-hades"], 120, ["--tasks", "300", "--no-hades"], json=True),
    Bench("hello_latency", ["10"], 120, ["3"]),
    Bench("replay", ["100000"], 90, ["20000"]),
    Bench("logs", ["--lines", "1000000"], 180, ["--lines", "100000"], json=True),
    Bench(
        "memory",
        ["--jobs", "100000", "--breakdown-jobs", "5000"],
        240,
        ["--jobs", "10000", "--breakdown-jobs", "2000"],
        json=True,
    ),
    Bench("webhook_latency", ["100"], 90, ["20"]),
    Bench("dashboard", ["--jobs", "10000", "--clients", "200", "--events", "200"], 180, ["--jobs", "2000"]),
]


@dataclass
class Row:
    bench: str
    figure: str
    baseline: str
    ratio: str
    target: str
    met: str


@dataclass
class Outcome:
    name: str
    seconds: float
    output: str
    ok: bool
    data: dict[str, Any] | None = None


def run_bench(bench: Bench, quick: bool) -> Outcome:
    args = (bench.quick if quick and bench.quick else bench.args) + (["--json"] if bench.json else [])
    command = [PYTHON, str(BENCH / f"{bench.name}.py"), *args]
    print(f"$ {' '.join([Path(PYTHON).name, f'bench/{bench.name}.py', *args])}", flush=True)
    began = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=bench.timeout, check=False)
        output, ok = done.stdout + (done.stderr[-3000:] if done.returncode else ""), done.returncode == 0
    except subprocess.TimeoutExpired as expired:
        partial = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        output, ok = f"{partial}\n[timed out after {bench.timeout:.0f} s]", False
    seconds = time.perf_counter() - began
    data = None
    for line in output.splitlines():
        if line.startswith("BENCH-JSON "):
            data = json.loads(line.removeprefix("BENCH-JSON "))
    text = "\n".join(line for line in output.splitlines() if not line.startswith("BENCH-JSON "))
    print(text, flush=True)
    print(f"[{bench.name}: {'ok' if ok else 'FAILED'} in {seconds:.0f} s]\n", flush=True)
    return Outcome(bench.name, seconds, text, ok, data)


def _yes(condition: bool) -> str:
    return "yes" if condition else "**no**"


def _search(pattern: str, text: str) -> re.Match[str] | None:
    return re.search(pattern, text, re.MULTILINE)


# -- rows per bench -------------------------------------------------------------------------------------------------


def rows_control_plane(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    assert out.data is not None
    raw, first = out.data["raw"], out.data["runs"][0]
    rows = [
        Row(
            "control plane (process executor, HTTP)",
            f"{first['jobs_per_s']:.1f} jobs/s = {first['events_per_s']:.0f} events/s "
            f"({first['events_per_job']}/job); submit→terminal p50 {first['latency_p50_ms']:.0f} ms, "
            f"p99 {first['latency_p99_ms']:.0f} ms ({first['jobs']} jobs, {out.data['clients']} clients; "
            f"one at a time p50 {first['solo_p50_ms'] or 0:.0f} ms)",
            f"raw nats-py awaited appends + pull consumer: {raw['events_per_s']:.0f} events/s",
            f"{first['ratio'] * 100:.1f}%",
            "≥ 50% of raw",
            _yes(first["ratio"] >= 0.5),
        )
    ]
    for floor in out.data.get("floor", []):
        what = "bare nats-py roles, the same messages per job" + (", and `sh -c true`" if floor["step"] else "")
        rows.append(
            Row(
                f"floor ({what})",
                f"{floor['jobs_per_s']:.1f} jobs/s, {floor['cpu_ms_per_job_total']:.2f} CPU-ms/job",
                f"raw: {raw['events_per_s']:.0f} events/s",
                f"{floor['ratio'] * 100:.1f}%",
                "(what any implementation could reach)",
                "",
            )
        )
    celery = all_.get("celery_baseline")
    if celery is not None and celery.data:
        for item in celery.data["runs"]:
            ratio = first["jobs_per_s"] / item["tasks_per_s"]
            the_target = item.get("task", "no-op") == "no-op" and item.get("durable", True)
            rows.append(
                Row(
                    "control plane vs Celery" + _celery_context(item),
                    f"hades {first['jobs_per_s']:.1f} jobs/s",
                    f"Celery {celery.data['celery']} + Redis ({item['redis']}), prefork c={item['concurrency']}: "
                    f"{item['tasks_per_s']:.1f} tasks/s",
                    f"{ratio:.2f}x",
                    "ahead (> 1x) while durable" if the_target else "(context)",
                    _yes(ratio > 1) if the_target else "",
                )
            )
            stepped = [floor for floor in out.data.get("floor", []) if floor["step"]]
            if the_target and stepped:  # how near the target any design that runs a process per step can come
                floor_ratio = stepped[0]["jobs_per_s"] / item["tasks_per_s"]
                rows.append(
                    Row(
                        "floor with `sh -c true` vs Celery",
                        f"floor {stepped[0]['jobs_per_s']:.1f} jobs/s",
                        f"Celery durable, no-op: {item['tasks_per_s']:.1f} tasks/s",
                        f"{floor_ratio:.2f}x",
                        "(what any implementation could reach)",
                        "",
                    )
                )
    return rows


def _celery_context(item: dict[str, Any]) -> str:
    """What sets a Celery run apart from the target's (no-op tasks, durable Redis), shown in the row's name."""
    if item.get("task", "no-op") != "no-op":
        return " (its task runs `sh -c true`, as a step)"
    return "" if item.get("durable", True) else " (Redis not durable)"


def rows_celery(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    return []  # shown beside the control plane


def rows_hello(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    api = _search(r"aiodocker create/start/wait/delete\s+median\s+([\d.]+) ms", out.output)
    cli = _search(r"docker run --rm\s+median\s+([\d.]+) ms", out.output)
    seen = _search(r"hades POST -> Succeeded \(client\)\s+median\s+([\d.]+) ms", out.output)
    server = _search(r"hades submitted -> succeeded event\s+median\s+([\d.]+) ms", out.output)
    if not (api and seen):
        return []
    base, hades = float(api.group(1)), float(seen.group(1))
    extra = f"; server-side submitted→succeeded {float(server.group(1)):.1f} ms" if server else ""
    cli_text = f" (docker run --rm {float(cli.group(1)):.1f} ms)" if cli else ""
    return [
        Row(
            "Docker overhead (one-step job)",
            f"POST→Succeeded median {hades:.1f} ms (client, 5 ms polls){extra}",
            f"aiodocker create/start/wait/delete {base:.1f} ms{cli_text}",
            f"{hades / base:.2f}x (+{hades - base:.1f} ms)",
            "≤ 1.10x, ≤ +25 ms",
            _yes(hades / base <= 1.10 and hades - base <= 25),
        )
    ]


def rows_replay(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    raw = _search(r"raw ordered-consumer read\s+([\d.]+) events/s", out.output)
    fold = _search(r"hades replay \(fold[^)]*\)\s+([\d.]+) events/s\s+([\d.]+)x raw", out.output)
    events = _search(r"events: (\d+)", out.output)
    if not (raw and fold):
        return []
    ratio = float(fold.group(1)) / float(raw.group(1))
    return [
        Row(
            "replay",
            f"{float(fold.group(1)):.0f} events/s folded ({events.group(1) if events else '?'} events)",
            f"raw ordered-consumer read {float(raw.group(1)):.0f} events/s",
            f"{ratio * 100:.0f}%",
            "≥ 50% of raw",
            _yes(ratio >= 0.5),
        )
    ]


def rows_logs(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    assert out.data is not None
    rows = []
    for executor, part in out.data["executors"].items():
        hades, base = part["hades"], part["baseline"]
        complete = "" if hades["complete"] else f" — **only {hades['lines_stored']} of {out.data['lines']} stored**"
        extra = ""
        if "aiodocker_lines_per_s" in base:
            extra = (
                f"; aiodocker log iterator {base['aiodocker_lines_per_s']:.0f}/s, "
                f"docker run {base['docker_run_lines_per_s']:.0f}/s"
            )
        rows.append(
            Row(
                f"logs, {executor} executor",
                f"{hades['lines_per_s']:.0f} lines/s POST→{hades['status']} ({out.data['lines']} lines){complete}; "
                f"GET /logs {hades['view_seconds']:.1f} s",
                f"engine: {base['lines_per_s']:.0f} lines/s{extra}",
                f"{hades['ratio'] * 100:.1f}%",
                "≥ 50% of engine" if executor == "docker" else "(context: its baseline is a bare pipe read)",
                _yes(hades["ratio"] >= 0.5 and hades["complete"]) if executor == "docker" else "",
            )
        )
    return rows


def rows_memory(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    assert out.data is not None
    data = out.data
    per_job = data["bytes_per_job"]
    parts = data.get("breakdown", {}).get("bytes_per_job", {})
    split = ", ".join(f"{name.split(' ')[0]} {size:.0f} B" for name, size in parts.items())
    return [
        Row(
            "memory, API with finished jobs",
            f"{per_job:.0f} B/job resident ({data['jobs']} jobs; heap per view: {split})",
            f"same API, empty log: {data['rss_empty'] / 2**20:.1f} MiB",
            f"{per_job / 2048 * 100:.0f}% of budget",
            "≤ 2 KiB/job",
            _yes(per_job <= 2048),
        )
    ]


def rows_webhook(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    base = _search(r"plain POST to the receiver \(baseline\)\s+p50\s+([\d.]+) ms", out.output)
    hook = _search(r"terminal event -> webhook received\s+p50\s+([\d.]+) ms", out.output)
    if not (base and hook):
        return []
    ratio = float(hook.group(1)) / float(base.group(1))
    return [
        Row(
            "webhook delay",
            f"terminal event → webhook received p50 {float(hook.group(1)):.1f} ms",
            f"plain POST {float(base.group(1)):.1f} ms",
            f"{ratio:.1f}x",
            "— (no target)",
            "—",
        )
    ]


def rows_dashboard(out: Outcome, all_: dict[str, Outcome]) -> list[Row]:
    rows = []
    table = re.findall(
        r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)", out.output, re.M
    )
    if len(table) >= 2:
        one, many = table[0], table[-1]
        worst = float(many[3])
        rows.append(
            Row(
                "SSE fan-out (dashboard /api/stream)",
                f"{many[0]} clients: p50 {float(many[1]):.1f} ms, p95 {float(many[2]):.1f} ms, max {worst:.1f} ms "
                f"(max ≥ p99); missing {many[6]}",
                f"1 client: p50 {float(one[1]):.1f} ms, p95 {float(one[2]):.1f} ms",
                f"{float(many[1]) / max(float(one[1]), 1e-9):.1f}x p50",
                "p99 ≤ 1 s",
                _yes(worst <= 1000 and many[6] == "0"),
            )
        )
    return rows


ROWS: dict[str, Callable[[Outcome, dict[str, Outcome]], list[Row]]] = {
    "control_plane": rows_control_plane,
    "celery_baseline": rows_celery,
    "hello_latency": rows_hello,
    "replay": rows_replay,
    "logs": rows_logs,
    "memory": rows_memory,
    "webhook_latency": rows_webhook,
    "dashboard": rows_dashboard,
}


def table(outcomes: dict[str, Outcome]) -> list[Row]:
    rows: list[Row] = []
    for name, out in outcomes.items():
        if not out.ok:
            rows.append(Row(name, "failed or timed out (see its output)", "", "", "", "**no**"))
            continue
        try:
            found = ROWS[name](out, outcomes)
        except (KeyError, TypeError, ValueError, AssertionError) as error:
            found = [Row(name, f"could not read its figures: {error!r}", "", "", "", "?")]
        if not found and name != "celery_baseline":
            found = [Row(name, "could not read its figures (see its output)", "", "", "", "?")]
        rows.extend(found)
    return rows


def markdown(rows: list[Row], outcomes: dict[str, Outcome], total: float, quick: bool) -> str:
    head = [
        "# Benchmark results",
        "",
        f"`make bench` ({'quick sizes' if quick else 'the sizes in bench/run_all.py'}) on "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, {os.cpu_count()} cores, "
        f"commit {_commit()}, {total / 60:.1f} minutes in all; load average at the end "
        f"{os.getloadavg()[0]:.1f}. Every baseline was measured in the same run as its figure.",
        "",
        "| bench | figure | baseline | ratio | target | met? |",
        "|---|---|---|---|---|---|",
    ]
    body = [
        f"| {r.bench} | {r.figure} | {r.baseline} | {r.ratio} | {r.target} | {r.met} |".replace("\n", " ") for r in rows
    ]
    details = ["", "## Output of each bench", ""]
    for out in outcomes.values():
        details += [f"### {out.name} ({out.seconds:.0f} s)", "", "```", out.output.rstrip(), "```", ""]
    return "\n".join(head + body + details) + "\n"


def _commit() -> str:
    git = shutil.which("git")
    if git is None:
        return "?"
    done = subprocess.run([git, "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False)
    dirty = subprocess.run([git, "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip() + (" (+ uncommitted changes)" if dirty.stdout.strip() else "")


def prepare_images() -> None:
    """The offline stand-in images the Docker benches use (a no-op when they exist; needs a running engine)."""
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, check=False).returncode != 0:
        print("no Docker engine answers: the Docker benches will fail (scripts/start-dockerd.sh starts one)")
        return
    script = REPO / "scripts" / "busybox-image.sh"
    subprocess.run(["bash", str(script), "hades-test/busybox:1", "alpine:latest"], cwd=REPO, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated bench names")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of the whole table")
    parser.add_argument("--out", default=str(BENCH / "RESULTS.md"))
    args = parser.parse_args()
    chosen = [b for b in BENCHES if not args.only or b.name in args.only.split(",")]
    began = time.perf_counter()
    if any(b.name in ("hello_latency", "logs") for b in chosen):
        prepare_images()
    outcomes = {bench.name: run_bench(bench, args.quick) for bench in chosen}
    total = time.perf_counter() - began
    rows = table(outcomes)
    text = markdown(rows, outcomes, total, args.quick)
    Path(args.out).write_text(text)
    print("\n".join(text.split("\n## Output of each bench")[0].splitlines()[2:]))
    print(f"\nwritten to {Path(args.out).relative_to(REPO) if Path(args.out).is_relative_to(REPO) else args.out}")
    return 0 if all(out.ok for out in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
