"""Fuzz the frame decoder with arbitrary bytes.

``make test`` runs 500 examples per test. The dedicated run is::

    TABLECTL_FUZZ_EXAMPLES=100000 .venv/bin/pytest tests/unit/test_codec_fuzz.py
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drivers.codec import (
    CardFrame,
    CorruptFrame,
    CorruptReason,
    FrameDecoder,
    HeartbeatFrame,
    MisreadFrame,
    StatusFrame,
    crc16,
    encode,
    encode_raw,
)

EXAMPLES = int(os.environ.get("TABLECTL_FUZZ_EXAMPLES", "500"))
FUZZ = settings(
    deadline=None,
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Fragments that make the fuzz reach deep: whole valid frames, frames with a byte changed,
# cut frames, and delimiters, mixed with arbitrary bytes.
_valid = st.one_of(
    st.builds(CardFrame, seq=st.integers(0, 255), value=st.sampled_from(["As", "JK", "5p", "wd"])),
    st.builds(MisreadFrame, seq=st.integers(0, 255), cause=st.integers(0, 255)),
    st.builds(HeartbeatFrame, uptime_s=st.integers(0, 2**32 - 1)),
    st.builds(StatusFrame, seq=st.integers(0, 255), state=st.sampled_from(["boot", "ready"])),
).map(encode)


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    wire = bytearray(draw(_valid))
    index = draw(st.integers(0, len(wire) - 1))
    wire[index] = draw(st.integers(0, 255))
    cut = draw(st.integers(1, len(wire)))
    return bytes(wire[:cut]) if draw(st.booleans()) else bytes(wire)


streams = st.lists(
    st.one_of(st.binary(max_size=64), _valid, _mutated(), st.just(b"\x00")), max_size=12
).map(b"".join)


def _check(data: bytes, items: list[object]) -> None:
    for item in items:
        if isinstance(item, CorruptFrame):
            body, crc = item.raw[:-2], int.from_bytes(item.raw[-2:], "big")
            if item.reason is CorruptReason.CRC:
                assert crc16(body) != crc
            else:
                assert crc16(body) == crc
            continue
        raw = encode_raw(item)  # type: ignore[arg-type]
        assert crc16(raw[:-2]) == int.from_bytes(raw[-2:], "big")
        stuffed = encode(item)[1:-1]  # type: ignore[arg-type]
        assert stuffed in data, f"{item!r} re-encodes to bytes that were not in the input"


@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    decoder = FrameDecoder()
    items: list[object] = list(decoder.feed(data))
    _check(data, items)


@FUZZ
@given(streams, st.lists(st.integers(0, 4096), max_size=8))
def test_mixed_streams_split_anywhere(data: bytes, cuts: list[int]) -> None:
    whole = FrameDecoder().feed(data)
    _check(data, list(whole))
    decoder = FrameDecoder()
    pieces: list[object] = []
    bounds = sorted(min(cut, len(data)) for cut in cuts)
    for start, end in zip([0, *bounds], [*bounds, len(data)], strict=True):
        pieces += decoder.feed(data[start:end])
    assert pieces == whole
