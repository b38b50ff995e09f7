"""``Executor`` on the host: each step's script runs in a shell in a per-attempt workspace directory.

Opt-in (``HADES_EXECUTOR=process``), for trusted fleets and for measuring the control plane without container
cost. The workspace is exported as ``HADES_SHARED`` and is the working directory; the environment is the job's
metadata, then the step's, then ``UUID`` and ``JOB_NAME``, on top of a minimal ``PATH``/``HOME``. A step runs in
its own process group so that a timeout or cancel kills everything it started. ``image`` is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shlex
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

from hades.adapters.docker.containers import PRIORITY_KEYS
from hades.adapters.process.workspaces import Workspaces
from hades.adapters.tar_stream import tar_chunks
from hades.core.lifecycle import JobState
from hades.core.logs import OutputStream
from hades.core.ports import ExecutionError, StepLogs, StepResult

#: What a step's environment starts from: enough to find the usual tools, nothing of Hades's own secrets.
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")
#: asyncio's own default for a subprocess pipe's reader.
_PIPE_LIMIT = 2**16


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
        """Run the step's script to its end; cancelling kills its whole process group."""
        step = job.spec.steps[index]
        phases: dict[str, float] = {}
        began = time.perf_counter()
        if not step.script.strip():
            return StepResult(
                exit_code=None, error="the process executor needs a script: a step without one has no command"
            )
        try:
            process, (stdout, stderr), pipes = await _spawn(
                [*self._shell, step.script], self._workspace(job), self._env(job, index)
            )
        except OSError as error:
            return StepResult(exit_code=None, error=f"failed to start the step: {error}")
        phases["start"] = round(time.perf_counter() - began, 6)
        try:
            await logs.open(f"process-{process.pid}")
            await asyncio.gather(_pump(stdout, "stdout", logs), _pump(stderr, "stderr", logs), _exited(process))
        except BaseException:
            _kill_group(process.pid)
            with contextlib.suppress(Exception):
                await asyncio.shield(_exited(process))
            raise
        finally:
            for pipe in pipes:
                pipe.close()
        phases["run"] = round(time.perf_counter() - began - phases["start"], 6)
        code = process.returncode
        return StepResult(exit_code=code if code is None or code >= 0 else 128 - code, phases=phases)

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


async def _spawn(
    argv: list[str], cwd: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], tuple[asyncio.StreamReader, asyncio.StreamReader], list[asyncio.ReadTransport]]:
    """Start a step's process in its own session, its output pipes read on the running loop; close the
    transports when done (that closes the pipes: under uvloop nothing else does it in time, and a pipe left to
    the garbage collector is closed twice, the second time perhaps as someone else's new descriptor).

    Not ``asyncio.create_subprocess_exec``: under uvloop (as ``hades`` runs) that forks the whole interpreter and
    blocks the loop until the child has exec'd, about 5 ms of CPU and a stall of up to 300 ms per step on a busy
    machine (55 spawns/s at most here), where CPython's ``subprocess`` uses vfork (0.8 ms, about 500/s).
    """
    process = subprocess.Popen(  # noqa: ASYNC220 - vfork returns at once (the point of it; see above)
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    loop = asyncio.get_running_loop()
    readers: list[asyncio.StreamReader] = []
    transports: list[asyncio.ReadTransport] = []
    try:
        for pipe in (process.stdout, process.stderr):
            reader = asyncio.StreamReader(limit=_PIPE_LIMIT, loop=loop)
            transport, _ = await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader), pipe)
            readers.append(reader)
            transports.append(transport)
    except BaseException:
        for transport in transports:
            transport.close()  # closes its pipe
        for pipe in (process.stdout, process.stderr)[len(transports) :]:
            if pipe is not None:
                pipe.close()
        _kill_group(process.pid)
        await asyncio.shield(_exited(process))
        raise
    return process, (readers[0], readers[1]), transports


async def _exited(process: subprocess.Popen[bytes]) -> int:
    """Wait for the process to end without blocking the loop (a pidfd where Linux has one, else a thread)."""
    if process.returncode is not None:
        return process.returncode
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return await asyncio.to_thread(process.wait)
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await ended
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    return process.wait()  # it has ended: this only reaps it


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
