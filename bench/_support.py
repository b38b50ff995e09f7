"""What the benches share: an embedded nats-server with the topology, Hades role processes, py-spy, figures.

Not a bench itself (run_all.py skips files starting with an underscore).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from hades.adapters.nats.connection import connect
from hades.adapters.nats.server import EmbeddedNats, start_nats
from hades.adapters.nats.topology import EVENTS_STREAM, apply, load_topology
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
from hades.core.spec import JobSpec

TERMINAL = {"succeeded", "failed", "stopped"}
REPO = Path(__file__).resolve().parents[1]
HADES = [sys.executable, "-m", "hades.cli"]
#: ``hades`` on the default asyncio loop instead of uvloop (for comparisons; the CLI picks uvloop when present).
HADES_ASYNCIO = [sys.executable, "-c", "import sys; sys.modules['uvloop'] = None; from hades.cli import main; main()"]
PY_SPY = str(Path(sys.executable).parent / "py-spy")
#: Sample without pausing the target; count only samples holding the GIL (idle pool threads are not work).
SPY_FLAGS = ("--nonblocking", "--gil")


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run on uvloop when it is there, as the ``hades`` command does, so baselines and Hades use the same loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def finished_job_events(job_id: str, spec: JobSpec, now: datetime) -> list[Event]:
    """The events of one one-step job from submission to success, as real roles would append them."""
    events: list[Event] = list(decide(None, SubmitJob(job_id=job_id, spec=spec), now))
    state: JobState | None = None
    for event in events:
        state = evolve(state, event)
    for command in (
        QueueJob(),
        StartAttempt(1, "executor-1"),
        StartStep(1, 0, prepare={"volume": 0.0008}),
        FinishStep(1, 0, 0, last_log_seq=1, phases={"start": 0.01, "run": 0.004}),
    ):
        new = decide(state, command, now)
        for event in new:
            state = evolve(state, event)
        events += new
    return events


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


async def nats_with_topology(store: Path) -> EmbeddedNats:
    """A fresh nats-server storing under ``store``, with streams.yaml applied."""
    server = start_nats(store)
    nc = await connect(server.url)
    try:
        await apply(nc.jetstream(), load_topology())
    finally:
        await nc.close()
    return server


def rss_bytes(pid: int) -> int:
    """VmRSS of a process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user+system seconds of the process, of its waited-for children) from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime) / tick, (cutime + cstime) / tick


class CpuMeter:
    """CPU seconds each named process spent between ``start`` and ``stop`` (children counted apart)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._began: dict[str, tuple[float, float]] = {}
        self._wall = 0.0

    def start(self) -> None:
        self._wall = time.perf_counter()
        self._began = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, Any]:
        """name → {cpu_s, children_cpu_s}, plus the wall time."""
        wall = time.perf_counter() - self._wall
        spent: dict[str, Any] = {}
        for name, pid in self.pids.items():
            with contextlib.suppress(OSError):
                own, children = cpu_seconds(pid)
                spent[name] = {
                    "cpu_s": round(own - self._began[name][0], 3),
                    "children_cpu_s": round(children - self._began[name][1], 3),
                }
        return {"wall_s": round(wall, 3), "processes": spent}


@dataclass
class Watch:
    """Terminal events seen by an ordered consumer, stamped on arrival."""

    ended: dict[str, float] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    #: When each job's queued and started events were seen (where a burst's jobs wait: scheduler or executors).
    seen: dict[str, dict[str, float]] = field(default_factory=dict)

    async def on_msg(self, msg: Msg) -> None:
        tokens = msg.subject.split(".")
        if len(tokens) >= 4 and tokens[3] in ("queued", "started"):
            self.seen.setdefault(tokens[2], {}).setdefault(tokens[3], time.perf_counter())
        if len(tokens) >= 4 and tokens[3] in TERMINAL:
            self.ended.setdefault(tokens[2], time.perf_counter())
            self.kinds[tokens[2]] = tokens[3]
            self.changed.set()

    async def until(self, ids: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while any(job_id not in self.ended for job_id in ids):
            if time.monotonic() > deadline:
                missing = sum(job_id not in self.ended for job_id in ids)
                raise SystemExit(f"{missing} of {len(ids)} jobs did not end within {timeout} s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 1)


async def watch_terminal(nats_url: str) -> tuple[Any, Watch]:
    """A connection with an ordered consumer on every new event, stamping terminal ones; close the connection."""
    nc = await connect(nats_url)
    watch = Watch()
    config = ConsumerConfig(deliver_policy=DeliverPolicy.NEW)
    await nc.jetstream().subscribe(
        "hades.events.>", stream=EVENTS_STREAM, ordered_consumer=True, config=config, cb=watch.on_msg
    )
    return nc, watch


@dataclass
class Role:
    """One ``hades <role>`` child process."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class Fleet:
    """Hades processes against one NATS server; stopped together."""

    nats_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    roles: list[Role] = field(default_factory=list)
    api_url: str = ""
    loop: str = "uvloop"

    def start(self, command: str, name: str | None = None, **env: str) -> Role:
        """Start ``hades <command>`` (``up`` runs every role) with the fleet's env plus ``env``."""
        name = name or command
        full = {**os.environ, **self.env, **env, "NATS_URL": self.nats_url, "HADES_DATA_DIR": str(self.workdir)}
        if command in ("up", "api"):
            port = free_port()
            full["API_PORT"] = str(port)
            self.api_url = f"http://127.0.0.1:{port}"
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            launcher = HADES_ASYNCIO if self.loop == "asyncio" else HADES
            process = subprocess.Popen([*launcher, command], env=full, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        role = Role(name, process, log)
        self.roles.append(role)
        return role

    def wait_api(self, timeout: float = 120) -> None:
        """Until GET /ping answers 200 (the API answers only once its views caught up with the log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for role in self.roles:
                if role.process.poll() is not None:
                    raise SystemExit(f"hades {role.name} exited: {role.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.api_url}/ping", timeout=2).status_code == 200:
                    return
            time.sleep(0.05)
        raise SystemExit("the Hades API did not answer")

    def stop(self) -> None:
        for role in reversed(self.roles):
            if role.process.poll() is None:
                role.process.send_signal(signal.SIGTERM)
        for role in reversed(self.roles):
            try:
                role.process.wait(40)
            except subprocess.TimeoutExpired:
                role.process.kill()
                role.process.wait()
        self.roles.clear()


@contextlib.contextmanager
def fleet(nats_url: str, workdir: Path, loop: str = "uvloop", **env: str) -> Iterator[Fleet]:
    workdir.mkdir(parents=True, exist_ok=True)
    group = Fleet(nats_url, workdir, dict(env), loop=loop)
    try:
        yield group
    finally:
        group.stop()


# -- py-spy ---------------------------------------------------------------------------------------------------


class Profiler:
    """``py-spy record --format raw`` on some pids for the measured part of a bench; summarised after."""

    def __init__(self, outdir: Path | None) -> None:
        self.outdir = outdir
        self._spies: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, pid: int, rate: int = 100) -> None:
        if self.outdir is None:
            return
        self.outdir.mkdir(parents=True, exist_ok=True)
        out = self.outdir / f"{name}.txt"
        spy = subprocess.Popen(
            [PY_SPY, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate), *SPY_FLAGS, "-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._spies.append((name, spy, out))

    def stop(self) -> dict[str, Any]:
        """Stop every recording and return each one's summary."""
        for _, spy, _ in self._spies:
            spy.send_signal(signal.SIGINT)
        summaries = {}
        for name, spy, out in self._spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
            if out.is_file():
                summaries[name] = summarise(out)
        self._spies.clear()
        return summaries


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _frame_name(frame: str) -> str:
    """``func (path/to/module.py:12)`` → ``module.py:func`` (lines merged), shortened to the package path."""
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match.group("file")
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{path}:{match.group('func')}"


def summarise(raw: Path, top: int = 25) -> dict[str, Any]:
    """Self and inclusive sample shares per function from a py-spy raw (collapsed) profile."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    share = 100.0 / total if total else 0.0
    return {
        "samples": total,
        "self": [(name, round(n * share, 1)) for name, n in own.most_common(top)],
        "inclusive": [(name, round(n * share, 1)) for name, n in inclusive.most_common(top * 2)],
    }


def print_profile(summaries: dict[str, Any], top: int = 15) -> None:
    for name, summary in summaries.items():
        print(f"\n-- py-spy: {name} ({summary['samples']} samples, shares of on-CPU samples) --")
        print("   self %   function")
        for func, pct in summary["self"][:top]:
            print(f"   {pct:6.1f}   {func}")
        print("   incl %   function")
        for func, pct in summary["inclusive"][: top * 2]:
            print(f"   {pct:6.1f}   {func}")


def emit_json(result: dict[str, Any]) -> None:
    """The one line run_all.py reads."""
    print("BENCH-JSON " + json.dumps(result, default=str), flush=True)
