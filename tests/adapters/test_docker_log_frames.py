"""The engine's multiplexed log stream, read in chunks of any size, gives per stream the text aiodocker's
frame-at-a-time reader gives: that stream's payloads joined and decoded as UTF-8 with undecodable bytes dropped."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from hades.adapters.docker.logs import Demultiplexer

_PAYLOADS = st.lists(
    st.tuples(
        st.sampled_from([1, 2]),
        st.one_of(st.text(max_size=40).map(lambda text: text.encode()), st.binary(max_size=40)),
    ),
    max_size=30,
)


def _frames(frames: list[tuple[int, bytes]]) -> bytes:
    return b"".join(bytes([kind, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload for kind, payload in frames)


@given(frames=_PAYLOADS, cuts=st.lists(st.integers(0, 2000), max_size=12), trailing=st.binary(max_size=11))
def test_frames_read_in_any_chunks_give_each_streams_joined_decoded_payloads(
    frames: list[tuple[int, bytes]], cuts: list[int], trailing: bytes
) -> None:
    wire = _frames(frames) + (b"\x01\x00\x00\x00\x00\x00\x00\x0c" + trailing if trailing else b"")  # a cut frame
    bounds = sorted({0, len(wire), *(cut % (len(wire) + 1) for cut in cuts)})
    demultiplexer = Demultiplexer()
    runs = [run for start, end in itertools.pairwise(bounds) for run in demultiplexer.feed(wire[start:end])]
    runs += demultiplexer.end()
    for kind, name in ((1, "stdout"), (2, "stderr")):
        expected = b"".join(payload for k, payload in frames if k == kind).decode("utf-8", errors="ignore")
        assert "".join(text for stream, text in runs if stream == name) == expected
