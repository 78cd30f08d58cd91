"""The card-source driver for USB scanners (``usb://VID:PID[?serial=SN]``), through pyusb.

The device carries protocol v1's framed byte stream (``docs/protocol.md``) over two bulk
endpoints of its first interface that has them: bulk IN (device → host) and bulk OUT
(host → device); ``docs/drivers.md`` has the descriptors. pyusb's calls block, so they run
in a small executor of this source's own (one thread reads, one writes); each bulk IN read
is bounded by ``usb_poll_timeout`` and each write by ``write_timeout``. pyusb's errors are
translated into :mod:`drivers.errors`: a vanished device (``ENODEV``, ``EIO``, ``EPIPE``)
is :class:`~drivers.errors.ConnectionLost`, which the supervisor answers by reopening.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
from typing import Any

import usb.core
import usb.util

from drivers.errors import ConnectionLost, DeviceTimeout, TransportError
from drivers.link import FramedCardSource
from drivers.source import DriverSettings, UsbSpec
from drivers.usb_lookup import find_device

_READ_SIZE = 4096


def find_endpoints(device: Any) -> tuple[int, Any, Any]:
    """The first interface with a bulk IN and a bulk OUT endpoint of the active config.

    Returns:
        ``(interface number, IN endpoint, OUT endpoint)``.

    Raises:
        LookupError: No interface has both.
    """

    def bulk(direction: int) -> Any:
        def match(endpoint: Any) -> bool:
            return bool(
                usb.util.endpoint_direction(endpoint.bEndpointAddress) == direction
                and usb.util.endpoint_type(endpoint.bmAttributes) == usb.util.ENDPOINT_TYPE_BULK
            )

        return match

    for interface in device.get_active_configuration():
        ep_in = usb.util.find_descriptor(interface, custom_match=bulk(usb.util.ENDPOINT_IN))
        ep_out = usb.util.find_descriptor(interface, custom_match=bulk(usb.util.ENDPOINT_OUT))
        if ep_in is not None and ep_out is not None:
            return int(interface.bInterfaceNumber), ep_in, ep_out
    raise LookupError("no interface with a bulk IN and a bulk OUT endpoint")


class UsbCardSource(FramedCardSource):
    """A scanner on USB bulk endpoints.

    Args:
        url: The URL as configured.
        spec: What the URL resolved to.
        settings: Timeouts.
        backend: The pyusb backend (``None``: pyusb's default, libusb 1.0).
    """

    def __init__(
        self, url: str, spec: UsbSpec, settings: DriverSettings, *, backend: Any = None
    ) -> None:
        super().__init__(url, spec.device, settings, "usb")
        self._spec = spec
        self._backend = backend
        self._usb: Any = None
        self._interface = 0
        self._ep_in: Any = None
        self._ep_out: Any = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._reading: asyncio.Future[bytes | None] | None = None

    # ----------------------------------------------------------------- blocking side

    def _claim(self) -> tuple[Any, int, Any, Any]:
        device = find_device(
            self._spec, backend=self._backend, error=self._error, what="USB device"
        )
        try:
            with contextlib.suppress(NotImplementedError, usb.core.USBError):
                if device.is_kernel_driver_active(0):
                    device.detach_kernel_driver(0)
            try:
                device.get_active_configuration()
            except usb.core.USBError:
                device.set_configuration()
            number, ep_in, ep_out = find_endpoints(device)
            usb.util.claim_interface(device, number)
        except LookupError as exc:
            usb.util.dispose_resources(device)
            raise self._error(
                TransportError, "the USB device has no bulk IN/OUT endpoint pair", str(exc)
            ) from exc
        except usb.core.USBError as exc:
            with contextlib.suppress(usb.core.USBError):
                usb.util.dispose_resources(device)
            raise self._error(TransportError, "cannot claim the USB device", str(exc)) from exc
        return device, number, ep_in, ep_out

    def _read_blocking(self, endpoint: Any) -> bytes | None:
        timeout_ms = max(1, int(self._settings.usb_poll_timeout * 1000))
        try:
            data = endpoint.read(_READ_SIZE, timeout_ms)
        except usb.core.USBTimeoutError:
            return None
        return bytes(data)

    def _write_blocking(self, endpoint: Any, data: bytes) -> None:
        timeout_ms = max(1, int(self._settings.write_timeout * 1000))
        view = memoryview(data)
        while view:
            written = int(endpoint.write(view.tobytes(), timeout_ms))
            view = view[written:]

    def _release_blocking(self, device: Any, number: int) -> None:
        with contextlib.suppress(usb.core.USBError, ValueError):
            usb.util.release_interface(device, number)
        with contextlib.suppress(usb.core.USBError, ValueError):
            usb.util.dispose_resources(device)

    def _lost(self, what: str, exc: usb.core.USBError) -> ConnectionLost:
        gone = exc.errno in (errno.ENODEV, errno.EIO, errno.EPIPE, errno.ESHUTDOWN)
        message = "the USB device was unplugged" if gone else f"USB {what} failed"
        return self._error(
            ConnectionLost,
            message,
            f"{exc} (errno={exc.errno}, libusb={exc.backend_error_code})",
        )

    # ----------------------------------------------------------------- transport

    async def _connect(self) -> None:
        executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix=f"usb {self.device}"
        )
        loop = asyncio.get_running_loop()
        try:
            claim = loop.run_in_executor(executor, self._claim)
            try:
                device, number, ep_in, ep_out = await asyncio.shield(claim)
            except asyncio.CancelledError:
                # open_timeout: let the claim finish in its thread, then let go of it.
                claim.add_done_callback(
                    lambda done: (
                        None
                        if done.cancelled() or done.exception() is not None
                        else self._release_blocking(done.result()[0], done.result()[1])
                    )
                )
                raise
        except BaseException:
            executor.shutdown(wait=False)
            raise
        self._executor = executor
        self._usb, self._interface, self._ep_in, self._ep_out = device, number, ep_in, ep_out

    async def _receive(self) -> bytes:
        loop = asyncio.get_running_loop()
        while True:
            assert self._executor is not None
            self._reading = loop.run_in_executor(self._executor, self._read_blocking, self._ep_in)
            try:
                data = await asyncio.shield(self._reading)
            except usb.core.USBError as exc:
                raise self._lost("bulk IN read", exc) from exc
            if data:
                return data

    async def _transmit(self, data: bytes) -> None:
        assert self._executor is not None
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._write_blocking, self._ep_out, data)
        except usb.core.USBTimeoutError as exc:
            raise self._error(
                DeviceTimeout,
                "writing to the USB device timed out",
                f"write_timeout={self._settings.write_timeout}s",
            ) from exc
        except usb.core.USBError as exc:
            raise self._lost("bulk OUT write", exc) from exc

    async def _disconnect(self, *, failed: bool) -> None:
        executor, reading, device = self._executor, self._reading, self._usb
        self._executor, self._reading, self._usb = None, None, None
        self._ep_in = self._ep_out = None
        if reading is not None and not reading.done():
            # The thread is inside a bulk read bounded by usb_poll_timeout: let it end
            # before the interface is released under it.
            limit = self._settings.usb_poll_timeout + self._settings.write_timeout
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(reading), limit)
        if executor is None:
            return
        if device is not None:
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self._settings.write_timeout):
                    await loop.run_in_executor(
                        executor, self._release_blocking, device, self._interface
                    )
            except TimeoutError:
                self._log.warning("usb_release_timeout", timeout_s=self._settings.write_timeout)
        executor.shutdown(wait=False)
