"""The card-source driver for serial ports, ptys and TCP (protocol v1 over a byte stream).

The protocol work (framing, ACKs, repeats, gaps, heartbeats) is in
:class:`drivers.link.FramedCardSource`; this module only carries the bytes, through
pyserial and pyserial-asyncio-fast. Reconnection is not done here: a supervisor
(:mod:`drivers.supervisor`) closes and reopens the source.
"""

from __future__ import annotations

import asyncio
from typing import Any

import serial
import serial_asyncio_fast

from drivers.errors import ConnectionLost, TransportError
from drivers.link import FramedCardSource
from drivers.receiver import BOOT_STATE, LinkStats
from drivers.source import DriverSettings, PortSpec

__all__ = ["BOOT_STATE", "LinkStats", "SerialCardSource"]

_READ_CHUNK = 4096


class SerialCardSource(FramedCardSource):
    """A scanner on a serial port, a pty or a TCP socket.

    Args:
        url: The URL as configured (for logs and errors).
        spec: What the URL resolved to.
        settings: Timeouts and defaults.
    """

    def __init__(self, url: str, spec: PortSpec, settings: DriverSettings) -> None:
        super().__init__(url, spec.device, settings, spec.kind)
        self._spec = spec
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> None:
        options: dict[str, Any] = {"baudrate": self._spec.baud}
        if self._spec.kind == "serial":
            options["exclusive"] = True
        try:
            reader, writer = await serial_asyncio_fast.open_serial_connection(
                url=self._spec.port_url, **options
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise self._error(TransportError, "cannot open the card source", str(exc)) from exc
        self._reader, self._writer = reader, writer

    def _writable(self) -> bool:
        writer = self._writer
        return self._connected and writer is not None and not writer.transport.is_closing()

    async def _receive(self) -> bytes:
        assert self._reader is not None
        try:
            return await self._reader.read(_READ_CHUNK)
        except (OSError, serial.SerialException) as exc:
            raise self._error(
                ConnectionLost, "the connection to the device failed", str(exc)
            ) from exc

    def _transmit_now(self, data: bytes) -> bool:
        writer = self._writer
        if writer is None or writer.transport.get_write_buffer_size():
            return False  # not open, or bytes are queued already: the bounded path waits
        writer.write(data)
        return True

    async def _transmit(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)
        try:
            await self._writer.drain()
        except (OSError, serial.SerialException) as exc:
            raise self._error(ConnectionLost, "writing to the device failed", str(exc)) from exc

    async def _disconnect(self, *, failed: bool) -> None:
        writer = self._writer
        self._reader, self._writer = None, None
        if writer is None:
            return
        transport = writer.transport
        if not transport.is_closing():  # after a failure the transport closes itself
            if failed:
                transport.abort()
            else:
                writer.close()
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await writer.wait_closed()
        except TimeoutError:
            self._log.warning("card_source_close_timeout", timeout_s=self._settings.write_timeout)
        except Exception as exc:  # the error that closed it; already reported
            self._log.debug("card_source_close_error", error=str(exc))
