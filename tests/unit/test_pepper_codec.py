"""The Eccel Pepper C1 codec (drivers/pepper.py): framing, CRC, replies; any bytes in."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drivers.errors import FrameError
from drivers.pepper import (
    MAX_PAYLOAD,
    STX,
    Ack,
    AsyncEvent,
    Command,
    ErrorReply,
    PepperCorrupt,
    PepperDecoder,
    PepperFrame,
    TagUid,
    ack,
    crc,
    encode_frame,
    error,
    parse_reply,
    parse_uid,
    request,
)

EXAMPLES = int(os.environ.get("TABLECTL_FUZZ_EXAMPLES", "500"))
FUZZ = settings(
    deadline=None,
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_crc_is_ccitt_false() -> None:
    # The catalogue's check value of CRC-16/CCITT-FALSE.
    assert crc(b"123456789") == 0x29B1


def test_a_frame_is_laid_out_as_documented() -> None:
    frame = encode_frame(bytes([0x02]))
    check = crc(b"\x02")
    assert frame == bytes([0xF5, 0x03, 0x00, 0xFC, 0xFF, 0x02, check & 0xFF, check >> 8])
    assert request(Command.SET_ACTIVE_ANTENNA, 3)[5:7] == b"\x0f\x03"


@pytest.mark.parametrize("size", [0, MAX_PAYLOAD + 1])
def test_payload_bounds(size: int) -> None:
    with pytest.raises(FrameError, match="payload"):
        encode_frame(bytes(size))


def test_replies() -> None:
    assert parse_reply(b"\x00\x02\x01") == Ack(0x02, b"\x01")
    assert parse_reply(b"\xff\x03\x01\x02") == ErrorReply(0x03, 0x0201)
    assert parse_reply(b"\xff\x03") == ErrorReply(0x03, 0)
    assert parse_reply(b"\xfe\x01\x02") == AsyncEvent(b"\x01\x02")
    assert parse_reply(b"") is None
    assert parse_reply(b"\x00") is None
    assert parse_reply(b"\x42\x00") is None
    uid = bytes.fromhex("04A2B3C4D5E6F7")
    assert parse_uid(b"\x01\x00" + uid) == TagUid(1, 0, "04A2B3C4D5E6F7")
    assert parse_uid(b"\x01\x00\x01\x02\x03") is None  # a 3-byte UID is none
    assert parse_uid(b"\x01\x00" + bytes(11)) is None


def test_a_garbled_frame_is_reported_and_the_next_one_found() -> None:
    good = ack(Command.GET_TAG_COUNT, b"\x02")
    garbled = bytearray(ack(Command.GET_UID, b"\x01\x00" + bytes(7)))
    garbled[8] ^= 0x40
    decoder = PepperDecoder()
    out = decoder.feed(b"\x00\x13" + bytes(garbled) + good)
    assert [type(item) for item in out] == [PepperCorrupt, PepperCorrupt, PepperFrame]
    first, second, third = out
    assert isinstance(first, PepperCorrupt) and first.reason == "noise" and first.size == 2
    assert isinstance(second, PepperCorrupt) and second.reason == "crc"
    assert third == PepperFrame(b"\x00\x02\x02")
    assert decoder.pending == 0


def test_frames_split_anywhere_come_out_whole() -> None:
    stream = ack(Command.GET_TAG_COUNT, b"\x01") + error(Command.GET_UID, 0x0102)
    decoder = PepperDecoder()
    out: list[PepperFrame | PepperCorrupt] = []
    for byte in stream:
        out += decoder.feed(bytes([byte]))
    assert out == [PepperFrame(b"\x00\x02\x01"), PepperFrame(b"\xff\x03\x02\x01")]


def test_a_bad_header_drops_one_byte_and_resynchronises() -> None:
    good = ack(Command.SET_ACTIVE_ANTENNA)
    out = PepperDecoder().feed(bytes([STX, 0x05, 0x00, 0x00, 0x00]) + good)
    assert isinstance(out[0], PepperCorrupt) and out[0].reason == "header"
    assert out[-1] == PepperFrame(b"\x00\x0f")


def test_an_absurd_length_is_corrupt_not_awaited() -> None:
    out = PepperDecoder().feed(bytes([STX, 0xFF, 0xFF, 0x00, 0x00]))
    assert isinstance(out[0], PepperCorrupt) and out[0].reason == "length"


_payloads = st.binary(min_size=1, max_size=64)


@FUZZ
@given(payloads=st.lists(_payloads, max_size=8), cuts=st.lists(st.integers(0, 600), max_size=8))
def test_round_trip_however_the_bytes_are_cut(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = PepperDecoder()
    out: list[PepperFrame | PepperCorrupt] = []
    last = 0
    for cut in sorted(c % (len(stream) + 1) for c in cuts):
        out += decoder.feed(stream[last:cut])
        last = cut
    out += decoder.feed(stream[last:])
    assert out == [PepperFrame(p) for p in payloads]
    assert decoder.pending == 0


@FUZZ
@given(
    data=st.lists(
        st.one_of(
            st.binary(max_size=40),
            _payloads.map(encode_frame),
            st.tuples(_payloads, st.integers(0, 200), st.integers(1, 255)).map(
                lambda t: _flip(encode_frame(t[0]), t[1], t[2])
            ),
            st.just(bytes([STX])),
        ),
        max_size=12,
    )
)
def test_any_bytes_never_raise_and_every_byte_is_accounted_for(data: list[bytes]) -> None:
    decoder = PepperDecoder()
    total = 0
    for chunk in data:
        for item in decoder.feed(chunk):
            if isinstance(item, PepperFrame):
                assert 1 <= len(item.payload) <= MAX_PAYLOAD
                total += len(encode_frame(item.payload))
            else:
                assert item.size >= 1 and item.detail
                total += item.size
            parse_reply(item.payload) if isinstance(item, PepperFrame) else None
    assert total + decoder.pending == sum(len(chunk) for chunk in data)


@FUZZ
@given(noise=st.binary(max_size=80), payload=_payloads)
def test_a_good_frame_after_any_noise_is_found(noise: bytes, payload: bytes) -> None:
    decoder = PepperDecoder()
    decoder.feed(noise)
    decoder.reset()  # a reopened port forgets the partial frame
    assert decoder.feed(encode_frame(payload)) == [PepperFrame(payload)]


def _flip(frame: bytes, index: int, mask: int) -> bytes:
    changed = bytearray(frame)
    changed[index % len(changed)] ^= mask
    return bytes(changed)
