"""The card-source driver for tag readers writing JSON lines on USB serial.

URL: ``jsonl+serial:///dev/ttyUSB0``.

The same readers as :mod:`drivers.mqtt_reader` (an ESP32 with an RC522 or PN532), plugged in
by USB instead of on the network: one JSON object a tag read, one line each (a newline
ends it, a carriage return before it is dropped), read through pyserial and
pyserial-asyncio-fast as the other serial drivers. The reader core
(:mod:`drivers.reader_json`) does the rest. With ``cues=1`` the table's cues are written
to the reader as JSON lines (``{"cue": "expect", ...}``).

A reader unplugged is the port failing (end of file, I/O error): ``ConnectionLost``, which
the supervisor answers by reopening; a card placed and taken away while the cable was out is
lost with it (``loses_reads_while_away``: the table asks for it again), while one still
lying there is reported again by the reader's repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import serial
import serial_asyncio_fast
import structlog

from drivers.errors import ConnectionLost, DeviceTimeout, DriverError, TransportError
from drivers.json_readers import JsonLinesSpec
from drivers.queued import close_stream
from drivers.reader_json import MAX_MESSAGE
from drivers.source import DriverSettings, Read
from drivers.tag_reader import TagReaderSource

__all__ = ["JsonLinesCardSource"]

_READ_CHUNK = 4096


class JsonLinesCardSource(TagReaderSource):
    """A tag reader writing JSON lines on a serial port or pty.

    Args:
        url: The URL as configured (for logs and errors).
        spec: What the URL resolved to.
        settings: Timeouts and defaults.
        raw_codes: Read UIDs as they are, without a code table (enrolment).

    Raises:
        ProfileError: The code table cannot be used.
    """

    def __init__(
        self, url: str, spec: JsonLinesSpec, settings: DriverSettings, *, raw_codes: bool = False
    ) -> None:
        super().__init__(url, spec, settings, raw_codes=raw_codes)
        self._spec = spec
        self._baud = spec.baud or settings.baud
        self._log = structlog.get_logger(__name__).bind(device=spec.device)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._buffer = bytearray()
        self._skipping = False

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
        self._buffer.clear()
        self._skipping = False
        self._opened()
        self._task = asyncio.create_task(self._read_loop(reader), name=f"card-source {self._url}")
        self._log.info("card_source_opened", kind="jsonl+serial", baud=self._baud)

    async def close(self) -> None:
        """Stop reading and close the port; reads not taken yet stay queued. Never raises."""
        task, writer = self._task, self._writer
        self._task, self._reader, self._writer, self._opened_at = None, None, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._lost()
        self.keep_reads()
        if writer is None:
            return
        await close_stream(writer, self._settings.write_timeout, self._log)
        self._log.info("card_source_closed")

    async def next_read(self) -> Read:
        """The next card, misread, removal or status, in arrival order.

        Raises:
            ConnectionLost: The reader went away.
            TransportError: The source is not open.
        """
        return await self.take(is_open=self._writer is not None)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        timers = asyncio.create_task(self.run_timers(), name=f"card-source timers {self._url}")
        try:
            while True:
                try:
                    data = await reader.read(_READ_CHUNK)
                except (OSError, serial.SerialException) as exc:
                    raise self._error(
                        ConnectionLost, "the connection to the reader failed", str(exc)
                    ) from exc
                if not data:
                    raise self._error(
                        ConnectionLost, "the reader closed the connection (end of file)"
                    )
                self._lines(data)
        except DriverError as exc:
            self._lost()
            self._log.error("card_source_failed", error=str(exc))
            self._queue.put_nowait(exc)
        finally:
            timers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timers

    def _lines(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end]).removesuffix(b"\r")
            del self._buffer[: end + 1]
            if self._skipping:
                self._skipping = False  # the end of a line refused as too long
            elif line.strip():
                self._take(line)
        if len(self._buffer) > MAX_MESSAGE:
            # A line longer than any message: refused once, the rest of it skipped.
            if not self._skipping:
                self._take(bytes(self._buffer))
            self._skipping = True
            self._buffer.clear()

    # ------------------------------------------------------------------ commands

    async def _cue(self, cue: str, slot: str, **fields: Any) -> None:
        if not self._spec.cues:
            self.skipped_commands += 1
            return
        writer = self._writer
        if writer is None or writer.transport.is_closing():
            raise self._error(TransportError, "card source is not open")
        body = json.dumps({"cue": cue, **fields, "slot": slot}, separators=(",", ":"))
        writer.write(body.encode() + b"\n")
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await writer.drain()
        except TimeoutError as exc:
            raise self._error(DeviceTimeout, "writing to the reader timed out") from exc
        except (OSError, serial.SerialException) as exc:
            raise self._error(ConnectionLost, "writing to the reader failed", str(exc)) from exc
        self.commands_sent += 1

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Cue the dealer for a slot (written with ``cues=1``)."""
        await self._cue("expect", slot_name, round=round_no, slot_index=slot_index)

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask for the same card again (written with ``cues=1``)."""
        await self._cue("rescan", slot_name, reason=reason)

    async def reject(self, slot_name: str, reason: str) -> None:
        """Tell the dealer the card is refused (written with ``cues=1``)."""
        await self._cue("reject", slot_name, reason=reason)
