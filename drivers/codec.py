"""Wire protocol v1 between a card scanner (shoe) and the table controller: the pure codec.

Bytes in, frames out; no I/O, no clock. The byte layout, every frame type and the rules of
sequencing, acknowledgement, retransmission, heartbeats and versioning are in
``docs/protocol.md``; this module is their executable form.

On the wire a frame is ``0x00 · COBS(raw) · 0x00`` where ``raw`` is::

    version(1) type(1) seq(1) length(1) payload(length) crc16(2, big-endian)

and the CRC is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, ``binascii.crc_hqx(data,
0xFFFF)``) over ``version .. payload``. COBS guarantees that ``0x00`` never occurs inside a
frame, so a zero byte always ends whatever came before it: garbage can never swallow the
frame that follows it.
"""

from __future__ import annotations

import binascii
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Final, Self

from drivers.errors import FrameError

PROTOCOL_VERSION: Final = 1
DELIMITER: Final = 0x00
HEADER_SIZE: Final = 4
CRC_SIZE: Final = 2
MAX_PAYLOAD: Final = 255
MIN_RAW: Final = HEADER_SIZE + CRC_SIZE
MAX_RAW: Final = HEADER_SIZE + MAX_PAYLOAD + CRC_SIZE
MAX_STUFFED: Final = MAX_RAW + (MAX_RAW + 253) // 254
"""The longest COBS-encoded frame (without delimiters); longer runs are garbage."""

MAX_NAME: Final = 32
"""Longest slot name, position, status state or card value (ASCII, no spaces)."""


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (poly 0x1021, init 0xFFFF, no reflection, no xor-out)."""
    return binascii.crc_hqx(data, 0xFFFF)


# --------------------------------------------------------------------------- COBS


def cobs_encode(data: bytes) -> bytes:
    """Consistent Overhead Byte Stuffing: the result has no zero byte.

    Every run of up to 254 non-zero bytes is preceded by a code byte giving its length + 1;
    a code below 0xFF also stands for a zero that followed the run in ``data``.
    """
    out = bytearray()
    code_at = 0
    out.append(0)
    code = 1
    for byte in data:
        if byte == 0:
            out[code_at] = code
            code_at = len(out)
            out.append(0)
            code = 1
            continue
        out.append(byte)
        code += 1
        if code == 0xFF:
            out[code_at] = code
            code_at = len(out)
            out.append(0)
            code = 1
    out[code_at] = code
    return bytes(out)


def cobs_decode(data: bytes) -> bytes | None:
    """Undo :func:`cobs_encode`; ``None`` when ``data`` is not a canonical COBS encoding.

    Canonical means exactly what :func:`cobs_encode` produces, so that every frame has one
    and only one wire form (a decoded frame re-encodes to the very bytes it came from).
    """
    out = bytearray()
    index = 0
    size = len(data)
    while index < size:
        code = data[index]
        if code == 0 or index + code > size:
            return None
        out += data[index + 1 : index + code]
        index += code
        if code < 0xFF and index < size:
            out.append(0)
    result = bytes(out)
    if cobs_encode(result) != data:
        return None
    return result


# --------------------------------------------------------------------------- types


class FrameType(enum.IntEnum):
    """Frame type codes. The high bit says the direction: set for host → device."""

    CARD = 0x01
    MISREAD = 0x02
    HEARTBEAT = 0x03
    STATUS = 0x04
    ACK = 0x81
    EXPECT = 0x82
    RESCAN = 0x83
    REJECT = 0x84
    LED = 0x85
    BEEP = 0x86
    RESET = 0x87

    @property
    def from_host(self) -> bool:
        """Whether the host sends this type (high bit set)."""
        return bool(self.value & 0x80)


class MisreadCause(enum.IntEnum):
    """Why the scanner could not read a card (MISREAD cause byte). Other values are legal."""

    UNSPECIFIED = 0
    UNREADABLE = 1
    AMBIGUOUS = 2
    DOUBLE_FEED = 3
    OBSTRUCTED = 4
    OTHER = 255


def misread_cause_name(code: int) -> str:
    """A readable name for a MISREAD cause code (``"unreadable"``, ``"code-17"``)."""
    try:
        return MisreadCause(code).name.lower().replace("_", "-")
    except ValueError:
        return f"code-{code}"


class LedColor(enum.IntEnum):
    """LED colours of the LED frame."""

    OFF = 0
    GREEN = 1
    AMBER = 2
    RED = 3
    BLUE = 4
    WHITE = 5


class CorruptReason(enum.StrEnum):
    """Why a delimited run of bytes that looked like a frame was refused."""

    CRC = "crc"
    VERSION = "version"
    LENGTH = "length"
    TYPE = "type"
    PAYLOAD = "payload"


# --------------------------------------------------------------------------- field helpers


class _PayloadError(Exception):
    """Internal: a payload that does not parse (turned into a CorruptFrame)."""


def _check_u(name: str, value: int, bits: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise FrameError(f"{name} must be an integer 0-{(1 << bits) - 1}", field=name, value=value)


def _is_name(text: str) -> bool:
    return 1 <= len(text) <= MAX_NAME and all(0x21 <= ord(char) <= 0x7E for char in text)


def _check_name(name: str, value: str, *, allow_empty: bool = False) -> None:
    if not isinstance(value, str) or not (_is_name(value) or (allow_empty and value == "")):
        least = 0 if allow_empty else 1
        raise FrameError(
            f"{name} must be {least}-{MAX_NAME} printable ASCII characters without spaces",
            field=name,
            value=value,
        )


def _check_text(name: str, value: str) -> None:
    if not isinstance(value, str):
        raise FrameError(f"{name} must be a string", field=name, value=value)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise FrameError(f"{name} is not encodable as UTF-8", field=name, value=value) from exc
    if size > MAX_PAYLOAD:
        raise FrameError(f"{name} is longer than {MAX_PAYLOAD} bytes", field=name, value=value)


class _Out:
    def __init__(self) -> None:
        self.data = bytearray()

    def u8(self, value: int) -> _Out:
        self.data.append(value)
        return self

    def u16(self, value: int) -> _Out:
        self.data += value.to_bytes(2, "big")
        return self

    def u32(self, value: int) -> _Out:
        self.data += value.to_bytes(4, "big")
        return self

    def text(self, value: str) -> _Out:
        raw = value.encode("utf-8")
        self.data.append(len(raw))
        self.data += raw
        return self


class _In:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise _PayloadError("payload ends inside a field")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def u8(self) -> int:
        return self._take(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self._take(2), "big")

    def u32(self) -> int:
        return int.from_bytes(self._take(4), "big")

    def text(self) -> str:
        size = self.u8()
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _PayloadError("text field is not UTF-8") from exc

    def name(self, what: str, *, allow_empty: bool = False) -> str:
        value = self.text()
        if allow_empty and value == "":
            return value
        if not _is_name(value):
            raise _PayloadError(f"{what} {value!r} is not 1-{MAX_NAME} printable ASCII chars")
        return value

    def end(self) -> None:
        if self.remaining:
            raise _PayloadError(f"{self.remaining} unexpected byte(s) after the last field")


# --------------------------------------------------------------------------- frames


@dataclass(frozen=True, slots=True, kw_only=True)
class _FrameBase:
    """Fields every frame has.

    Attributes:
        seq: The sender's sequence number, 0-255 (see docs/protocol.md for which frames
            consume one).
    """

    TYPE: ClassVar[FrameType]

    seq: int = 0

    def __post_init__(self) -> None:
        _check_u("seq", self.seq, 8)
        self._validate()

    def _validate(self) -> None:
        """Check the type's own fields; raise FrameError."""

    def payload(self) -> bytes:
        """The frame's payload bytes."""
        return b""


@dataclass(frozen=True, slots=True, kw_only=True)
class CardFrame(_FrameBase):
    """Device → host: a card or tile was read.

    Attributes:
        value: The piece in our notation, as read (``"As"``, ``"JK"``, ``"5p"``, ``"wd"``).
        position: Where it was read, for scanners that know (``"A1"``, ``"seat3"``).
    """

    TYPE: ClassVar[FrameType] = FrameType.CARD

    value: str
    position: str | None = None

    def _validate(self) -> None:
        _check_name("value", self.value)
        if self.position is not None:
            _check_name("position", self.position)

    def payload(self) -> bytes:
        """Value, then the position only when there is one."""
        out = _Out().text(self.value)
        if self.position is not None:
            out.text(self.position)
        return bytes(out.data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> CardFrame:
        value = data.name("card value")
        position = data.name("position") if data.remaining else None
        data.end()
        return cls(seq=seq, value=value, position=position)


@dataclass(frozen=True, slots=True, kw_only=True)
class MisreadFrame(_FrameBase):
    """Device → host: something was scanned but could not be read.

    Attributes:
        cause: A :class:`MisreadCause` code (any 0-255 is carried).
        text: Free text from the device (may be empty).
    """

    TYPE: ClassVar[FrameType] = FrameType.MISREAD

    cause: int = MisreadCause.UNREADABLE
    text: str = ""

    def _validate(self) -> None:
        _check_u("cause", self.cause, 8)
        _check_text("text", self.text)

    def payload(self) -> bytes:
        """Cause byte then text."""
        return bytes(_Out().u8(self.cause).text(self.text).data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> MisreadFrame:
        cause = data.u8()
        text = data.text()
        data.end()
        return cls(seq=seq, cause=cause, text=text)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatFrame(_FrameBase):
    """Device → host: I am alive. Unsequenced (seq is sent as 0 and ignored), never ACKed.

    Attributes:
        uptime_s: Seconds since the device started (wraps at 2**32).
        completed: The seq of the last sequenced frame the device is done with (ACKed or
            given up), or ``None`` before the first one since boot. Lets the host see a frame
            the device gave up on even when no later frame follows.
    """

    TYPE: ClassVar[FrameType] = FrameType.HEARTBEAT

    uptime_s: int = 0
    completed: int | None = None

    def _validate(self) -> None:
        _check_u("uptime_s", self.uptime_s, 32)
        if self.completed is not None:
            _check_u("completed", self.completed, 8)

    def payload(self) -> bytes:
        """Uptime as u32, then the completed seq (u8) when there is one."""
        out = _Out().u32(self.uptime_s)
        if self.completed is not None:
            out.u8(self.completed)
        return bytes(out.data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> HeartbeatFrame:
        uptime = data.u32()
        completed = data.u8() if data.remaining else None
        data.end()
        return cls(seq=seq, uptime_s=uptime, completed=completed)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusFrame(_FrameBase):
    """Device → host: the device's state changed (``"boot"``, ``"ready"``, ``"empty"``, ...).

    Attributes:
        state: Machine word for the state (printable ASCII, no spaces).
        detail: Free text.
    """

    TYPE: ClassVar[FrameType] = FrameType.STATUS

    state: str
    detail: str = ""

    def _validate(self) -> None:
        _check_name("state", self.state)
        _check_text("detail", self.detail)

    def payload(self) -> bytes:
        """State then detail."""
        return bytes(_Out().text(self.state).text(self.detail).data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> StatusFrame:
        state = data.name("state")
        detail = data.text()
        data.end()
        return cls(seq=seq, state=state, detail=detail)


@dataclass(frozen=True, slots=True, kw_only=True)
class AckFrame(_FrameBase):
    """Host → device: the device frame with sequence number ``acked`` arrived intact.

    Attributes:
        acked: The device sequence number acknowledged.
    """

    TYPE: ClassVar[FrameType] = FrameType.ACK

    acked: int

    def _validate(self) -> None:
        _check_u("acked", self.acked, 8)

    def payload(self) -> bytes:
        """The acknowledged sequence number."""
        return bytes((self.acked,))

    @classmethod
    def _parse(cls, seq: int, data: _In) -> AckFrame:
        acked = data.u8()
        data.end()
        return cls(seq=seq, acked=acked)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectFrame(_FrameBase):
    """Host → device: the table waits for a card (the device's "ready" light).

    Attributes:
        round_no: The round number (u32).
        slot_index: The slot's index in the deal plan (0-255).
        slot_name: The slot's label (``"A1"``).
    """

    TYPE: ClassVar[FrameType] = FrameType.EXPECT

    round_no: int
    slot_index: int
    slot_name: str

    def _validate(self) -> None:
        _check_u("round_no", self.round_no, 32)
        _check_u("slot_index", self.slot_index, 8)
        _check_name("slot_name", self.slot_name)

    def payload(self) -> bytes:
        """Round (u32), slot index (u8), slot name."""
        out = _Out().u32(self.round_no).u8(self.slot_index).text(self.slot_name)
        return bytes(out.data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> ExpectFrame:
        round_no = data.u32()
        slot_index = data.u8()
        slot_name = data.name("slot name")
        data.end()
        return cls(seq=seq, round_no=round_no, slot_index=slot_index, slot_name=slot_name)


@dataclass(frozen=True, slots=True, kw_only=True)
class _SlotNoticeFrame(_FrameBase):
    """Host → device about the card on the scanner: a slot name and a reason (RESCAN, REJECT).

    Attributes:
        slot_name: The slot the card is meant for; empty when it is meant for none.
        reason: Why (shown on the dealer's display).
    """

    slot_name: str
    reason: str = ""

    def _validate(self) -> None:
        _check_name("slot_name", self.slot_name, allow_empty=True)
        _check_text("reason", self.reason)

    def payload(self) -> bytes:
        """Slot name then reason."""
        return bytes(_Out().text(self.slot_name).text(self.reason).data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> Self:
        slot_name = data.name("slot name", allow_empty=True)
        reason = data.text()
        data.end()
        return cls(seq=seq, slot_name=slot_name, reason=reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class RescanFrame(_SlotNoticeFrame):
    """Host → device: read that same card again.

    Attributes:
        slot_name: The slot the card is meant for; empty when it is meant for none.
        reason: Why (shown on the dealer's display).
    """

    TYPE: ClassVar[FrameType] = FrameType.RESCAN


@dataclass(frozen=True, slots=True, kw_only=True)
class RejectFrame(_SlotNoticeFrame):
    """Host → device: that card is refused, take it away (LED red, beep).

    Attributes:
        slot_name: The slot the card was meant for; empty when it was meant for none
            (e.g. a card scanned while betting is open).
        reason: Why (shown on the dealer's display).
    """

    TYPE: ClassVar[FrameType] = FrameType.REJECT


@dataclass(frozen=True, slots=True, kw_only=True)
class LedFrame(_FrameBase):
    """Host → device: set the status LED.

    Attributes:
        color: The colour (OFF turns it off).
        blink: Blink instead of steady light.
        duration_ms: How long, then back to the device's own state; 0 = until changed.
    """

    TYPE: ClassVar[FrameType] = FrameType.LED

    color: LedColor
    blink: bool = False
    duration_ms: int = 0

    def _validate(self) -> None:
        if not isinstance(self.color, int) or self.color not in set(LedColor):
            raise FrameError("color must be a LedColor", field="color", value=self.color)
        object.__setattr__(self, "color", LedColor(self.color))
        if not isinstance(self.blink, bool):
            raise FrameError("blink must be a bool", field="blink", value=self.blink)
        _check_u("duration_ms", self.duration_ms, 16)

    def payload(self) -> bytes:
        """Colour (u8), blink (u8 0/1), duration (u16 ms)."""
        out = _Out().u8(int(self.color)).u8(int(self.blink)).u16(self.duration_ms)
        return bytes(out.data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> LedFrame:
        color = data.u8()
        blink = data.u8()
        duration = data.u16()
        data.end()
        if color not in set(LedColor):
            raise _PayloadError(f"unknown LED colour {color}")
        if blink not in (0, 1):
            raise _PayloadError(f"blink byte must be 0 or 1, not {blink}")
        return cls(seq=seq, color=LedColor(color), blink=bool(blink), duration_ms=duration)


@dataclass(frozen=True, slots=True, kw_only=True)
class BeepFrame(_FrameBase):
    """Host → device: sound the beeper.

    Attributes:
        count: Number of beeps (1-255).
        duration_ms: Length of each beep in milliseconds (1-65535).
    """

    TYPE: ClassVar[FrameType] = FrameType.BEEP

    count: int = 1
    duration_ms: int = 100

    def _validate(self) -> None:
        _check_u("count", self.count, 8)
        _check_u("duration_ms", self.duration_ms, 16)
        if self.count == 0 or self.duration_ms == 0:
            raise FrameError("count and duration_ms must be above 0", field="count")

    def payload(self) -> bytes:
        """Count (u8) then duration (u16 ms)."""
        return bytes(_Out().u8(self.count).u16(self.duration_ms).data)

    @classmethod
    def _parse(cls, seq: int, data: _In) -> BeepFrame:
        count = data.u8()
        duration = data.u16()
        data.end()
        if count == 0 or duration == 0:
            raise _PayloadError("a beep needs a count and a duration above 0")
        return cls(seq=seq, count=count, duration_ms=duration)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetFrame(_FrameBase):
    """Host → device: restart; the device answers with STATUS ``boot``."""

    TYPE: ClassVar[FrameType] = FrameType.RESET

    @classmethod
    def _parse(cls, seq: int, data: _In) -> ResetFrame:
        data.end()
        return cls(seq=seq)


Frame = (
    CardFrame
    | MisreadFrame
    | HeartbeatFrame
    | StatusFrame
    | AckFrame
    | ExpectFrame
    | RescanFrame
    | RejectFrame
    | LedFrame
    | BeepFrame
    | ResetFrame
)
"""Every frame of protocol v1."""

DEVICE_FRAMES: Final = (CardFrame, MisreadFrame, HeartbeatFrame, StatusFrame)
HOST_FRAMES: Final = (
    AckFrame,
    ExpectFrame,
    RescanFrame,
    RejectFrame,
    LedFrame,
    BeepFrame,
    ResetFrame,
)
_PARSERS: Final[dict[int, Callable[[int, _In], Frame]]] = {
    FrameType.CARD: CardFrame._parse,
    FrameType.MISREAD: MisreadFrame._parse,
    FrameType.HEARTBEAT: HeartbeatFrame._parse,
    FrameType.STATUS: StatusFrame._parse,
    FrameType.ACK: AckFrame._parse,
    FrameType.EXPECT: ExpectFrame._parse,
    FrameType.RESCAN: RescanFrame._parse,
    FrameType.REJECT: RejectFrame._parse,
    FrameType.LED: LedFrame._parse,
    FrameType.BEEP: BeepFrame._parse,
    FrameType.RESET: ResetFrame._parse,
}


@dataclass(frozen=True, slots=True)
class CorruptFrame:
    """A delimited run of bytes that has a frame's shape but cannot be trusted or used.

    Attributes:
        reason: Which check failed.
        detail: What exactly was wrong, for the log.
        raw: The de-stuffed bytes (header .. CRC).
    """

    reason: CorruptReason
    detail: str
    raw: bytes = field(repr=False)


DecodedItem = Frame | CorruptFrame
"""What :meth:`FrameDecoder.feed` yields."""


# --------------------------------------------------------------------------- encode / decode


def encode_raw(frame: Frame) -> bytes:
    """The frame's bytes before stuffing: header, payload, CRC.

    Raises:
        FrameError: The payload is longer than 255 bytes.
    """
    payload = frame.payload()
    if len(payload) > MAX_PAYLOAD:
        raise FrameError(
            f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}",
            frame_type=frame.TYPE.name,
        )
    head = bytes((PROTOCOL_VERSION, frame.TYPE, frame.seq, len(payload))) + payload
    return head + crc16(head).to_bytes(2, "big")


def wrap(raw: bytes) -> bytes:
    """Stuff raw frame bytes and add the delimiters: ``0x00 · COBS(raw) · 0x00``."""
    return b"\x00" + cobs_encode(raw) + b"\x00"


def encode(frame: Frame) -> bytes:
    """The frame as it goes on the wire.

    Raises:
        FrameError: The payload is longer than 255 bytes.
    """
    return wrap(encode_raw(frame))


def decode_raw(raw: bytes) -> DecodedItem:
    """Check and parse de-stuffed frame bytes (at least :data:`MIN_RAW` long)."""
    body, crc = raw[:-CRC_SIZE], int.from_bytes(raw[-CRC_SIZE:], "big")
    computed = crc16(body)
    if computed != crc:
        return CorruptFrame(
            CorruptReason.CRC, f"CRC {crc:#06x} but the bytes give {computed:#06x}", raw
        )
    version, type_code, seq, length = body[0], body[1], body[2], body[3]
    if version != PROTOCOL_VERSION:
        return CorruptFrame(
            CorruptReason.VERSION,
            f"protocol version {version}; this host speaks {PROTOCOL_VERSION}",
            raw,
        )
    if length != len(body) - HEADER_SIZE:
        return CorruptFrame(
            CorruptReason.LENGTH,
            f"length field says {length} payload bytes, the frame has {len(body) - HEADER_SIZE}",
            raw,
        )
    parser = _PARSERS.get(type_code)
    if parser is None:
        return CorruptFrame(CorruptReason.TYPE, f"unknown frame type {type_code:#04x}", raw)
    try:
        frame: Frame = parser(seq, _In(body[HEADER_SIZE:]))
    except (_PayloadError, FrameError) as exc:
        name = FrameType(type_code).name
        return CorruptFrame(CorruptReason.PAYLOAD, f"{name} payload: {exc}", raw)
    return frame


class FrameDecoder:
    """Turns a byte stream into frames, whatever the stream holds. Never raises.

    Bytes are collected up to each ``0x00``. A run that is not a canonical COBS encoding, or
    too short or too long to be a frame, is garbage: skipped and counted in
    :attr:`garbage_bytes`. A run with a frame's shape comes out as a frame, or as a
    :class:`CorruptFrame` saying why it cannot be used.

    Attributes:
        garbage_bytes: Bytes skipped as garbage so far.
        frames: Good frames produced so far.
        corrupt: Corrupt frames produced so far.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._overflow = False
        self.garbage_bytes = 0
        self.frames = 0
        self.corrupt = 0

    def feed(self, data: bytes) -> list[DecodedItem]:
        """Take the next bytes of the stream; return what they completed, in order."""
        items: list[DecodedItem] = []
        start = 0
        while True:
            end = data.find(b"\x00", start)
            if end < 0:
                self._collect(data[start:])
                break
            self._collect(data[start:end])
            item = self._close_run()
            if item is not None:
                items.append(item)
            start = end + 1
        return items

    def reset(self) -> None:
        """Forget a partial frame (e.g. after the port was reopened); counters stay."""
        self.garbage_bytes += len(self._buffer)
        self._buffer.clear()
        self._overflow = False

    def _collect(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._overflow:
            self.garbage_bytes += len(chunk)
            return
        self._buffer += chunk
        if len(self._buffer) > MAX_STUFFED:
            self.garbage_bytes += len(self._buffer)
            self._buffer.clear()
            self._overflow = True

    def _close_run(self) -> DecodedItem | None:
        run = bytes(self._buffer)
        self._buffer.clear()
        if self._overflow:
            self._overflow = False
            return None
        if not run:
            return None
        raw = cobs_decode(run)
        if raw is None or len(raw) < MIN_RAW:
            self.garbage_bytes += len(run)
            return None
        item = decode_raw(raw)
        if isinstance(item, CorruptFrame):
            self.corrupt += 1
        else:
            self.frames += 1
        return item
