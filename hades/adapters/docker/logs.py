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
#: How aiodocker's own log stream ends a read quietly (an early end, picked up by the catch-up re-read).
_STREAM_ENDED = (aiohttp.ClientConnectionError, asyncio.IncompleteReadError)


class Demultiplexer:
    """The engine's multiplexed stream (frames: 1 byte stream, 3 zero, 4 bytes big-endian length, the payload)
    as text: payloads joined and decoded as UTF-8, dropping undecodable bytes (as aiodocker does), a character or
    frame cut between two reads completed by the next."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")

    def feed(self, data: bytes) -> str:
        """The text of every whole frame received so far and not yet returned."""
        buffer = self._buffer
        buffer += data
        size, at, payloads = len(buffer), 0, []
        while size - at >= 8:
            end = at + 8 + int.from_bytes(buffer[at + 4 : at + 8], "big")
            if end > size:
                break
            payloads.append(buffer[at + 8 : end])
            at = end
        del buffer[:at]
        return self._decoder.decode(b"".join(payloads))

    def end(self) -> str:
        """What the decoder still held (bytes of a character never completed are dropped); a cut frame is lost."""
        return self._decoder.decode(b"", final=True)


def engine_log(container: DockerContainer, stream: OutputStream) -> LogRead:
    """Reads of one output stream of a container that has no TTY (Hades never asks for one: its output is
    multiplexed), followed, with timestamps."""

    async def read(since: str) -> AsyncIterator[str]:
        params: dict[str, bool | str] = {stream: True, "follow": True, "timestamps": True, "since": since}
        demultiplexer = Demultiplexer()
        timeout = container.docker._resolve_long_running_timeout(SENTINEL)
        async with container.docker._query(f"containers/{container.id}/logs", params=params, timeout=timeout) as r:
            try:
                async for data in r.content.iter_any():
                    if text := demultiplexer.feed(data):
                        yield text
            except _STREAM_ENDED:
                pass
        if text := demultiplexer.end():
            yield text

    return read


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


async def pump(read: LogRead, stream: OutputStream, logs: StepLogs, progress: Progress) -> None:
    """Follow one output stream, split it into lines and hand each to the log writer.

    The engine may end a follow before it sent everything (seen under load: 15,644 of 100,000 lines, and no
    error), so once it ends, what the engine stored after the last whole line seen is read again (a stopped
    container's stream ends once it sent what is stored), until a read brings nothing new. A line cut short
    by an early end comes back whole in the next read; the stored log's last line may lack its newline, and
    is handed on once a read brings nothing else.
    """
    seen = Seen()
    for round_ in range(_LOG_READS):
        buffer, fresh, skip = "", 0, seen.at_stamp
        async for chunk in read(seen.since()):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            now = datetime.now(UTC)  # the time of a line without a valid prefix: when its chunk arrived
            for line in lines:
                stamp = line.partition(" ")[0]
                if skip and stamp == seen.stamp:
                    skip -= 1  # handed on before this read
                    continue
                seen.add_stamp(stamp)
                fresh += 1
                if split := split_line(line, now):
                    await logs.write(stream, *split)
            progress.lines += len(lines)
        if (round_ > 0 and not fresh) or round_ == _LOG_READS - 1:
            if buffer and not (skip and buffer.partition(" ")[0] == seen.stamp):
                await _emit(buffer, stream, logs, datetime.now(UTC))
            return


async def _emit(line: str, stream: OutputStream, logs: StepLogs, now: datetime) -> None:
    split = split_line(line, now)
    if split is not None:
        await logs.write(stream, split[0], split[1])
