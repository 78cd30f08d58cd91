"""The Eccel Pepper C1 binary protocol: a pure codec (bytes in, frames out, no I/O).

The Pepper C1 (and C2) RFID reader module speaks binary frames on its UART (USB-CDC) and on
TCP, in both directions::

    F5  LEN_L LEN_H  LEN_L^FF LEN_H^FF  PAYLOAD...  CRC_L CRC_H

``LEN`` is the payload's length plus the two CRC bytes; the CRC is CCITT-16 (polynomial
0x1021, initial value 0xFFFF, not reflected: CRC-16/CCITT-FALSE, ``binascii.crc_hqx(payload,
0xFFFF)``) over the payload only, little-endian. A request's payload is the command byte and
its parameters; a response's is ``00`` (ACK), the command echoed and the data, or ``FF``
(ERROR), the command and a 16-bit error code; ``FE`` starts an unsolicited (asynchronous)
event. The layout and the command numbers are those of Eccel's own driver (the MIT-licensed
``pepper-c1`` package on PyPI, whose blocking API we do not use: see ``docs/drivers.md``).

The commands tablectl uses (the host polls; the reader repeats a tag at every poll while it
lies on the antenna):

* ``0F SET_ACTIVE_ANTENNA n`` (1-8, through the reader's antenna multiplexer);
* ``02 GET_TAG_COUNT`` → ACK data ``[count]``;
* ``03 GET_UID i`` → ACK data ``[type, param, uid...]`` (the i-th tag in the field);
* ``0C UART_PASSTHRU text`` (with ``cues=1``): the cue, rescan and refusal written to the
  reader's second UART, where a studio wires a dealer display.

:class:`PepperDecoder` never raises on input: any byte string comes out as frames and
:class:`PepperCorrupt` records naming what was wrong (bad header, bad CRC, noise between
frames), and it resynchronises on the next start byte.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from drivers.errors import FrameError

__all__ = [
    "MAX_PAYLOAD",
    "STX",
    "Ack",
    "AsyncEvent",
    "Command",
    "ErrorReply",
    "PepperCorrupt",
    "PepperDecoder",
    "PepperFrame",
    "TagUid",
    "ack",
    "crc",
    "encode_frame",
    "error",
    "parse_reply",
    "parse_uid",
    "request",
]

STX = 0xF5
"""The start byte of every frame."""

MAX_PAYLOAD = 1024
"""The longest payload accepted (the reader's own buffers are smaller); a longer declared
length is a corrupt header, not a reason to wait for 64 KiB."""

MAX_UID = 10
"""ISO 14443 UIDs are 4, 7 or 10 bytes; ISO 15693 UIDs 8."""


class Command(IntEnum):
    """The command bytes tablectl sends or reads (Eccel's numbering)."""

    ACK = 0x00
    GET_TAG_COUNT = 0x02
    GET_UID = 0x03
    REBOOT = 0x0A
    GET_VERSION = 0x0B
    UART_PASSTHRU = 0x0C
    SET_ACTIVE_ANTENNA = 0x0F
    ASYNC = 0xFE
    ERROR = 0xFF


def crc(payload: bytes) -> int:
    """The frame CRC of ``payload`` (CRC-16/CCITT-FALSE)."""
    return binascii.crc_hqx(payload, 0xFFFF)


def encode_frame(payload: bytes) -> bytes:
    """One frame around ``payload``.

    Raises:
        FrameError: The payload is empty or longer than :data:`MAX_PAYLOAD`.
    """
    if not payload or len(payload) > MAX_PAYLOAD:
        raise FrameError(
            f"a Pepper C1 payload has 1-{MAX_PAYLOAD} bytes", detail=f"{len(payload)} bytes"
        )
    length = len(payload) + 2
    low, high = length & 0xFF, length >> 8
    check = crc(payload)
    return bytes([STX, low, high, low ^ 0xFF, high ^ 0xFF, *payload, check & 0xFF, check >> 8])


@dataclass(frozen=True, slots=True)
class PepperFrame:
    """A frame whose header and CRC are good.

    Attributes:
        payload: Its payload (without the CRC).
    """

    payload: bytes


CorruptReason = Literal["header", "crc", "noise", "length"]


@dataclass(frozen=True, slots=True)
class PepperCorrupt:
    """Bytes that are no good frame.

    Attributes:
        reason: ``header`` (the length and its complement disagree), ``length`` (a declared
            length out of bounds), ``crc`` (a whole frame whose CRC is wrong), ``noise``
            (bytes before a start byte).
        detail: What exactly (for the log and the dealer's display).
        size: How many bytes were dropped.
    """

    reason: CorruptReason
    detail: str
    size: int


class PepperDecoder:
    """Frames out of a byte stream, any byte string in (never raises).

    A bad header drops its start byte only and hunts for the next one, so a frame that
    follows a garbled one is still found.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def reset(self) -> None:
        """Forget a partial frame (a reopened port)."""
        self._buffer.clear()

    @property
    def pending(self) -> int:
        """Bytes held for a frame not complete yet."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[PepperFrame | PepperCorrupt]:
        """Take bytes; returns the frames (and corrupt runs) they completed, in order."""
        buffer = self._buffer
        buffer += data
        out: list[PepperFrame | PepperCorrupt] = []
        while buffer:
            start = buffer.find(STX)
            if start < 0:
                out.append(PepperCorrupt("noise", "bytes without a start byte", len(buffer)))
                buffer.clear()
                break
            if start > 0:
                out.append(PepperCorrupt("noise", "bytes before a start byte", start))
                del buffer[:start]
            if len(buffer) < 5:
                break
            low, high, not_low, not_high = buffer[1], buffer[2], buffer[3], buffer[4]
            if low ^ 0xFF != not_low or high ^ 0xFF != not_high:
                out.append(
                    PepperCorrupt(
                        "header", f"length {low:02X} {high:02X} and its check disagree", 1
                    )
                )
                del buffer[:1]
                continue
            length = low | high << 8
            if not 3 <= length <= MAX_PAYLOAD + 2:
                out.append(PepperCorrupt("length", f"declared length {length} out of bounds", 1))
                del buffer[:1]
                continue
            if len(buffer) < 5 + length:
                break
            payload = bytes(buffer[5 : 5 + length - 2])
            received = buffer[3 + length] | buffer[4 + length] << 8
            if crc(payload) != received:
                out.append(
                    PepperCorrupt(
                        "crc",
                        f"CRC {received:04X} received, {crc(payload):04X} computed",
                        5 + length,
                    )
                )
                del buffer[: 5 + length]
                continue
            out.append(PepperFrame(payload))
            del buffer[: 5 + length]
        return out


# ---------------------------------------------------------------------- replies


@dataclass(frozen=True, slots=True)
class Ack:
    """A command's success: the command echoed and its data."""

    command: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A command's failure: the command and the reader's error code."""

    command: int
    code: int


@dataclass(frozen=True, slots=True)
class AsyncEvent:
    """An unsolicited event (polling mode; tablectl polls itself and ignores these)."""

    data: bytes


def parse_reply(payload: bytes) -> Ack | ErrorReply | AsyncEvent | None:
    """What a good frame from the reader says; ``None``: not a reply tablectl knows."""
    if not payload:
        return None
    kind = payload[0]
    if kind == Command.ACK and len(payload) >= 2:
        return Ack(payload[1], payload[2:])
    if kind == Command.ERROR and len(payload) >= 2:
        code = payload[2] | payload[3] << 8 if len(payload) >= 4 else 0
        return ErrorReply(payload[1], code)
    if kind == Command.ASYNC:
        return AsyncEvent(payload[1:])
    return None


@dataclass(frozen=True, slots=True)
class TagUid:
    """A ``GET_UID`` answer: the tag's type, a parameter and its UID (upper-case hex)."""

    tag_type: int
    param: int
    uid: str


def parse_uid(data: bytes) -> TagUid | None:
    """A ``GET_UID`` ACK's data; ``None`` when it holds no UID of 4-10 bytes."""
    if not 2 + 4 <= len(data) <= 2 + MAX_UID:
        return None
    return TagUid(data[0], data[1], data[2:].hex().upper())


def request(command: Command, *params: int) -> bytes:
    """The frame of a command with byte parameters."""
    return encode_frame(bytes([command, *params]))


def ack(command: int, data: bytes = b"") -> bytes:
    """A reader's ACK frame (the simulator's side)."""
    return encode_frame(bytes([Command.ACK, command]) + data)


def error(command: int, code: int) -> bytes:
    """A reader's ERROR frame (the simulator's side)."""
    return encode_frame(bytes([Command.ERROR, command, code & 0xFF, code >> 8 & 0xFF]))
