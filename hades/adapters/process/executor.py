"""``Executor`` on the host: each step's script runs in a shell in a per-attempt workspace directory.

Opt-in (``HADES_EXECUTOR=process``), for trusted fleets and for measuring the control plane without container
cost. The workspace is exported as ``HADES_SHARED`` and is the working directory; the environment is the job's
metadata, then the step's, then ``UUID`` and ``JOB_NAME``, on top of a minimal ``PATH``/``HOME``. A step runs in
its own process group so that a timeout or cancel kills everything it started. ``image`` is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from hades.adapters.docker.containers import PRIORITY_KEYS
from hades.core.lifecycle import JobState
from hades.core.logs import OutputStream
from hades.core.ports import ExecutionError, StepLogs, StepResult

#: What a step's environment starts from: enough to find the usual tools, nothing of Hades's own secrets.
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")


class ProcessExecutor:
    """Runs steps as host processes under ``root/<executor id>/<job id>-<attempt>``."""

    def __init__(self, root: Path, executor_id: str, shell: str = "/bin/sh -c") -> None:
        self._root = root / executor_id
        self._shell = shlex.split(shell)

    def workspace(self, job: JobState) -> Path:
        """The attempt's shared directory."""
        return self._root / f"{job.job_id}-{job.attempt}"

    async def prepare(self, job: JobState) -> dict[str, float]:
        """Create the workspace."""
        began = time.perf_counter()
        try:
            self.workspace(job).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ExecutionError(f"failed to create the workspace: {error}") from error
        return {"volume": round(time.perf_counter() - began, 6)}

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        """Run the step's script to its end; cancelling kills its whole process group."""
        step = job.spec.steps[index]
        phases: dict[str, float] = {}
        began = time.perf_counter()
        if not step.script.strip():
            return StepResult(
                exit_code=None, error="the process executor needs a script: a step without one has no command"
            )
        try:
            process = await asyncio.create_subprocess_exec(
                *self._shell,
                step.script,
                cwd=self.workspace(job),
                env=self._env(job, index),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as error:
            return StepResult(exit_code=None, error=f"failed to start the step: {error}")
        phases["start"] = round(time.perf_counter() - began, 6)
        await logs.open(f"process-{process.pid}")
        try:
            assert process.stdout is not None and process.stderr is not None
            await asyncio.gather(
                _pump(process.stdout, "stdout", logs), _pump(process.stderr, "stderr", logs), process.wait()
            )
        except asyncio.CancelledError:
            _kill_group(process.pid)
            with contextlib.suppress(Exception):
                await asyncio.shield(process.wait())
            raise
        phases["run"] = round(time.perf_counter() - began - phases["start"], 6)
        code = process.returncode
        return StepResult(exit_code=code if code is None or code >= 0 else 128 - code, phases=phases)

    async def cleanup(self, job: JobState) -> None:
        """Remove the attempt's workspace."""
        await asyncio.to_thread(shutil.rmtree, self.workspace(job), True)

    async def sweep(self, running: Callable[[str], bool], live_executors: set[str]) -> int:
        """Remove workspaces of attempts this executor does not run now (left by a crash)."""
        removed = 0
        if not self._root.is_dir():
            return 0
        for workspace in self._root.iterdir():
            job_id = workspace.name.rsplit("-", 1)[0]
            if not running(job_id):
                await asyncio.to_thread(shutil.rmtree, workspace, True)
                removed += 1
        return removed

    def _env(self, job: JobState, index: int) -> dict[str, str]:
        step = job.spec.steps[index]
        env = {key: os.environ[key] for key in BASE_ENV_KEYS if key in os.environ}
        env.update(job.spec.metadata)
        env.update(step.metadata)
        for key in PRIORITY_KEYS:
            env.pop(key, None)
        workspace = str(self.workspace(job))
        env.update(HOME=workspace, HADES_SHARED=workspace, UUID=job.job_id, JOB_NAME=job.spec.name)
        return env


async def _pump(stream: asyncio.StreamReader, name: OutputStream, logs: StepLogs) -> None:
    """Split the output into lines (of any length: the log budget cuts long ones) stamped as they arrive."""
    buffer = b""
    while chunk := await stream.read(65536):
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            await _emit(line, name, logs)
    if buffer:
        await _emit(buffer, name, logs)


async def _emit(line: bytes, name: OutputStream, logs: StepLogs) -> None:
    message = line.decode(errors="replace").strip()
    if message:
        await logs.write(name, datetime.now(UTC), message)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
