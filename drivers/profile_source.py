"""The card-source driver for line-oriented serial readers described by a device profile.

URL: ``profile+serial:///dev/ttyUSB0?profile=NAME[&baud=9600]`` (a shipped profile name or a
``.toml`` path). The bytes go through pyserial and pyserial-asyncio-fast, as for the framed
driver; the records are decoded by :class:`drivers.profile.LineDecoder`. The reads are the
same (card, misread, status) and the supervisor (:mod:`drivers.supervisor`) reopens a lost
port the same way.

A line device has no heartbeat and no acknowledgements: the link is alive while the port
is; a device that goes away is seen by the port failing (end of file, I/O error). The driver
reports the time the port was opened as its "last heartbeat", so the supervisor's probe
after a reopen passes at once. Commands the profile lacks (a plain barcode reader has none)
are not sent: the orchestrator's events (``rescan_requested``, ``card_refused``) are how
such a cue reaches the dealer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import serial
import serial_asyncio_fast
import structlog

from drivers.codec import LedColor
from drivers.errors import ConnectionLost, DeviceTimeout, DriverError, TransportError
from drivers.profile import LineDecoder, load_grammar, load_profile
from drivers.queued import QueuedReads, close_stream
from drivers.source import CardRead, DriverSettings, Misread, ProfileSpec, Read

__all__ = ["ProfileCardSource"]

_READ_CHUNK = 4096


class ProfileCardSource(QueuedReads):
    """A line-oriented reader on a serial port or pty, as its profile describes it.

    Args:
        url: The URL as configured (for logs and errors).
        spec: What the URL resolved to.
        settings: Timeouts and defaults.
        raw_codes: Read the device's codes as they are, without a code table (enrolment).

    Raises:
        ProfileError: The profile or its code table is not valid (file, field, reason).

    Attributes:
        commands_sent: Commands written to the device.
        skipped_commands: Commands the profile has no template for (not sent).
    """

    def __init__(
        self, url: str, spec: ProfileSpec, settings: DriverSettings, *, raw_codes: bool = False
    ) -> None:
        super().__init__(url, spec.device)
        self._spec = spec
        self._settings = settings
        if raw_codes:
            self.profile, _ = load_grammar(spec.profile)
            self._decoder = LineDecoder(self.profile, None)
        else:
            loaded = load_profile(spec.profile, spec.codes)
            self.profile = loaded.profile
            self._decoder = LineDecoder(self.profile, loaded.table)
        self._baud = spec.baud or self.profile.baud or settings.baud
        self._log = structlog.get_logger(__name__).bind(
            url=url, device=spec.device, profile=self.profile.name
        )
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._opened_at: float | None = None
        self._expected_slot: str | None = None
        self._last_card: tuple[str, str | None] | None = None
        self.commands_sent = 0
        self.skipped_commands = 0

    @property
    def last_heartbeat_at(self) -> float | None:
        """When the port was opened (a line device has no heartbeat); ``None`` while closed."""
        return self._opened_at

    async def open(self) -> None:
        """Open the port within ``open_timeout``.

        Raises:
            TransportError: Already open, or the port cannot be opened.
            DeviceTimeout: Opening took longer than ``open_timeout``.
        """
        if self._writer is not None:
            raise self._error(TransportError, "card source is already open")
        try:
            async with asyncio.timeout(self._settings.open_timeout):
                reader, writer = await serial_asyncio_fast.open_serial_connection(
                    url=self._spec.port_url, baudrate=self._baud, exclusive=True
                )
        except TimeoutError as exc:
            raise self._error(
                DeviceTimeout, "opening the card source timed out",
                f"open_timeout={self._settings.open_timeout}s",
            ) from exc  # fmt: skip
        except (serial.SerialException, OSError, ValueError) as exc:
            raise self._error(TransportError, "cannot open the card source", str(exc)) from exc
        self._reader, self._writer = reader, writer
        self._decoder.reset()
        self._opened_at = time.monotonic()
        self._task = asyncio.create_task(self._read_loop(), name=f"card-source {self._url}")
        self._log.info("card_source_opened", kind="profile+serial", baud=self._baud)

    async def close(self) -> None:
        """Stop reading and close the port; reads not taken yet stay queued. Never raises."""
        task, writer = self._task, self._writer
        self._task, self._reader, self._writer, self._opened_at = None, None, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.keep_reads()
        if writer is None:
            return
        await close_stream(writer, self._settings.write_timeout, self._log)
        self._log.info("card_source_closed")

    async def next_read(self) -> Read:
        """The next card, misread or status, in arrival order.

        Raises:
            ConnectionLost: The device went away.
            TransportError: The source is not open.
        """
        return await self.take(is_open=self._writer is not None)

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                try:
                    data = await self._reader.read(_READ_CHUNK)
                except (OSError, serial.SerialException) as exc:
                    raise self._error(
                        ConnectionLost, "the connection to the device failed", str(exc)
                    ) from exc
                if not data:
                    raise self._error(
                        ConnectionLost, "the device closed the connection (end of file)"
                    )
                for read in self._decoder.feed(data, time.monotonic()):
                    self._queue.put_nowait(self._checked(read))
        except DriverError as exc:
            self._log.error("card_source_failed", error=str(exc))
            self._queue.put_nowait(exc)

    def _checked(self, read: Read) -> Read:
        """A card read at another position than the cued slot's, refused if the profile says so.

        The card passed on last, read again at its own position, is not refused: a double
        read that arrives after the next slot was cued is the same physical card, and the
        orchestrator tells a bounce (ignored) from a card read at the wrong place (refused
        with its reason) by its own window. Refusing it here would cue a rescan of a slot the
        dealer has not dealt yet.
        """
        if not isinstance(read, CardRead) or not self.profile.position_must_match_cue:
            return read
        if (
            self._expected_slot is not None
            and read.position != self._expected_slot
            and (read.value, read.position) != self._last_card
        ):
            return Misread(
                "position",
                f"{read.value} read at position {read.position!r}, "
                f"but the table waits for {self._expected_slot!r}",
                read.device_seq,
                read.at,
            )
        self._last_card = (read.value, read.position)
        return read

    # ------------------------------------------------------------------ commands

    async def _send(self, name: str, **fields: Any) -> None:
        data = self.profile.command(name, **fields)
        if data is None:
            self.skipped_commands += 1
            return
        writer = self._writer
        if writer is None or writer.transport.is_closing():
            raise self._error(TransportError, "card source is not open")
        writer.write(data)
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await writer.drain()
        except TimeoutError as exc:
            raise self._error(DeviceTimeout, "writing to the device timed out") from exc
        except (OSError, serial.SerialException) as exc:
            raise self._error(ConnectionLost, "writing to the device failed", str(exc)) from exc
        self.commands_sent += 1

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Cue the dealer for a slot (sent if the profile has a ``cue`` command)."""
        self._expected_slot = slot_name
        await self._send("cue", round=round_no, slot_index=slot_index, slot=slot_name)

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask for the same card again (sent if the profile has a ``rescan`` command)."""
        await self._send("rescan", slot=slot_name, reason=reason)

    async def reject(self, slot_name: str, reason: str) -> None:
        """Tell the dealer the card is refused (sent if the profile has a ``reject`` command)."""
        await self._send("reject", slot=slot_name, reason=reason)

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """A line profile has no LED command: nothing is sent."""
        self.skipped_commands += 1

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """A line profile has no beep command: nothing is sent."""
        self.skipped_commands += 1

    async def reset(self) -> None:
        """A line profile has no reset command: the decoder forgets a partial record."""
        self._decoder.reset()
