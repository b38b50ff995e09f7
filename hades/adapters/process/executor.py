"""``Executor`` on the host: each step's script runs in a shell in a per-attempt workspace directory.

Opt-in (``HADES_EXECUTOR=process``), for trusted fleets and for measuring the control plane without container
cost. The workspace is exported as ``HADES_SHARED`` and is the working directory; the environment is the job's
metadata, then the step's, then ``UUID`` and ``JOB_NAME``, on top of a minimal ``PATH``/``HOME``. A step runs in
its own process group so that its end, a timeout or a cancel kills everything it started (as a container's end
does). ``image`` is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import tarfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from hades.adapters.docker.containers import PRIORITY_KEYS
from hades.adapters.process.step_process import StepProcess
from hades.adapters.process.workspaces import Workspaces
from hades.adapters.tar_stream import tar_chunks
from hades.core.lifecycle import JobState
from hades.core.ports import ExecutionError, StepLogs, StepResult

#: What a step's environment starts from: enough to find the usual tools, nothing of Hades's own secrets.
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")


class ProcessExecutor:
    """Runs steps as host processes under ``root/<executor id>/<job id>-<attempt>``."""

    def __init__(self, root: Path, executor_id: str, shell: str = "/bin/sh -c") -> None:
        self._root = root / executor_id
        self._root_name = str(self._root)
        self._shell = shlex.split(shell)
        self._workspaces = Workspaces(self._root_name)

    def workspace(self, job: JobState) -> Path:
        """The attempt's shared directory."""
        return Path(self._workspace(job))

    def _workspace(self, job: JobState) -> str:
        return f"{self._root_name}/{job.job_id}-{job.attempt}"  # a string: pathlib cost more than the step's spawn

    async def prepare(self, job: JobState) -> dict[str, float]:
        """Create the workspace (or take an emptied one: ``workspaces``)."""
        began = time.perf_counter()
        try:
            self._workspaces.make(self._workspace(job))
        except OSError as error:
            raise ExecutionError(f"failed to create the workspace: {error}") from error
        return {"volume": round(time.perf_counter() - began, 6)}

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        """Run the step's script to its end, then kill what it left running (its process group), as a cancel does."""
        step = job.spec.steps[index]
        phases: dict[str, float] = {}
        began = time.perf_counter()
        if not step.script.strip():
            return StepResult(
                exit_code=None, error="the process executor needs a script: a step without one has no command"
            )
        try:
            process = await StepProcess.start([*self._shell, step.script], self._workspace(job), self._env(job, index))
        except OSError as error:
            return StepResult(exit_code=None, error=f"failed to start the step: {error}")
        phases["start"] = round(time.perf_counter() - began, 6)
        try:
            await logs.open(f"process-{process.pid}")
            await process.forward(logs)
            code = await process.exited()
            process.kill()  # what the script left running ends with the step, as in a container
        except BaseException:
            process.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(process.exited())
            raise
        finally:
            process.close()
        phases["run"] = round(time.perf_counter() - began - phases["start"], 6)
        return StepResult(exit_code=code if code >= 0 else 128 - code, phases=phases)

    async def cleanup(self, job: JobState) -> None:
        """Remove the attempt's workspace (an empty one is kept for a later attempt)."""
        await self._workspaces.remove(self._workspace(job))

    async def write_inputs(self, job: JobState, archive: Path) -> None:
        """Unpack the inputs' archive into the workspace (tarfile's ``data`` filter: nothing lands outside it)."""

        def unpack() -> None:
            with tarfile.open(archive) as tar:
                tar.extractall(self.workspace(job), filter="data")

        await asyncio.to_thread(unpack)

    def read_path(self, job: JobState, path: str) -> AsyncIterator[bytes]:
        """A tar stream of one workspace path, written in a thread as it is read."""
        return tar_chunks(self.workspace(job), path)

    async def sweep(self, running: Callable[[str], bool], live_executors: set[str]) -> int:
        """Remove workspaces of attempts this executor does not run now (left by a crash)."""
        removed = 0
        if not self._root.is_dir():
            return 0
        for workspace in self._root.iterdir():
            if self._workspaces.is_spare(workspace.name):
                continue
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
        workspace = self._workspace(job)
        env.update(HOME=workspace, HADES_SHARED=workspace, UUID=job.job_id, JOB_NAME=job.spec.name)
        return env
