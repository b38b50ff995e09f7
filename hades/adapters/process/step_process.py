"""A step's process: started in a session of its own, its output read straight off its two pipes on the loop.

Not ``asyncio.create_subprocess_exec``: under uvloop (as ``hades`` runs) that forks the whole interpreter and
blocks the loop until the child has exec'd, about 5 ms of CPU and a stall of up to 300 ms per step on a busy
machine (55 spawns/s at most here), where CPython's ``subprocess`` uses vfork (0.8 ms, about 500/s).

Nor asyncio's pipe transports and stream readers: the two pipes are plain non-blocking descriptors with a reader
callback each, and one coroutine turns what arrives into lines, in arrival order. The transports, protocols,
readers and the task per pipe cost about a third of a no-op step's CPU in the executor. While more than
``HELD_BYTES`` wait to be written to the log, the pipes are not read, so a chatty step blocks on a full pipe as it
would on a slow terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections import deque
from datetime import UTC, datetime

from hades.core.logs import OutputStream
from hades.core.ports import StepLogs

CHUNK_BYTES = 2**16
#: Output read but not yet written to the log before the pipes are left unread.
HELD_BYTES = 2 * CHUNK_BYTES


class StepProcess:
    """A started step: ``forward`` its output to a log, then await ``exited``; ``close`` it in every case."""

    def __init__(self, process: subprocess.Popen[bytes], pipes: dict[int, OutputStream]) -> None:
        self._process = process
        self._loop = asyncio.get_running_loop()
        self._names = pipes
        self._open = set(pipes)  # descriptors not at their end yet (closed at it)
        self._reading: set[int] = set()
        self._chunks: deque[tuple[int, bytes]] = deque()  # b"" marks a pipe's end
        self._held = 0
        self._waiter: asyncio.Future[None] | None = None

    @classmethod
    async def start(cls, argv: list[str], cwd: str, env: dict[str, str]) -> StepProcess:
        """Start the step's process in its own session (raises OSError when it cannot be started)."""
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        try:
            process = subprocess.Popen(  # noqa: ASYNC220 - vfork returns at once (see the module's note)
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out_write,
                stderr=err_write,
                start_new_session=True,
            )
        except BaseException:
            os.close(out_read)
            os.close(err_read)
            raise
        finally:
            os.close(out_write)
            os.close(err_write)
        started = cls(process, {out_read: "stdout", err_read: "stderr"})
        try:
            for fd in (out_read, err_read):
                os.set_blocking(fd, False)
                started._watch(fd)
        except BaseException:
            started.kill()
            started.close()
            await asyncio.shield(started.exited())
            raise
        return started

    @property
    def pid(self) -> int:
        """The process id (its group's too)."""
        return self._process.pid

    async def forward(self, logs: StepLogs) -> None:
        """Write every non-empty line to ``logs``, stamped as it arrives, until both pipes are at their end."""
        partial = dict.fromkeys(self._names, b"")
        while True:
            while self._chunks:
                fd, data = self._chunks.popleft()
                self._held -= len(data)
                if data:
                    *lines, partial[fd] = (partial[fd] + data).split(b"\n")
                    for line in lines:
                        await _emit(line, self._names[fd], logs)
                elif partial[fd]:
                    await _emit(partial[fd], self._names[fd], logs)
                    partial[fd] = b""
            if not self._open:
                return
            if self._held < HELD_BYTES:
                for fd in self._open - self._reading:
                    self._watch(fd)
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def exited(self) -> int:
        """Wait for the process to end without blocking the loop (a pidfd where Linux has one, else a thread)."""
        return await _exited(self._process)

    def kill(self) -> None:
        """Kill everything the step started (its whole process group)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)

    def close(self) -> None:
        """Stop reading and close the pipes not at their end yet."""
        for fd in self._open:
            self._unwatch(fd)
            os.close(fd)
        self._open.clear()

    def _watch(self, fd: int) -> None:
        self._loop.add_reader(fd, self._readable, fd)
        self._reading.add(fd)

    def _unwatch(self, fd: int) -> None:
        if fd in self._reading:
            self._loop.remove_reader(fd)
            self._reading.discard(fd)

    def _readable(self, fd: int) -> None:
        try:
            data = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._unwatch(fd)
            self._open.discard(fd)
            os.close(fd)
        else:
            self._held += len(data)
            if self._held >= HELD_BYTES:
                for reading in list(self._reading):
                    self._unwatch(reading)
        self._chunks.append((fd, data))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


async def _exited(process: subprocess.Popen[bytes]) -> int:
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


async def _emit(line: bytes, name: OutputStream, logs: StepLogs) -> None:
    message = line.decode(errors="replace").strip()
    if message:
        await logs.write(name, datetime.now(UTC), message)
