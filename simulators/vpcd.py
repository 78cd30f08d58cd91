"""A contactless card on a virtual PC/SC reader: our side of vsmartcard's ``vpcd`` socket.

Debian's ``vsmartcard-vpcd`` is a real PC/SC reader driver for ``pcscd``: each of its reader
slots listens on a TCP port for a virtual card (``vicc``). A card is *present* while a card
is connected to the slot's port and *removed* when the connection closes, exactly as a tag
enters and leaves a reader's field; ``pcscd`` polls the slot and reports both through
``SCardGetStatusChange``, as it does for a USB reader.

The socket protocol (vsmartcard's ``vpcd.c``): every message, both ways, is a 2-byte
big-endian length and that many bytes. From the reader, a 1-byte message is a control
(``0`` power off, ``1`` power on, ``2`` reset, ``4`` "send your ATR"), any longer one an
APDU; the card answers an ATR request and an APDU with one message each, and nothing to the
power controls.

Our card is a storage tag as a PC/SC 2.01 part 3 reader presents one (an NXP NTAG /
MIFARE Ultralight: the reader builds its ATR), answering the contactless pseudo-APDU
``FF CA 00 00 00`` ("get data: UID") with its UID and ``90 00``, as an ACS ACR122U does.

:class:`VpcdDecoder` is pure (bytes in, messages out); :class:`VirtualTag` answers them;
:class:`VirtualCard` puts a tag on a slot (connects) and takes it off (closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass

import structlog

from simulators.errors import SimulatorConfigError, SimulatorError

__all__ = [
    "ATR_ULTRALIGHT",
    "GET_UID",
    "VirtualCard",
    "VirtualTag",
    "VpcdDecoder",
    "VpcdError",
    "encode_message",
]

_log = structlog.get_logger(__name__)

CTRL_OFF = 0
CTRL_ON = 1
CTRL_RESET = 2
CTRL_ATR = 4

GET_UID = bytes.fromhex("FFCA000000")
"""PC/SC part 3's contactless "get data" pseudo-APDU for the UID (Le 00: all of it)."""

ATR_ULTRALIGHT = bytes.fromhex("3B8F8001804F0CA0000003060300030000000068")
"""The ATR a PC/SC part 3 reader builds for an ISO 14443-A MIFARE Ultralight / NTAG tag."""

SW_OK = bytes.fromhex("9000")
SW_WRONG_P1P2 = bytes.fromhex("6A81")
SW_INS_NOT_SUPPORTED = bytes.fromhex("6D00")
SW_CLA_NOT_SUPPORTED = bytes.fromhex("6E00")
SW_NO_DIAGNOSIS = bytes.fromhex("6F00")

MAX_MESSAGE = 0xFFFF


class VpcdError(SimulatorError):
    """The virtual card could not reach its reader slot, or the slot spoke nonsense."""


def encode_message(payload: bytes) -> bytes:
    """One vpcd message: the 2-byte big-endian length, then the payload.

    Raises:
        VpcdError: The payload is longer than a message can be (65,535 bytes).
    """
    if len(payload) > MAX_MESSAGE:
        raise VpcdError("a vpcd message holds at most 65535 bytes", length=len(payload))
    return len(payload).to_bytes(2, "big") + payload


class VpcdDecoder:
    """Splits the reader's byte stream into messages (pure: no I/O).

    Any byte string is accepted: a length is two bytes and a message that many, so the
    stream can only be cut short (kept until the rest arrives), never be invalid. An empty
    message (length 0) is skipped: the reader never sends one.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held for a message not complete yet."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """The complete messages ``data`` ends (with what came before it)."""
        self._buffer.extend(data)
        messages: list[bytes] = []
        while len(self._buffer) >= 2:
            length = int.from_bytes(self._buffer[:2], "big")
            if len(self._buffer) < 2 + length:
                break
            message = bytes(self._buffer[2 : 2 + length])
            del self._buffer[: 2 + length]
            if message:
                messages.append(message)
        return messages


@dataclass(slots=True)
class VirtualTag:
    """One tag's answers to the reader (pure).

    Attributes:
        uid: The tag's UID (4, 7 or 10 bytes).
        atr: The ATR the reader gives for it.
        powered: Whether the reader powered the tag (a power-off clears it).
        uid_reads: How many ``FF CA 00 00`` the tag answered (the simulator's statistics).
        last_uid_read_at: ``time.monotonic()`` of the last UID answer (the bench's "tag read").
        bad_answers: A fault: the next this many ``FF CA 00 00`` are answered ``6F 00`` (the
            tag left the field mid-read: "no precise diagnosis").
    """

    uid: bytes
    atr: bytes = ATR_ULTRALIGHT
    powered: bool = False
    uid_reads: int = 0
    last_uid_read_at: float | None = None
    bad_answers: int = 0

    def __post_init__(self) -> None:
        if len(self.uid) not in (4, 7, 10):
            raise SimulatorConfigError(
                "an ISO 14443-A UID is 4, 7 or 10 bytes", uid=self.uid.hex().upper()
            )

    def answer(self, message: bytes) -> bytes | None:
        """The tag's answer to one message from the reader; ``None``: none is due."""
        if len(message) == 1:
            control = message[0]
            if control == CTRL_ATR:
                return self.atr
            if control in (CTRL_ON, CTRL_RESET):
                self.powered = True
            elif control == CTRL_OFF:
                self.powered = False
            return None
        return self.apdu(message)

    def apdu(self, command: bytes) -> bytes:
        """A response APDU (data and status word) to a command APDU."""
        if len(command) < 4:
            return SW_INS_NOT_SUPPORTED
        cla, ins, p1, p2 = command[:4]
        if cla != 0xFF:
            return SW_CLA_NOT_SUPPORTED
        if ins != 0xCA:
            return SW_INS_NOT_SUPPORTED
        if (p1, p2) != (0, 0):
            return SW_WRONG_P1P2  # P1=01 (the ATS): a storage tag has none
        le = command[4] if len(command) >= 5 else 0
        if le not in (0, len(self.uid)):
            return bytes([0x6C, len(self.uid)])  # wrong Le: the right one
        if self.bad_answers > 0:
            self.bad_answers -= 1
            return SW_NO_DIAGNOSIS
        self.uid_reads += 1
        self.last_uid_read_at = time.monotonic()
        return self.uid + SW_OK


def _quick_ack(sock: socket.socket | None) -> None:
    """Acknowledge at once: vpcd writes a message's length and its bytes in two sends.

    A delayed ACK would hold the second 40 ms behind Nagle's algorithm. Linux resets the
    option after use, so it is set before every read.
    """
    if sock is not None and hasattr(socket, "TCP_QUICKACK"):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


class VirtualCard:
    """A tag on a vpcd reader slot: :meth:`place` connects, :meth:`remove` disconnects.

    Args:
        host: Where ``pcscd``'s vpcd slot listens (``127.0.0.1``).
        port: The slot's port.
        timeout: Seconds a connection may take.
    """

    def __init__(self, host: str, port: int, *, timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.tag: VirtualTag | None = None
        self.uid_read = asyncio.Event()
        """Set when the reader has read the UID of the tag placed last (cleared by a place)."""
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def present(self) -> bool:
        """Whether a tag lies on the slot now."""
        return self._writer is not None

    async def place(self, uid: bytes, *, bad_answers: int = 0) -> VirtualTag:
        """Put a tag with this UID on the slot (any tag there is taken off first).

        ``bad_answers``: the tag's first UID reads fail (:attr:`VirtualTag.bad_answers`).

        Raises:
            VpcdError: The slot does not accept the card within ``timeout``.
        """
        await self.remove()
        tag = VirtualTag(uid, bad_answers=bad_answers)
        self.uid_read.clear()
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except (OSError, TimeoutError) as exc:
            raise VpcdError(
                "the virtual reader slot does not accept a card",
                host=self.host,
                port=self.port,
                detail=str(exc) or type(exc).__name__,
            ) from exc
        self.tag, self._writer = tag, writer
        self._task = asyncio.create_task(
            self._serve(reader, writer, tag), name=f"vpcd-card {self.port}"
        )
        return tag

    async def remove(self) -> None:
        """Take the tag off the slot (close the connection). Never raises."""
        task, writer = self._task, self._writer
        self._task, self._writer = None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self.timeout):
                    await writer.wait_closed()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tag: VirtualTag
    ) -> None:
        decoder = VpcdDecoder()
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                _quick_ack(sock)
                data = await reader.read(4096)
                if not data:
                    _log.debug("vpcd_slot_closed", port=self.port)
                    return
                for message in decoder.feed(data):
                    reads = tag.uid_reads
                    answer = tag.answer(message)
                    if answer is not None:
                        writer.write(encode_message(answer))
                    if tag.uid_reads != reads:
                        self.uid_read.set()
                await writer.drain()
        except (OSError, ConnectionError) as exc:
            _log.debug("vpcd_slot_failed", port=self.port, error=str(exc))
