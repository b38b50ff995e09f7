"""A host path as a tar stream, the shape Docker's archive API gives, written in a thread as it is read.

Memory stays bounded whatever the path holds: the writer thread waits while a few chunks are unread, and stops
when the reader stops reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import tarfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path

CHUNK_BYTES = 1 << 16
_QUEUED_CHUNKS = 8


class _Abandoned(Exception):
    """The reader went away; the writer stops."""


class _Sink(io.RawIOBase):
    """A write-only file whose writes become chunks on an asyncio queue (waiting while it is full)."""

    def __init__(self, queue: asyncio.Queue[bytes | BaseException | None], loop: asyncio.AbstractEventLoop) -> None:
        self._queue = queue
        self._loop = loop
        self.abandoned = threading.Event()

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self.put(bytes(data))
        return len(data)

    def put(self, item: bytes | BaseException | None) -> None:
        if self.abandoned.is_set():
            raise _Abandoned
        asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop).result()


def _write(target: Path, sink: _Sink) -> None:
    outcome: BaseException | None = None
    try:
        with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT, bufsize=CHUNK_BYTES) as tar:
            tar.add(target, arcname=target.name)  # symbolic links are kept as links, never followed
    except _Abandoned:
        return
    except BaseException as error:  # handed to the reader, which raises it
        outcome = error
    with contextlib.suppress(_Abandoned):
        sink.put(outcome)


def _inside(root: Path, path: str) -> Path:
    target = root / path
    if not (target.exists() or target.is_symlink()) or not target.parent.resolve().is_relative_to(root.resolve()):
        raise FileNotFoundError(f"{path}: no such file or directory in the workspace")
    return target


async def tar_chunks(root: Path, path: str) -> AsyncIterator[bytes]:
    """The tar stream of ``root/path`` (a file, or a directory with everything below it), its member names starting
    at the path's last segment. Raises FileNotFoundError for a path that is not there, or that reaches outside
    ``root`` through a symbolic link."""
    target = _inside(root, path)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=_QUEUED_CHUNKS)
    sink = _Sink(queue, loop)
    writer = loop.run_in_executor(None, _write, target, sink)
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        sink.abandoned.set()
        while not writer.done():  # let a write waiting for room land, so the thread sees it was abandoned
            with contextlib.suppress(asyncio.QueueEmpty):
                queue.get_nowait()
            await asyncio.wait({writer}, timeout=0.05)
