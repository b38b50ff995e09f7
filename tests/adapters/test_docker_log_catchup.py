"""After the engine ends a log follow, the stream is read once more from the last timestamp seen: exactly the lines
not handed on yet come out of that read (the engine's follow was seen ending early under load)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from hades.adapters.docker.executor import _Seen

T = "2026-12-03T09:14:51.123456789Z"


def test_since_is_the_last_timestamp_in_seconds_and_nanoseconds() -> None:
    seen = _Seen()
    for line in ("2026-12-03T09:14:50Z a", f"{T} b", f"{T} c"):
        seen.add(line)
    whole, _, nanos = seen.since().partition(".")
    assert datetime.fromtimestamp(int(whole), UTC) == datetime(2026, 12, 3, 9, 14, 51, tzinfo=UTC)
    assert nanos == "123456789"
    assert seen.at_stamp == 2


def test_short_fractions_are_padded_and_no_line_means_from_the_start() -> None:
    seen = _Seen()
    assert seen.since() == "0"
    seen.add("2026-12-03T09:14:51.5Z x")
    assert seen.since().endswith(".500000000")


@given(
    stamps=st.lists(st.integers(0, 3), min_size=1, max_size=30).map(sorted),
    cut=st.integers(0, 30),
)
def test_the_re_read_yields_exactly_the_lines_not_seen(stamps: list[int], cut: int) -> None:
    """Lines (several may share a timestamp); the follow ends after ``cut`` of them; the engine's re-read from the
    last timestamp seen returns every line at or after it. Seen + re-read = every line once, in order."""
    lines = [f"2026-12-03T09:14:5{s}.000000001Z line-{i}" for i, s in enumerate(stamps)]
    cut = min(cut, len(lines))
    seen = _Seen()
    for line in lines[:cut]:
        seen.add(line)
    last = seen.stamp
    reread = [line for line in lines if not last or line.partition(" ")[0] >= last]
    assert lines[:cut] + seen.after(reread) == lines
