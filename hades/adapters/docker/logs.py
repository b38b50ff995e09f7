"""Following a step container's stdout and stderr into its log writer, and the catch-up re-read of a stopped
container's stored log when the engine ends a follow early."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from aiodocker.containers import DockerContainer

from hades.core.logs import OutputStream, is_timestamp, parse_timestamp, split_line
from hades.core.ports import StepLogs

#: After a container exits, how long its log streams may go without delivering a line before they are given up
#: (a stream that keeps delivering is followed to its end, however long the backlog: nothing is cut by a clock).
LOG_DRAIN_SECONDS = 10.0

_DIGITS = re.compile(r"[0-9]*")
#: Reads of one output stream at most: the follow, then re-reads of a stopped container's stored log (each
#: normally one request that brings nothing new).
_LOG_READS = 5


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
        stamp = line.partition(" ")[0]
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


async def pump(container: DockerContainer, stream: OutputStream, logs: StepLogs, progress: Progress) -> None:
    """Follow one output stream, split it into lines and hand each to the log writer.

    The engine may end a follow before it sent everything (seen under load: 15,644 of 100,000 lines, and no
    error), so once it ends, what the engine stored after the last whole line seen is read again (a stopped
    container's stream ends once it sent what is stored), until a read brings nothing new. A line cut short
    by an early end comes back whole in the next read; the stored log's last line may lack its newline, and
    is handed on once a read brings nothing else.
    """
    seen = Seen()
    flags = {"stdout": stream == "stdout", "stderr": stream == "stderr"}
    for round_ in range(_LOG_READS):
        buffer, fresh, skip = "", 0, seen.at_stamp
        async for chunk in container.log(follow=True, timestamps=True, since=seen.since(), **flags):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            now = datetime.now(UTC)  # the time of a line without a valid prefix: when its chunk arrived
            for line in lines:
                if skip and line.partition(" ")[0] == seen.stamp:
                    skip -= 1  # handed on before this read
                    continue
                seen.add(line)
                fresh += 1
                await _emit(line, stream, logs, now)
            progress.lines += len(lines)
        if (round_ > 0 and not fresh) or round_ == _LOG_READS - 1:
            if buffer and not (skip and buffer.partition(" ")[0] == seen.stamp):
                await _emit(buffer, stream, logs, datetime.now(UTC))
            return


async def _emit(line: str, stream: OutputStream, logs: StepLogs, now: datetime) -> None:
    split = split_line(line, now)
    if split is not None:
        await logs.write(stream, split[0], split[1])
