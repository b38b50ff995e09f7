"""The engine's multiplexed log stream, read in chunks of any size, gives the text aiodocker's frame-at-a-time
reader gives: the payloads joined and decoded as UTF-8 with undecodable bytes dropped."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from hades.adapters.docker.logs import Demultiplexer

_PAYLOADS = st.lists(
    st.one_of(st.text(max_size=40).map(lambda text: text.encode()), st.binary(max_size=40)),
    max_size=30,
)


def _frames(payloads: list[bytes]) -> bytes:
    return b"".join(b"\x01\x00\x00\x00" + len(payload).to_bytes(4, "big") + payload for payload in payloads)


@given(payloads=_PAYLOADS, cuts=st.lists(st.integers(0, 2000), max_size=12), trailing=st.binary(max_size=11))
def test_frames_read_in_any_chunks_give_the_joined_decoded_payloads(
    payloads: list[bytes], cuts: list[int], trailing: bytes
) -> None:
    stream = _frames(payloads)
    wire = stream + (b"\x01\x00\x00\x00\x00\x00\x00\x0c" + trailing if trailing else b"")  # a frame cut short
    bounds = sorted({0, len(wire), *(cut % (len(wire) + 1) for cut in cuts)})
    demultiplexer = Demultiplexer()
    text = "".join(demultiplexer.feed(wire[start:end]) for start, end in itertools.pairwise(bounds))
    text += demultiplexer.end()
    assert text == b"".join(payloads).decode("utf-8", errors="ignore")
