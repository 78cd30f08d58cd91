"""The card-source driver for USB HID barcode scanners (``hidpos://``, ``hidkbd://``), via pyusb.

The driver finds the device by VID:PID (and serial), detaches the kernel's HID driver from
the interface when it holds it (a keyboard-mode scanner is bound to ``usbhid`` as soon as it
is plugged in), claims the interface, and reads input reports from its interrupt IN endpoint
in a worker thread of its own (each read bounded by ``usb_poll_timeout``). The reports are
decoded by :mod:`drivers.hid`; each whole code goes through the profile's
:class:`~drivers.profile.LineDecoder` (pattern and code table), so an unknown code is a
``Misread("unknown_code")`` exactly as on a serial reader of that profile.

A HID scanner takes no commands: cue, rescan and reject are not sent (``skipped_commands``)
and reach the dealer through the table's event feed. It has no heartbeat: the time the
device was claimed is its "last heartbeat", and an unplug shows as the read failing with
``ENODEV``, a :class:`~drivers.errors.ConnectionLost` the supervisor answers by reopening.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import time
from typing import Any

import structlog
import usb.core
import usb.util

from drivers.codec import LedColor
from drivers.errors import ConnectionLost, DeviceTimeout, DriverError, TransportError
from drivers.hid import HidSpec, KeyboardDecoder, PosReportDecoder
from drivers.profile import LineDecoder, load_profile
from drivers.queued import QueuedReads
from drivers.source import DriverSettings, Misread, Read
from drivers.usb_lookup import find_device

__all__ = ["HidCardSource", "find_interrupt_in"]

HID_CLASS = 0x03


def find_interrupt_in(device: Any) -> tuple[int, Any]:
    """The first HID interface of the active configuration with an interrupt IN endpoint.

    Returns:
        ``(interface number, IN endpoint)``.

    Raises:
        LookupError: No such interface.
    """

    def interrupt_in(endpoint: Any) -> bool:
        return bool(
            usb.util.endpoint_direction(endpoint.bEndpointAddress) == usb.util.ENDPOINT_IN
            and usb.util.endpoint_type(endpoint.bmAttributes) == usb.util.ENDPOINT_TYPE_INTR
        )

    for interface in device.get_active_configuration():
        if interface.bInterfaceClass != HID_CLASS:
            continue
        endpoint = usb.util.find_descriptor(interface, custom_match=interrupt_in)
        if endpoint is not None:
            return int(interface.bInterfaceNumber), endpoint
    raise LookupError("no HID interface with an interrupt IN endpoint")


class HidCardSource(QueuedReads):
    """A HID POS or keyboard-mode barcode scanner, read through its profile's code table.

    Args:
        url: The URL as configured.
        spec: What the URL resolved to.
        settings: Timeouts.
        backend: The pyusb backend (``None``: pyusb's default, libusb 1.0).

    Raises:
        ProfileError: The profile or its code table is not valid (file, field, reason).

    Attributes:
        skipped_commands: Commands not sent (a HID scanner takes none).
        detached_kernel_driver: Whether the last open had to detach the kernel's driver.
    """

    def __init__(
        self, url: str, spec: HidSpec, settings: DriverSettings, *, backend: Any = None
    ) -> None:
        super().__init__(url, spec.device)
        self._spec = spec
        self._settings = settings
        self._backend = backend
        loaded = load_profile(spec.profile, spec.codes)
        self.profile = loaded.profile
        self._lines = LineDecoder(loaded.profile, loaded.table)
        self._reports: PosReportDecoder | KeyboardDecoder = (
            PosReportDecoder() if spec.kind == "hidpos" else KeyboardDecoder()
        )
        self._log = structlog.get_logger(__name__).bind(
            url=url, device=spec.device, profile=self.profile.name
        )
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._usb: Any = None
        self._interface = 0
        self._endpoint: Any = None
        self._opened_at: float | None = None
        self._stop = False
        self.skipped_commands = 0
        self.detached_kernel_driver = False

    @property
    def last_heartbeat_at(self) -> float | None:
        """When the device was claimed (it has no heartbeat); ``None`` while closed."""
        return self._opened_at

    # ----------------------------------------------------------------- blocking side

    def _find(self) -> Any:
        return find_device(
            self._spec, backend=self._backend, error=self._error, what="USB HID scanner"
        )

    def _claim(self) -> tuple[Any, int, Any, bool]:
        device = self._find()
        detached = False
        try:
            try:
                device.get_active_configuration()
            except usb.core.USBError:
                device.set_configuration()
            number, endpoint = find_interrupt_in(device)
            with contextlib.suppress(NotImplementedError):
                if device.is_kernel_driver_active(number):
                    device.detach_kernel_driver(number)
                    detached = True
            usb.util.claim_interface(device, number)
        except LookupError as exc:
            usb.util.dispose_resources(device)
            raise self._error(
                TransportError, "the USB device is not a HID scanner", str(exc)
            ) from exc
        except usb.core.USBError as exc:
            with contextlib.suppress(usb.core.USBError):
                usb.util.dispose_resources(device)
            raise self._error(TransportError, "cannot claim the USB HID scanner", str(exc)) from exc
        return device, number, endpoint, detached

    def _read_blocking(self, endpoint: Any) -> bytes | None:
        timeout_ms = max(1, int(self._settings.usb_poll_timeout * 1000))
        try:
            data = endpoint.read(endpoint.wMaxPacketSize, timeout_ms)
        except usb.core.USBTimeoutError:
            return None
        return bytes(data)

    def _release_blocking(self, device: Any, number: int) -> None:
        with contextlib.suppress(usb.core.USBError, ValueError):
            usb.util.release_interface(device, number)
        if self.detached_kernel_driver:  # give the keyboard back to the system
            with contextlib.suppress(usb.core.USBError, ValueError, NotImplementedError):
                device.attach_kernel_driver(number)
        with contextlib.suppress(usb.core.USBError, ValueError):
            usb.util.dispose_resources(device)

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        """Find and claim the scanner within ``open_timeout``.

        Raises:
            TransportError: Already open, not plugged in, not a HID scanner, or busy.
            DeviceTimeout: Claiming took longer than ``open_timeout``.
        """
        if self._executor is not None:
            raise self._error(TransportError, "card source is already open")
        executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"hid {self.device}"
        )
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._settings.open_timeout):
                claimed = await loop.run_in_executor(executor, self._claim)
        except TimeoutError as exc:
            executor.shutdown(wait=False)
            raise self._error(
                DeviceTimeout,
                "opening the USB HID scanner timed out",
                f"open_timeout={self._settings.open_timeout}s",
            ) from exc
        except BaseException:
            executor.shutdown(wait=False)
            raise
        self._usb, self._interface, self._endpoint, self.detached_kernel_driver = claimed
        self._executor = executor
        self._reports.reset()
        self._lines.reset()
        self._stop = False
        self._opened_at = time.monotonic()
        self._task = asyncio.create_task(self._read_loop(), name=f"card-source {self._url}")
        self._log.info(
            "card_source_opened", kind=self._spec.kind, detached=self.detached_kernel_driver
        )

    async def close(self) -> None:
        """Stop reading and release the interface; reads not taken stay queued. Never raises."""
        task, executor, device = self._task, self._executor, self._usb
        self._task, self._executor, self._usb, self._opened_at = None, None, None, None
        self._stop = True
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.keep_reads()
        if executor is None:
            return
        if device is not None:
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(
                    self._settings.usb_poll_timeout + self._settings.write_timeout
                ):
                    await loop.run_in_executor(
                        executor, self._release_blocking, device, self._interface
                    )
            except TimeoutError:
                self._log.warning("usb_release_timeout")
        executor.shutdown(wait=False)
        self._log.info("card_source_closed")

    async def next_read(self) -> Read:
        """The next card, misread or status, in arrival order.

        Raises:
            ConnectionLost: The scanner was unplugged.
            TransportError: The source is not open.
        """
        return await self.take(is_open=self._executor is not None)

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        executor, endpoint = self._executor, self._endpoint
        assert executor is not None
        try:
            while not self._stop:
                reading = loop.run_in_executor(executor, self._read_blocking, endpoint)
                try:
                    report = await asyncio.shield(reading)
                except usb.core.USBError as exc:
                    gone = exc.errno in (errno.ENODEV, errno.EIO, errno.EPIPE, errno.ESHUTDOWN)
                    raise self._error(
                        ConnectionLost,
                        "the USB HID scanner was unplugged" if gone else "USB read failed",
                        f"{exc} (errno={exc.errno})",
                    ) from exc
                if report:
                    self._deliver(report, time.monotonic())
        except DriverError as exc:
            self._log.error("card_source_failed", error=str(exc))
            self._queue.put_nowait(exc)

    def _deliver(self, report: bytes, at: float) -> None:
        for code in self._reports.feed(report):
            if isinstance(code, str):
                self._queue.put_nowait(Misread("line", code, None, at))
                continue
            for read in self._lines.feed(code + self.profile.terminator_bytes, at):
                self._queue.put_nowait(read)

    # ----------------------------------------------------------------- commands (none)

    async def _skip(self) -> None:
        if self._executor is None:
            raise self._error(TransportError, "card source is not open")
        self.skipped_commands += 1

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """A HID scanner takes no cue: the event feed carries it."""
        await self._skip()

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """A HID scanner takes no rescan request: the event feed carries it."""
        await self._skip()

    async def reject(self, slot_name: str, reason: str) -> None:
        """A HID scanner takes no reject: the event feed carries it."""
        await self._skip()

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """A HID scanner has no LED command the host may use: nothing is sent."""
        await self._skip()

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """A HID scanner has no beep command the host may use: nothing is sent."""
        await self._skip()

    async def reset(self) -> None:
        """Forget a code half received."""
        self._reports.reset()
        self._lines.reset()
