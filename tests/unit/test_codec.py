"""Wire protocol v1 codec: round trips, resynchronisation, corrupt frames, split delivery."""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.codec import (
    MAX_STUFFED,
    AckFrame,
    BeepFrame,
    CardFrame,
    CorruptFrame,
    CorruptReason,
    ExpectFrame,
    Frame,
    FrameDecoder,
    HeartbeatFrame,
    LedColor,
    LedFrame,
    MisreadFrame,
    RejectFrame,
    RescanFrame,
    ResetFrame,
    StatusFrame,
    cobs_decode,
    cobs_encode,
    crc16,
    decode_raw,
    encode,
    encode_raw,
    misread_cause_name,
    wrap,
)
from drivers.errors import DriverError, FrameError

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"

# ---------------------------------------------------------------- strategies

seqs = st.integers(0, 255)
names = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=32
)
texts = st.text(max_size=60).filter(lambda t: len(t.encode("utf-8", "surrogatepass")) <= 255)
texts = texts.filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))

frames: st.SearchStrategy[Frame] = st.one_of(
    st.builds(CardFrame, seq=seqs, value=names, position=st.none() | names),
    st.builds(MisreadFrame, seq=seqs, cause=st.integers(0, 255), text=texts),
    st.builds(
        HeartbeatFrame, seq=seqs, uptime_s=st.integers(0, 2**32 - 1), completed=st.none() | seqs
    ),
    st.builds(StatusFrame, seq=seqs, state=names, detail=texts),
    st.builds(AckFrame, seq=seqs, acked=seqs),
    st.builds(
        ExpectFrame,
        seq=seqs,
        round_no=st.integers(0, 2**32 - 1),
        slot_index=st.integers(0, 255),
        slot_name=names,
    ),
    st.builds(RescanFrame, seq=seqs, slot_name=st.just("") | names, reason=texts),
    st.builds(RejectFrame, seq=seqs, slot_name=st.just("") | names, reason=texts),
    st.builds(
        LedFrame,
        seq=seqs,
        color=st.sampled_from(LedColor),
        blink=st.booleans(),
        duration_ms=st.integers(0, 65535),
    ),
    st.builds(BeepFrame, seq=seqs, count=st.integers(1, 255), duration_ms=st.integers(1, 65535)),
    st.builds(ResetFrame, seq=seqs),
)


def good_frames(items: Sequence[object]) -> list[object]:
    return [item for item in items if not isinstance(item, CorruptFrame)]


# ---------------------------------------------------------------- CRC and COBS


def test_crc_is_ccitt_false() -> None:
    # Bitwise CRC-16/CCITT-FALSE written out here, independent of binascii.
    def reference(data: bytes) -> int:
        crc = 0xFFFF
        for byte in data:
            crc ^= byte << 8
            for _ in range(8):
                crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
                crc &= 0xFFFF
        return crc

    for sample in (b"", b"123456789", bytes(range(256)), b"\x00" * 7):
        assert crc16(sample) == reference(sample)


@settings(deadline=None)
@given(st.binary(max_size=700))
def test_cobs_round_trip_and_no_zero(data: bytes) -> None:
    stuffed = cobs_encode(data)
    assert 0 not in stuffed
    assert len(stuffed) <= len(data) + len(data) // 254 + 1
    assert cobs_decode(stuffed) == data


def test_cobs_refuses_non_canonical_and_broken() -> None:
    data = bytes(range(1, 255))  # 254 non-zero bytes: the encoder ends with an empty block
    canonical = cobs_encode(data)
    assert canonical[0] == 0xFF
    assert canonical[-1] == 0x01
    assert cobs_decode(canonical) == data
    assert cobs_decode(canonical[:-1]) is None  # decodes to the same bytes: not canonical
    assert cobs_decode(b"\x05\x01\x02") is None  # code points past the end
    assert cobs_decode(b"\x02\x00") is None  # a zero inside


# ---------------------------------------------------------------- round trips


@settings(deadline=None, max_examples=300)
@given(frames)
def test_every_frame_type_round_trips(frame: Frame) -> None:
    wire = encode(frame)
    assert wire[0] == 0
    assert wire[-1] == 0
    assert 0 not in wire[1:-1]
    decoder = FrameDecoder()
    assert decoder.feed(wire) == [frame]
    assert decoder.garbage_bytes == 0


def test_doc_examples_decode_and_reencode() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## 9. Examples") :]
    rows = re.findall(r"^\| (.+?) \| `([0-9a-f ]+)` \| `([0-9a-f ]+)` \|$", section, re.M)
    assert len(rows) >= 12
    for label, raw_hex, wire_hex in rows:
        raw, wire = bytes.fromhex(raw_hex), bytes.fromhex(wire_hex)
        items = FrameDecoder().feed(wire)
        assert len(items) == 1, label
        frame = items[0]
        assert not isinstance(frame, CorruptFrame), (label, frame)
        assert encode_raw(frame) == raw, label
        assert encode(frame) == wire, label
        assert wrap(raw) == wire, label
    # A few pinned by hand, so the doc cannot drift with the code.
    assert encode(CardFrame(seq=7, value="As")).hex(" ") == "00 0a 01 01 07 03 02 41 73 ee 6e 00"
    assert encode(AckFrame(seq=3, acked=7)).hex(" ") == "00 08 01 81 03 01 07 0a 57 00"


# ---------------------------------------------------------------- resynchronisation


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.binary(max_size=40), frames), max_size=8),
    st.binary(max_size=40),
)
def test_garbage_never_swallows_a_frame(pairs: list[tuple[bytes, Frame]], tail: bytes) -> None:
    stream = b"".join(garbage + encode(frame) for garbage, frame in pairs) + tail
    decoder = FrameDecoder()
    out = good_frames(decoder.feed(stream))
    assert out == [frame for _, frame in pairs]


@settings(deadline=None)
@given(st.lists(frames, min_size=1, max_size=6), st.data())
def test_split_delivery_gives_the_same_items(batch: list[Frame], data: st.DataObject) -> None:
    garbage = data.draw(st.binary(max_size=30))
    stream = garbage + b"".join(encode(frame) for frame in batch)
    whole = FrameDecoder().feed(stream)
    one_by_one: list[object] = []
    decoder = FrameDecoder()
    for index in range(len(stream)):
        one_by_one += decoder.feed(stream[index : index + 1])
    assert one_by_one == whole
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    pieces: list[object] = []
    decoder = FrameDecoder()
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        pieces += decoder.feed(stream[start:end])
    assert pieces == whole
    assert good_frames(whole) == batch


def test_garbage_is_counted_not_reported() -> None:
    decoder = FrameDecoder()
    frame = CardFrame(seq=1, value="Kd")
    items = decoder.feed(b"\x01\x02\x03" + encode(frame) + b"\xff\xfe")
    assert items == [frame]
    assert decoder.feed(b"\x00") == []  # the tail is closed by a delimiter: garbage
    assert decoder.garbage_bytes == 5


def test_overlong_run_is_garbage_and_the_next_frame_survives() -> None:
    decoder = FrameDecoder()
    frame = StatusFrame(seq=4, state="ready")
    items = decoder.feed(b"\x07" * (MAX_STUFFED + 50) + encode(frame))
    assert items == [frame]
    assert decoder.garbage_bytes == MAX_STUFFED + 50


# ---------------------------------------------------------------- corrupt frames


@settings(deadline=None)
@given(frames, st.data())
def test_a_flipped_bit_is_a_crc_failure(frame: Frame, data: st.DataObject) -> None:
    raw = bytearray(encode_raw(frame))
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] ^= 1 << data.draw(st.integers(0, 7))
    follower = CardFrame(seq=9, value="2c")
    items = FrameDecoder().feed(wrap(bytes(raw)) + encode(follower))
    assert len(items) == 2
    assert isinstance(items[0], CorruptFrame)
    assert items[0].reason is CorruptReason.CRC
    assert items[1] == follower


def _with_crc(body: bytes) -> bytes:
    return body + binascii.crc_hqx(body, 0xFFFF).to_bytes(2, "big")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\x02\x01\x00\x03\x02As", CorruptReason.VERSION),
        (b"\x01\x01\x00\x04\x02As", CorruptReason.LENGTH),
        (b"\x01\x01\x00\x02\x02As", CorruptReason.LENGTH),
        (b"\x01\x42\x00\x00", CorruptReason.TYPE),
        (b"\x01\x01\x00\x04\x02As\x00", CorruptReason.PAYLOAD),  # empty position
        (b"\x01\x01\x00\x04\x03As\x00", CorruptReason.PAYLOAD),  # value with a zero
        (b"\x01\x01\x00\x03\x02A ", CorruptReason.PAYLOAD),  # space in a value
        (b"\x01\x01\x00\x04\x02AsX", CorruptReason.PAYLOAD),  # truncated position
        (b"\x01\x81\x00\x02\x05\x06", CorruptReason.PAYLOAD),  # ACK with a trailing byte
        (b"\x01\x02\x00\x03\x01\x01\xff", CorruptReason.PAYLOAD),  # text not UTF-8
        (b"\x01\x85\x00\x04\x09\x00\x00\x00", CorruptReason.PAYLOAD),  # unknown colour
        (b"\x01\x85\x00\x04\x01\x02\x00\x00", CorruptReason.PAYLOAD),  # blink byte 2
        (b"\x01\x86\x00\x03\x00\x00\x10", CorruptReason.PAYLOAD),  # zero beeps
        (b"\x01\x87\x00\x01\x00", CorruptReason.PAYLOAD),  # RESET with a payload
    ],
)
def test_corrupt_reasons(body: bytes, reason: CorruptReason) -> None:
    items = FrameDecoder().feed(wrap(_with_crc(body)))
    assert len(items) == 1
    item = items[0]
    assert isinstance(item, CorruptFrame)
    assert item.reason is reason
    assert item.detail
    assert decode_raw(_with_crc(body)) == item


def test_decoder_counts() -> None:
    decoder = FrameDecoder()
    bad = bytearray(encode_raw(CardFrame(seq=1, value="As")))
    bad[5] ^= 0x10
    decoder.feed(encode(CardFrame(seq=0, value="Ah")) + wrap(bytes(bad)) + b"xyz\x00")
    assert (decoder.frames, decoder.corrupt, decoder.garbage_bytes) == (1, 1, 3)


# ---------------------------------------------------------------- encoding refusals


@pytest.mark.parametrize(
    "build",
    [
        lambda: CardFrame(seq=256, value="As"),
        lambda: CardFrame(seq=-1, value="As"),
        lambda: CardFrame(value=""),
        lambda: CardFrame(value="A s"),
        lambda: CardFrame(value="x" * 33),
        lambda: CardFrame(value="Aé"),
        lambda: CardFrame(value="As", position=""),
        lambda: MisreadFrame(cause=256),
        lambda: MisreadFrame(text="é" * 200),
        lambda: HeartbeatFrame(uptime_s=2**32),
        lambda: HeartbeatFrame(completed=256),
        lambda: StatusFrame(state=""),
        lambda: AckFrame(acked=300),
        lambda: ExpectFrame(round_no=-1, slot_index=0, slot_name="A1"),
        lambda: ExpectFrame(round_no=1, slot_index=256, slot_name="A1"),
        lambda: ExpectFrame(round_no=1, slot_index=0, slot_name=""),
        lambda: RejectFrame(slot_name="A 1"),
        lambda: LedFrame(color=9),  # type: ignore[arg-type]
        lambda: LedFrame(color=LedColor.RED, duration_ms=70000),
        lambda: BeepFrame(count=0),
        lambda: BeepFrame(duration_ms=0),
        lambda: AckFrame(acked=True),  # a bool is not a sequence number
    ],
)
def test_invalid_frames_are_refused(build: object) -> None:
    with pytest.raises(FrameError) as info:
        build()  # type: ignore[operator]
    assert isinstance(info.value, DriverError)
    assert info.value.context.get("field")
    assert "must" in str(info.value) or "longer" in str(info.value)


def test_payload_too_long_is_refused() -> None:
    frame = StatusFrame(state="x" * 32, detail="y" * 250)  # each text fits, together not
    with pytest.raises(FrameError, match="payload of"):
        encode(frame)


def test_misread_cause_names() -> None:
    assert misread_cause_name(1) == "unreadable"
    assert misread_cause_name(3) == "double-feed"
    assert misread_cause_name(17) == "code-17"


def test_led_colour_is_normalised() -> None:
    frame = LedFrame(color=3)  # type: ignore[arg-type]
    assert frame.color is LedColor.RED
