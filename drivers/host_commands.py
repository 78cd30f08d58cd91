"""The commands a host sends a scanner (protocol v1), as methods that build their frames.

:class:`HostCommands` is the vocabulary (EXPECT, RESCAN, REJECT, LED, BEEP, RESET); a
transport-backed source (:class:`drivers.link.FramedCardSource`) says how a frame is sent.
"""

from __future__ import annotations

import abc

from drivers.codec import (
    BeepFrame,
    ExpectFrame,
    Frame,
    LedColor,
    LedFrame,
    RejectFrame,
    RescanFrame,
    ResetFrame,
)

__all__ = ["HostCommands"]


class HostCommands(abc.ABC):
    """The host's commands.

    Every command raises ``FrameError`` when a field is out of range, ``TransportError`` when
    the source is not open or the write failed, and ``DeviceTimeout`` when the write took
    longer than ``write_timeout``.
    """

    @abc.abstractmethod
    async def _command(self, frame: Frame) -> None:
        """Send one command frame to the device."""

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Tell the device the table waits for a card for this slot (EXPECT)."""
        await self._command(
            ExpectFrame(round_no=round_no, slot_index=slot_index, slot_name=slot_name)
        )

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask the dealer to read the same card again (RESCAN)."""
        await self._command(RescanFrame(slot_name=slot_name, reason=reason))

    async def reject(self, slot_name: str, reason: str) -> None:
        """Tell the dealer the card is refused and must be taken away (REJECT)."""
        await self._command(RejectFrame(slot_name=slot_name, reason=reason))

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """Set the device's LED (LED)."""
        await self._command(LedFrame(color=color, blink=blink, duration_ms=duration_ms))

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """Sound the device's beeper (BEEP)."""
        await self._command(BeepFrame(count=count, duration_ms=duration_ms))

    async def reset(self) -> None:
        """Ask the device to restart (RESET); it answers with STATUS ``boot``."""
        await self._command(ResetFrame())
