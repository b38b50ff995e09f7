"""The peer a Python user would pick instead: N no-op tasks through Celery on Redis, end to end, beside Hades.

Celery is kept out of the project venv (its pins downgrade packages, stack-notes 4.13): this script makes and
reuses ``.bench/celery-venv`` (``python3 -m venv`` + ``pip install 'celery[redis]==5.*'``; ``.bench/`` carries
its own ``.gitignore`` so nothing there is ever committed). Debian's ``redis-server`` is installed with apt-get
when missing, and started on a free loopback port, twice:
  - ``--appendonly no --save ''``: nothing on disk (the fastest Celery can be);
  - ``--appendonly yes --appendfsync everysec``: durable within a second (JetStream, as Hades runs it, writes
    every event to its file store and fsyncs every 2 minutes by default, so this is the fair "durable" peer).
Each time a ``celery worker`` (prefork, ``--concurrency`` 2 by default, one per core) runs the task, and a
producer in the celery venv sends N ``noop.delay()`` one after another and then waits for every result
(``.get()``), as the stack-notes measurement did (~660 tasks/s here). Figure: tasks/s = N / (first send → last
result).

A third run (durable) has each task run ``sh -c true`` in a subprocess: the work a Hades no-op job's step does
(a shell running ``true``). It is context for the comparison; the issue's target is the no-op task.

Beside it, unless ``--no-hades``: Hades's control-plane figure for the same N (bench/control_plane.py's Hades
part: no-op jobs on the process executor over HTTP, submit → terminal event), and the ratio Hades ÷ Celery.

    .venv/bin/python bench/celery_baseline.py [--tasks 2000] [--concurrency 2] [--no-hades] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _support import REPO, emit_json, free_port, run

BENCH_DIR = REPO / ".bench"
VENV = BENCH_DIR / "celery-venv"
CELERY_SPEC = "celery[redis]==5.*"

TASKS = """
import os
import subprocess
from celery import Celery

app = Celery("benchtasks", broker=os.environ["BENCH_REDIS"], backend=os.environ["BENCH_REDIS"])
app.conf.update(broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)


@app.task
def noop():
    return None


@app.task
def shell():
    subprocess.run(["/bin/sh", "-c", "true"], check=True)
"""

PRODUCER = """
import json, sys, time
import benchtasks

count = int(sys.argv[1])
noop = getattr(benchtasks, sys.argv[2])
for result in [noop.delay() for _ in range(20)]:  # warm-up: the worker is up and its pool is warm
    result.get(timeout=120)
began = time.perf_counter()
results = [noop.delay() for _ in range(count)]
sent = time.perf_counter()
for result in results:
    result.get(timeout=600)
ended = time.perf_counter()
print(json.dumps({"submit_seconds": sent - began, "seconds": ended - began}))
"""


def ensure_venv() -> Path:
    """The celery venv's python, made on first use."""
    BENCH_DIR.mkdir(exist_ok=True)
    (BENCH_DIR / ".gitignore").write_text("# local benchmark tools (the Celery venv): never committed\n*\n")
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "celery").is_file():
        base = shutil.which("python3") or sys.executable
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", CELERY_SPEC]
        subprocess.run(pip, check=True)
    return python


def ensure_redis() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    if os.geteuid() != 0:
        raise SystemExit("redis-server is missing: apt-get install -y redis-server")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server"], check=True, env=env, stdout=subprocess.DEVNULL)
    return shutil.which("redis-server") or "/usr/bin/redis-server"


def wait_port(port: int, process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"redis-server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not answer")


def stop(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def celery_run(
    python: Path, redis: str, tasks: int, concurrency: int, durable: bool, task: str = "noop"
) -> dict[str, Any]:
    """One Redis, one worker, one producer; the producer's timings."""
    with tempfile.TemporaryDirectory(prefix="hades-bench-celery-") as tmp:
        work = Path(tmp)
        (work / "benchtasks.py").write_text(TASKS)
        (work / "producer.py").write_text(PRODUCER)
        port = free_port()
        persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if durable else ["--appendonly", "no"]
        server = subprocess.Popen(
            [redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp, *persistence],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        worker = None
        try:
            wait_port(port, server)
            env = {**os.environ, "BENCH_REDIS": f"redis://127.0.0.1:{port}/0", "PYTHONPATH": tmp}
            celery = [str(python.parent / "celery"), "-A", "benchtasks", "worker", "--pool", "prefork"]
            flags = ["--concurrency", str(concurrency), "-l", "warning", "--without-gossip", "--without-mingle"]
            with (work / "worker.log").open("wb") as log:
                worker = subprocess.Popen([*celery, *flags], cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
            produced = subprocess.run(
                [str(python), "producer.py", str(tasks), task], cwd=tmp, env=env, capture_output=True, check=False
            )
            if produced.returncode != 0:
                raise SystemExit(f"celery producer failed: {produced.stderr.decode()[-2000:]}")
            timings = json.loads(produced.stdout.decode().strip().splitlines()[-1])
        finally:
            if worker is not None:
                stop(worker)
            stop(server)
    seconds = timings["seconds"]
    return {
        "redis": "appendonly everysec" if durable else "no persistence",
        "durable": durable,
        "task": "no-op" if task == "noop" else "sh -c true",
        "tasks": tasks,
        "concurrency": concurrency,
        "seconds": round(seconds, 3),
        "submit_seconds": round(timings["submit_seconds"], 3),
        "tasks_per_s": round(tasks / seconds, 1),
    }


def celery_version(python: Path) -> str:
    out = subprocess.run([str(python), "-c", "import celery; print(celery.__version__)"], capture_output=True)
    return out.stdout.decode().strip()


def hades_figure(tasks: int) -> dict[str, Any]:
    """bench/control_plane.py's Hades part (split roles, uvloop) for the same N."""
    import control_plane

    args = control_plane.parse(["--jobs", str(tasks), "--solo", "0"])

    async def one() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="hades-bench-cp-") as tmp:
            return await control_plane.hades_run(args, "split", "uvloop", Path(tmp))

    return dict(run(one()))


def main(args: argparse.Namespace) -> dict[str, Any]:
    python = ensure_venv()
    redis = ensure_redis()
    runs = [celery_run(python, redis, args.tasks, args.concurrency, durable) for durable in (True, False)]
    # The same work as a Hades no-op job, whose step is a shell running `true`: context, not the target.
    runs.append(celery_run(python, redis, args.tasks, args.concurrency, True, task="shell"))
    result: dict[str, Any] = {
        "bench": "celery_baseline",
        "celery": celery_version(python),
        "redis_server": subprocess.run([redis, "--version"], capture_output=True).stdout.decode().split()[2],
        "runs": runs,
    }
    if not args.no_hades:
        hades = hades_figure(args.tasks)
        result["hades"] = {k: hades[k] for k in ("jobs", "jobs_per_s", "latency_p50_ms", "latency_p99_ms", "mode")}
        result["ratio"] = round(hades["jobs_per_s"] / runs[0]["tasks_per_s"], 3)
    return result


def report(result: dict[str, Any]) -> None:
    print(f"celery {result['celery']} on redis-server {result['redis_server']}")
    for item in result["runs"]:
        print(
            f"  redis {item['redis']:<20} prefork c={item['concurrency']}: {item['tasks']} {item['task']} tasks, "
            f"send all + wait every result {item['seconds']:.2f} s (sending {item['submit_seconds']:.2f} s)  "
            f"{item['tasks_per_s']:7.1f} tasks/s"
        )
    if "hades" in result:
        hades = result["hades"]
        print(
            f"  hades ({hades['mode']} roles, process executor, HTTP): {hades['jobs']} no-op jobs  "
            f"{hades['jobs_per_s']:7.1f} jobs/s   {result['ratio']:.2f}x celery (durable redis)"
        )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=2, help="celery worker processes (prefork)")
    parser.add_argument("--no-hades", action="store_true", help="Celery only (run_all.py takes Hades's figure)")
    parser.add_argument("--json", action="store_true", help="also print one BENCH-JSON line")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    outcome = main(arguments)
    report(outcome)
    if arguments.json:
        emit_json(outcome)
