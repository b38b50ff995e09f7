"""The process executor with the real attempt runner and the real event and log stores."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.process.executor import ProcessExecutor
from hades.clock import SystemClock
from hades.core.lifecycle import QueueJob, RequestCancel, Status, SubmitJob, decide, evolve
from hades.core.logs import coalesce
from hades.core.spec import JobSpec, Step
from hades.workers.attempt import AttemptRunner
from hades.workers.jobs import JobHandle
from tests.conftest import StartHades, eventually


async def queued(store: NatsEventStore, **spec: Any) -> JobHandle:
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    events = decide(None, SubmitJob(job_id=job_id, spec=JobSpec(**spec)), clock.now())
    await store.append(job_id, events, 0)
    job = await JobHandle.load(store, clock, job_id)
    await job.run(job_id, QueueJob())
    return job


def runner(nc: Client, store: NatsEventStore, root: Path) -> AttemptRunner:
    return AttemptRunner(ProcessExecutor(root, "proc-test"), NatsLogStore(nc).writer, "proc-test", store.watch)


async def test_steps_share_the_workspace_env_and_logs(nc: Client, event_store: NatsEventStore, tmp_path: Path) -> None:
    steps = (
        Step(id=1, image="ignored", script='echo "$GREETING" > "$HADES_SHARED/out"; echo to-err >&2'),
        Step(id=2, image="ignored", script='cat out; pwd; echo "$UUID $JOB_NAME"', metadata={"GREETING": "x"}),
    )
    job = await queued(event_store, name="proc", metadata={"GREETING": "hello"}, steps=steps)
    attempt_runner = runner(nc, event_store, tmp_path)

    assert await attempt_runner.run(job, 1)

    assert job.state is not None and job.state.status is Status.SUCCEEDED
    logs = coalesce(await NatsLogStore(nc).read(job.state.job_id))
    lines = [[(e.output_stream, e.message) for e in log.logs or []] for log in logs]
    workspace = str(tmp_path / "proc-test" / f"{job.state.job_id}-1")
    assert lines == [
        [("stderr", "to-err")],
        [("stdout", "hello"), ("stdout", workspace), ("stdout", f"{job.state.job_id} proc")],
    ]
    assert not Path(workspace).exists()  # cleaned up


async def test_exit_codes_timeouts_and_cancel(nc: Client, event_store: NatsEventStore, tmp_path: Path) -> None:
    attempt_runner = runner(nc, event_store, tmp_path)
    failing = await queued(event_store, name="f", steps=(Step(id=1, image="", script="exit 3"),))
    slow = await queued(event_store, name="s", timeout_seconds=1, steps=(Step(id=1, image="", script="sleep 30"),))
    cancelled = await queued(event_store, name="c", steps=(Step(id=1, image="", script="sleep 30 & sleep 30"),))

    await attempt_runner.run(failing, 1)
    await attempt_runner.run(slow, 1)
    running = asyncio.create_task(attempt_runner.run(cancelled, 1))
    assert cancelled.state is not None

    async def started() -> bool:
        return any(p.is_dir() for p in (tmp_path / "proc-test").glob(f"{cancelled.state.job_id}-*"))  # type: ignore[union-attr]

    await eventually(started)
    fresh = await JobHandle.load(event_store, SystemClock(), cancelled.state.job_id)
    await fresh.run(cancelled.state.job_id, RequestCancel(by="test"))
    await asyncio.wait_for(running, 10)

    assert failing.state is not None and failing.state.reason == "container exited with status 3"
    assert slow.state is not None and slow.state.reason == "job timed out after 1 seconds"
    final = await JobHandle.load(event_store, SystemClock(), cancelled.state.job_id)
    assert final.state is not None and final.state.status is Status.STOPPED


async def test_hades_runs_jobs_on_the_process_executor(start_hades: StartHades, tmp_path: Path) -> None:
    hades = await start_hades(HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(tmp_path))
    job = {"name": "host", "steps": [{"id": 1, "image": "-", "script": 'echo from the host; test -d "$HADES_SHARED"'}]}

    detail = await hades.wait_terminal(await hades.submit(job))

    assert detail["status"] == "Succeeded", detail
    assert detail["timing"]["phases"]["run"] is not None


class _Lines:
    """StepLogs that keeps what it is given."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def open(self, container_id: str) -> None:
        pass

    async def write(self, stream: str, timestamp: object, message: str) -> None:
        self.lines.append(message)


def test_many_steps_side_by_side_on_uvloop_neither_leak_nor_reuse_descriptors(tmp_path: Path) -> None:
    """uvloop (as ``hades`` runs) leaves a pipe that nothing closes to the garbage collector, which then closes a
    descriptor someone else may have been given meanwhile: each step's pipes are closed when it ends."""
    import gc
    import os

    import uvloop

    executor = ProcessExecutor(tmp_path, "proc-fds")

    async def run(count: int) -> None:
        jobs = []
        for number in range(count):
            spec = JobSpec(name="fds", steps=(Step(id=1, image="", script=f"echo out-{number}; echo err >&2"),))
            [submitted] = decide(None, SubmitJob(job_id=str(uuid.uuid4()), spec=spec), SystemClock().now())
            state = evolve(None, submitted)
            await executor.prepare(state)
            jobs.append(state)
        sinks = [_Lines() for _ in jobs]
        results = await asyncio.gather(
            *(executor.run_step(job, 0, sink) for job, sink in zip(jobs, sinks, strict=True))
        )
        assert [r.exit_code for r in results] == [0] * count
        assert [sorted(s.lines) for s in sinks] == [sorted([f"out-{n}", "err"]) for n in range(count)]
        for job in jobs:
            await executor.cleanup(job)  # an empty workspace: removed on the loop
            assert not executor.workspace(job).exists()
            await executor.cleanup(job)  # and again: nothing left to remove is fine

    async def main() -> None:
        await run(2)  # the loop's and the thread pool's own descriptors, once
        before = len(os.listdir("/proc/self/fd"))
        await run(40)
        gc.collect()
        assert len(os.listdir("/proc/self/fd")) <= before

    uvloop.run(main())


async def test_what_a_step_left_running_ends_with_it(nc: Client, event_store: NatsEventStore, tmp_path: Path) -> None:
    # As in a container, whose processes end with it: a background process the script started (its output
    # detached, so the step does not wait for it) must not live on into later steps or into the next job that
    # reuses the emptied workspace.
    pid_file = tmp_path / "background.pid"
    script = f"sleep 300 >/dev/null 2>&1 </dev/null & echo $! > {pid_file}"
    job = await queued(event_store, name="proc", steps=[Step(id=1, image="ignored", script=script)])

    assert await runner(nc, event_store, tmp_path / "root").run(job, 1)

    assert job.state is not None and job.state.status is Status.SUCCEEDED
    pid = int(pid_file.read_text())

    async def gone() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            return True
        return state == "Z"  # killed, not yet reaped by its parent

    await eventually(gone, timeout=5)
