"""The receive side of protocol v1's link layer, without I/O.

:class:`LinkReceiver` takes what the decoder found in the device's bytes and keeps the
link's books: sequence numbers (repeats dropped, gaps reported as :class:`Misread` reads
that may hide a card), heartbeats (kept to itself), corrupt frames and echoed host frames
(misreads). It puts the reads for the table in the queue and says which sequenced frame to
acknowledge; :class:`drivers.link.FramedCardSource` writes the ACK.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from drivers.codec import (
    CardFrame,
    CorruptFrame,
    CorruptReason,
    DecodedItem,
    HeartbeatFrame,
    MisreadFrame,
    StatusFrame,
    misread_cause_name,
)
from drivers.errors import DriverError
from drivers.source import CardRead, DeviceStatus, Misread, MisreadCauseName, Read

__all__ = ["BOOT_STATE", "LinkReceiver", "LinkStats"]

BOOT_STATE = "boot"
"""A STATUS with this state starts a new device sequence (no gap is reported)."""


@dataclass(slots=True)
class LinkStats:
    """Counters of one source since it was built (they survive close/reopen).

    Attributes:
        frames: Good device frames received (including heartbeats and repeats).
        heartbeats: Heartbeats received.
        duplicates: Repeated frames dropped (retransmissions).
        gaps: Sequence gaps seen.
        lost_frames: Frames the gaps say were lost.
        corrupt: Corrupt frames (CRC, version, length, type, payload).
        acks_sent: ACK frames written.
        commands_sent: Other host frames written.
    """

    frames: int = 0
    heartbeats: int = 0
    duplicates: int = 0
    gaps: int = 0
    lost_frames: int = 0
    corrupt: int = 0
    acks_sent: int = 0
    commands_sent: int = 0


class LinkReceiver:
    """The device's frames in, the table's reads out (one per source, reset at each open).

    Args:
        queue: Where the reads go (the source's, shared with its failures).
        stats: The source's counters.
        log: The source's bound logger.

    Attributes:
        commands_since_open: Commands the host sent since the open (a heartbeat's
            ``completed`` is ours only after the first).
        last_heartbeat_at: ``time.monotonic()`` of the last heartbeat since the open.
        device_uptime_s: The uptime the last heartbeat gave.
    """

    def __init__(
        self, queue: asyncio.Queue[Read | DriverError], stats: LinkStats, log: Any
    ) -> None:
        self._queue = queue
        self.stats = stats
        self._log = log
        self._rx_seq: int | None = None
        self.commands_since_open = 0
        self.last_heartbeat_at: float | None = None
        self.device_uptime_s: int | None = None

    def reset(self) -> None:
        """The port was (re)opened: the device's sequence is not known yet."""
        self._rx_seq = None
        self.commands_since_open = 0
        self.last_heartbeat_at = None

    def receive(self, item: DecodedItem, at: float) -> int | None:
        """Take one decoded item; the sequence number to acknowledge, if any.

        Every sequenced frame is acknowledged, repeats too: the previous ACK may be lost.
        """
        if isinstance(item, CorruptFrame):
            self.stats.corrupt += 1
            cause: MisreadCauseName = "crc" if item.reason is CorruptReason.CRC else "malformed"
            self._log.warning("corrupt_frame", reason=item.reason.value, detail=item.detail)
            self._queue.put_nowait(Misread(cause, f"{item.reason}: {item.detail}", None, at))
            return None
        self.stats.frames += 1
        if isinstance(item, HeartbeatFrame):
            self._heartbeat(item, at)
            return None
        if not isinstance(item, CardFrame | MisreadFrame | StatusFrame):
            self.stats.corrupt += 1
            detail = f"host frame {item.TYPE.name} received from the device (echo?)"
            self._log.warning("unexpected_frame", detail=detail)
            self._queue.put_nowait(Misread("malformed", detail, None, at))
            return None
        boot = isinstance(item, StatusFrame) and item.state == BOOT_STATE
        deliver = True
        if self._rx_seq is not None and not boot:
            step = (item.seq - self._rx_seq) % 256
            if step == 0:
                deliver = False
                self.stats.duplicates += 1
                self._log.info("duplicate_frame_dropped", seq=item.seq, type=item.TYPE.name)
            elif step > 1:
                self._gap(step - 1, (item.seq - 1) % 256, at, "lost")
        self._rx_seq = item.seq
        if deliver:
            self._queue.put_nowait(_to_read(item, at))
        return item.seq

    def _heartbeat(self, item: HeartbeatFrame, at: float) -> None:
        self.stats.heartbeats += 1
        self.last_heartbeat_at = at
        self.device_uptime_s = item.uptime_s
        if item.completed is None:
            return
        if self._rx_seq is None:
            # Just opened. Before our first command, what the device finished is
            # not ours; after it, a finished frame we never saw may be our card.
            self._rx_seq = item.completed
            if self.commands_since_open:
                detail = (
                    f"the device is done with seq {item.completed} but no frame "
                    "reached us since the port was opened: maybe a card"
                )
                self.stats.gaps += 1
                self._log.warning("sequence_gap", detail=detail)
                self._queue.put_nowait(Misread("gap", detail, item.completed, at))
            return
        step = (item.completed - self._rx_seq) % 256
        if 0 < step < 128:  # the device gave up on frames we never received
            self._gap(step, item.completed, at, "the device gave up on")
            self._rx_seq = item.completed

    def _gap(self, lost: int, last_lost: int, at: float, how: str) -> None:
        assert self._rx_seq is not None
        first = (self._rx_seq + 1) % 256
        seqs = f"seq {first}" if lost == 1 else f"seq {first}-{last_lost}"
        detail = f"{how} {lost} device frame(s), {seqs}: maybe a card"
        self.stats.gaps += 1
        self.stats.lost_frames += lost
        self._log.warning("sequence_gap", detail=detail)
        self._queue.put_nowait(Misread("gap", detail, last_lost, at))


def _to_read(item: CardFrame | MisreadFrame | StatusFrame, at: float) -> Read:
    if isinstance(item, CardFrame):
        return CardRead(item.value, item.position, item.seq, at)
    if isinstance(item, MisreadFrame):
        detail = misread_cause_name(item.cause)
        if item.text:
            detail = f"{detail}: {item.text}"
        return Misread("device", detail, item.seq, at)
    return DeviceStatus(item.state, item.detail, at)
