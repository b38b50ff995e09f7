"""Following a step container's stdout and stderr into its log writer, and the catch-up re-read of a stopped
container's stored log when the engine ends a follow early.

The engine's log endpoint is read here rather than through aiodocker's ``container.log``: that reads one frame at
a time (two awaited reads and a decode per line, through three async generators), which at a million lines was a
third of the executor's time; here whatever the socket holds is split into frames in one pass and decoded at once.
"""

from __future__ import annotations

import asyncio
import codecs
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
from aiodocker.containers import DockerContainer
from aiodocker.types import SENTINEL

from hades.core.logs import OutputStream, is_timestamp, parse_timestamp, split_line
from hades.core.ports import StepLogs

#: After a container exits, how long its log streams may go without delivering a line before they are given up
#: (a stream that keeps delivering is followed to its end, however long the backlog: nothing is cut by a clock).
LOG_DRAIN_SECONDS = 10.0

_DIGITS = re.compile(r"[0-9]*")
#: Reads of one output stream at most: the follow, then re-reads of a stopped container's stored log (each
#: normally one request that brings nothing new).
_LOG_READS = 5


#: One read of a stream's log from the engine's ``since`` on: its text, in chunks of any size.
LogRead = Callable[[str], AsyncIterator[str]]
#: The follow of both streams at once: (stream, text) in the engine's order.
BothRead = Callable[[], AsyncIterator[tuple[OutputStream, str]]]
#: How aiodocker's own log stream ends a read quietly (an early end, picked up by the catch-up re-read).
_STREAM_ENDED = (aiohttp.ClientConnectionError, asyncio.IncompleteReadError)
_STDERR = 2


class Demultiplexer:
    """The engine's multiplexed stream (frames: 1 byte stream, 3 zero, 4 bytes big-endian length, the payload)
    as text per stream: payloads joined and decoded as UTF-8, dropping undecodable bytes (as aiodocker does), a
    character or frame cut between two reads completed by the next."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="ignore") for name in _STREAMS}

    def feed(self, data: bytes) -> list[tuple[OutputStream, str]]:
        """The text of every whole frame received so far and not yet returned, a run of one stream's frames at a
        time, in order."""
        buffer = self._buffer
        buffer += data
        size, at, runs = len(buffer), 0, []
        kind, payloads = -1, list[bytearray]()
        while size - at >= 8:
            end = at + 8 + int.from_bytes(buffer[at + 4 : at + 8], "big")
            if end > size:
                break
            if buffer[at] != kind:
                if payloads:
                    runs.append(self._decode(kind, payloads))
                kind, payloads = buffer[at], []
            payloads.append(buffer[at + 8 : end])
            at = end
        if payloads:
            runs.append(self._decode(kind, payloads))
        del buffer[:at]
        return [(name, text) for name, text in runs if text]

    def _decode(self, kind: int, payloads: list[bytearray]) -> tuple[OutputStream, str]:
        name: OutputStream = "stderr" if kind == _STDERR else "stdout"
        return name, self._decoders[name].decode(b"".join(payloads))

    def end(self) -> list[tuple[OutputStream, str]]:
        """What the decoders still held (bytes of a character never completed are dropped); a cut frame is lost."""
        runs = [(name, decoder.decode(b"", final=True)) for name, decoder in self._decoders.items()]
        return [(name, text) for name, text in runs if text]


_STREAMS: tuple[OutputStream, ...] = ("stdout", "stderr")


class EngineLog:
    """Reads of a container's log that has no TTY (Hades never asks for one: its output is multiplexed),
    followed, with timestamps: both streams at once (one request, so the engine reads its log file once), or one
    stream from a ``since`` (the catch-up re-reads)."""

    def __init__(self, container: DockerContainer) -> None:
        self._container = container

    def both(self) -> AsyncIterator[tuple[OutputStream, str]]:
        """Stdout and stderr from the start, as the engine interleaves them."""
        return self._read({"stdout": True, "stderr": True})

    def one(self, stream: OutputStream) -> LogRead:
        """Reads of one stream from a ``since`` on."""

        async def read(since: str) -> AsyncIterator[str]:
            async for _, text in self._read({stream: True, "since": since}):
                yield text

        return read

    async def _read(self, params: dict[str, bool | str]) -> AsyncIterator[tuple[OutputStream, str]]:
        docker, demultiplexer = self._container.docker, Demultiplexer()
        query = {**params, "follow": True, "timestamps": True}
        timeout = docker._resolve_long_running_timeout(SENTINEL)
        async with docker._query(f"containers/{self._container.id}/logs", params=query, timeout=timeout) as reply:
            try:
                async for data in reply.content.iter_any():
                    for run in demultiplexer.feed(data):
                        yield run
            except _STREAM_ENDED:
                pass
        for run in demultiplexer.end():
            yield run


@dataclass
class Progress:
    """Lines the log pumps of one container have handed on so far."""

    lines: int = 0


@dataclass
class Seen:
    """Where a followed log stream got to: its last line's timestamp and how many lines carried exactly it."""

    stamp: str = ""
    at_stamp: int = 0

    def add(self, line: str) -> None:
        self.add_stamp(line.partition(" ")[0])

    def add_stamp(self, stamp: str) -> None:
        """Count a line whose first word is ``stamp``."""
        if stamp == self.stamp:
            self.at_stamp += 1
        elif is_timestamp(stamp):
            self.stamp, self.at_stamp = stamp, 1

    def since(self) -> str:
        """The engine's ``since`` for the last timestamp seen (whole seconds and nanoseconds), 0 for none."""
        moment = parse_timestamp(self.stamp)
        if moment is None:
            return "0"
        fraction = _DIGITS.match(self.stamp.partition(".")[2]) if "." in self.stamp else None
        nanos = (fraction[0] if fraction else "")[:9].ljust(9, "0")
        return f"{int(moment.replace(microsecond=0).timestamp())}.{nanos}"


async def drain(pumps: list[asyncio.Task[None]], progress: Progress, logs: StepLogs) -> None:
    """Wait for the exited container's log streams to end (the engine ends them once it has sent everything).

    A fast producer can leave a backlog of seconds behind it (a million lines took ~10 s to stream here), so
    the streams are given up only when they stop delivering, and the log then says that output is missing.
    """
    seen = -1
    while True:
        _, pending = await asyncio.wait(pumps, timeout=LOG_DRAIN_SECONDS)
        if not pending:
            for pump in pumps:
                pump.result()  # an engine failure while streaming surfaces here
            return
        if progress.lines == seen:
            notice = (
                f"[hades: the engine's log stream stalled for {LOG_DRAIN_SECONDS:.0f} s after the container "
                "exited; any later output is missing]"
            )
            await logs.write("stderr", datetime.now(UTC), notice)
            return
        seen = progress.lines


class _Lines:
    """One stream's lines as a read brings them: each handed to the log writer once, in order."""

    def __init__(self, stream: OutputStream, logs: StepLogs, progress: Progress) -> None:
        self.stream, self.logs, self.progress = stream, logs, progress
        self.seen = Seen()
        self.buffer, self.fresh, self.skip = "", 0, 0

    def begin(self) -> None:
        """A new read, from ``seen.since()``: its first lines at the last stamp seen were handed on already."""
        self.buffer, self.fresh, self.skip = "", 0, self.seen.at_stamp

    async def take(self, chunk: str) -> None:
        seen, stream, logs = self.seen, self.stream, self.logs
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split("\n")
        now = datetime.now(UTC)  # the time of a line without a valid prefix: when its chunk arrived
        for line in lines:
            stamp = line.partition(" ")[0]
            if self.skip and stamp == seen.stamp:
                self.skip -= 1  # handed on before this read
                continue
            seen.add_stamp(stamp)
            self.fresh += 1
            if split := split_line(line, now):
                await logs.write(stream, *split)
        self.progress.lines += len(lines)

    async def end(self) -> None:
        """The stored log's last line may lack its newline: handed on once no read brings anything else."""
        handed_on = self.skip and self.buffer.partition(" ")[0] == self.seen.stamp
        if self.buffer and not handed_on and (split := split_line(self.buffer, datetime.now(UTC))):
            await self.logs.write(self.stream, *split)


async def follow(engine: EngineLog, logs: StepLogs, progress: Progress) -> None:
    """Follow both output streams in one read; then each stream is caught up on its own (:func:`pump`)."""
    streams = {name: _Lines(name, logs, progress) for name in _STREAMS}
    async for name, chunk in engine.both():
        await streams[name].take(chunk)
    await asyncio.gather(*(pump(engine.one(name), name, logs, progress, lines) for name, lines in streams.items()))


async def pump(
    read: LogRead, stream: OutputStream, logs: StepLogs, progress: Progress, followed: _Lines | None = None
) -> None:
    """Follow one output stream (or, ``followed``, catch up one whose follow was read already), split it into
    lines and hand each to the log writer.

    The engine may end a follow before it sent everything (seen under load: 15,644 of 100,000 lines, and no
    error), so once it ends, what the engine stored after the last whole line seen is read again (a stopped
    container's stream ends once it sent what is stored), until a read brings nothing new. A line cut short
    by an early end comes back whole in the next read; the stored log's last line may lack its newline, and
    is handed on once a read brings nothing else.
    """
    lines = followed or _Lines(stream, logs, progress)
    for round_ in range(1 if followed else 0, _LOG_READS):
        lines.begin()
        async for chunk in read(lines.seen.since()):
            await lines.take(chunk)
        if (round_ > 0 and not lines.fresh) or round_ == _LOG_READS - 1:
            await lines.end()
            return
