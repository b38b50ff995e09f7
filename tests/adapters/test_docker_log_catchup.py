"""A log stream the engine ends early is read again from the last timestamp seen, until a read brings nothing new:
every stored line is handed on exactly once, in order (the engine's follow was seen ending early under load)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hades.adapters.docker.logs import Progress, Seen, follow, pump

T = "2026-12-03T09:14:51.123456789Z"


def test_since_is_the_last_timestamp_in_seconds_and_nanoseconds() -> None:
    seen = Seen()
    for line in ("2026-12-03T09:14:50Z a", f"{T} b", f"{T} c"):
        seen.add(line)
    whole, _, nanos = seen.since().partition(".")
    assert datetime.fromtimestamp(int(whole), UTC) == datetime(2026, 12, 3, 9, 14, 51, tzinfo=UTC)
    assert nanos == "123456789"
    assert seen.at_stamp == 2


def test_short_fractions_are_padded_and_no_line_means_from_the_start() -> None:
    seen = Seen()
    assert seen.since() == "0"
    seen.add("2026-12-03T09:14:51.5Z x")
    assert seen.since().endswith(".500000000")


class StoppedContainer:
    """The engine's side: a stored log (lines with timestamps, several may share one), sent in chunks of ``chunk``
    bytes. The follow ends early after ``cuts[0]`` bytes (as seen under load); each later read is cut after
    ``cuts[i]`` bytes too, but, as a read of a stopped container's file, not before it sent one whole new line."""

    def __init__(self, lines: list[str], cuts: list[int], chunk: int, final_newline: bool) -> None:
        self.text = "".join(f"{line}\n" for line in lines)
        if not final_newline:
            self.text = self.text[:-1]
        self.cuts, self.chunk, self.reads = list(cuts), chunk, 0

    def log(self, *, follow: bool, timestamps: bool, since: str, **_: Any) -> AsyncIterator[str]:
        assert follow and timestamps
        self.reads += 1
        return self._read(since)

    async def _read(self, since: str) -> AsyncIterator[str]:
        start = 0
        if since != "0":
            for index, line in enumerate(self.text.split("\n")):
                if _epoch(line.partition(" ")[0]) >= since:
                    start = sum(len(part) + 1 for part in self.text.split("\n")[:index])
                    break
        text = self.text[start:]
        if self.cuts:
            cut = self.cuts.pop(0)
            if self.reads > 1:  # a re-read from the last line seen: it gets past that line and one more
                cut = max(cut, _end_of_line(text, 1 + text.count(f"{since_line(since, self.text)} ")))
            text = text[:cut]
        for offset in range(0, len(text), self.chunk):
            yield text[offset : offset + self.chunk]


def _end_of_line(text: str, count: int) -> int:
    """The offset just after the ``count``-th line of ``text`` (its end if it has fewer)."""
    offset = 0
    for _ in range(count):
        found = text.find("\n", offset)
        if found < 0:
            return len(text)
        offset = found + 1
    return offset


def since_line(since: str, text: str) -> str:
    """The stamp of the stored lines a re-read from ``since`` starts with."""
    for line in text.split("\n"):
        if _epoch(line.partition(" ")[0]) >= since:
            return line.partition(" ")[0]
    return "\0"


def _epoch(stamp: str) -> str:
    seen = Seen()
    seen.add(f"{stamp} x")
    return seen.since()


class Sink:
    def __init__(self) -> None:
        self.lines: list[str] = []

    async def write(self, stream: str, timestamp: datetime, message: str) -> None:
        self.lines.append(message)


@settings(max_examples=150, deadline=None)
@given(
    stamps=st.lists(st.integers(0, 5), min_size=0, max_size=25).map(sorted),
    cuts=st.lists(st.integers(0, 400), max_size=3),
    chunk=st.integers(1, 64),
    final_newline=st.booleans(),
)
def test_every_stored_line_is_handed_on_once_in_order(
    stamps: list[int], cuts: list[int], chunk: int, final_newline: bool
) -> None:
    lines = [f"2026-12-03T09:14:5{s}.00000000{s}Z line-{i}" for i, s in enumerate(stamps)]
    container = StoppedContainer(lines, cuts, chunk, final_newline)
    sink = Sink()
    reads = lambda since: container.log(follow=True, timestamps=True, since=since)  # noqa: E731
    asyncio.run(pump(reads, "stdout", sink, Progress()))  # type: ignore[arg-type]
    assert sink.lines == [f"line-{i}" for i in range(len(lines))]
    assert container.reads <= len(cuts) + 2  # the follow, a re-read per early end, one that brings nothing new


class BothStreams:
    """The engine's side for a follow of both streams: stdout's stored log cut after ``cut`` bytes (an early end),
    stderr's whole, interleaved in chunks; each stream's re-reads as :class:`StoppedContainer`'s."""

    def __init__(self, out: StoppedContainer, err: StoppedContainer, cut: int) -> None:
        self.streams = {"stdout": out, "stderr": err}
        self.cut = cut

    async def both(self) -> AsyncIterator[tuple[str, str]]:
        out, err = self.streams["stdout"].text[: self.cut], self.streams["stderr"].text
        for offset in range(0, max(len(out), len(err)), 7):
            for name, text in (("stdout", out), ("stderr", err)):
                if text[offset : offset + 7]:
                    yield name, text[offset : offset + 7]

    def one(self, stream: str) -> Any:
        container = self.streams[stream]
        container.reads = 1  # its follow was the read of both
        return lambda since: container.log(follow=True, timestamps=True, since=since)


class StreamSink:
    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}

    async def write(self, stream: str, timestamp: datetime, message: str) -> None:
        self.lines[stream].append(message)


@settings(max_examples=100, deadline=None)
@given(
    stamps=st.lists(st.integers(0, 5), min_size=0, max_size=20).map(sorted),
    cut=st.integers(0, 600),
    cuts=st.lists(st.integers(0, 400), max_size=3),
)
def test_both_streams_followed_at_once_then_caught_up_each_hand_on_every_line_once(
    stamps: list[int], cut: int, cuts: list[int]
) -> None:
    out = [f"2026-12-03T09:14:5{s}.00000000{s}Z out-{i}" for i, s in enumerate(stamps)]
    err = [f"2026-12-03T09:14:5{s}.00000000{s}Z err-{i}" for i, s in enumerate(stamps)]
    engine = BothStreams(StoppedContainer(out, cuts, 5, True), StoppedContainer(err, [], 5, False), cut)
    sink = StreamSink()
    asyncio.run(follow(engine, sink, Progress()))  # type: ignore[arg-type]
    assert sink.lines == {
        "stdout": [f"out-{i}" for i in range(len(out))],
        "stderr": [f"err-{i}" for i in range(len(err))],
    }
