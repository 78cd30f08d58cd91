"""A simulated USB scanner: a pyusb backend (``usb.backend.IBackend``) presenting one device.

The real driver (:mod:`drivers.usb_source`) runs unchanged on top of it: ``usb.core.find``
enumerates it, reads its device, configuration, interface and endpoint descriptors and its
string descriptors (through ``ctrl_transfer``), opens it, claims its interface and moves
bytes over its bulk endpoints. Bulk IN returns what the device side wrote
(:meth:`SimulatedUsbBackend.device_write`); bulk OUT hands the host's bytes to
``on_host_bytes``. The scanner simulator plugs itself in with
:meth:`simulators.scanner.ScannerSimulator.serve_usb`.

:meth:`SimulatedUsbBackend.unplug` makes the device vanish from enumeration; every call on a
handle opened before fails with ``ENODEV`` as libusb's do (``LIBUSB_ERROR_NO_DEVICE``).
:meth:`SimulatedUsbBackend.replug` brings it back at a new bus address.

With ``hid="pos"`` or ``hid="kbd"`` the device is a USB HID barcode scanner instead: one HID
interface (class 3; a boot keyboard for ``kbd``) with one interrupt IN endpoint, bound to the
kernel's HID driver until the host detaches it, and reports queued one per interrupt read
(:meth:`SimulatedUsbBackend.device_report`). :class:`HidScannerSimulator` deals a card table's
codes through it as a HID POS or keyboard-mode scanner does (``drivers/hid.py`` has the
report layouts).

pyusb calls the backend from the driver's worker threads while the simulator writes from the
event loop's thread: every piece of state is behind one lock.
"""

from __future__ import annotations

import array
import asyncio
import errno
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import usb.backend
import usb.core

from drivers.hid import encode_keyboard, encode_pos
from drivers.profile import LoadedProfile

VENDOR_ID = 0x1209
"""pid.codes' shared vendor id, used by the simulator (see ``docs/drivers.md``)."""
PRODUCT_ID = 0x7AB1
"""The simulated scanner's product id (a placeholder until our hardware has its own)."""
HID_POS_PRODUCT_ID = 0x7AB2
"""The simulated HID POS scanner's product id (in ``drivers/hid_scanners.toml``)."""
HID_KBD_PRODUCT_ID = 0x7AB3
"""The simulated keyboard-mode scanner's product id (in ``drivers/hid_scanners.toml``)."""
PRODUCT = "tablectl card scanner"
MANUFACTURER = "tablectl"
EP_IN = 0x81
EP_OUT = 0x02
MAX_PACKET = 64

_LIBUSB_ERROR_NO_DEVICE = -4
_LIBUSB_ERROR_BUSY = -6
_LIBUSB_ERROR_TIMEOUT = -7
_LIBUSB_ERROR_PIPE = -9


@dataclass(slots=True)
class _DeviceDescriptor:
    idVendor: int
    idProduct: int
    iSerialNumber: int
    address: int
    bus: int = 1
    bLength: int = 18
    bDescriptorType: int = 1
    bcdUSB: int = 0x0200
    bDeviceClass: int = 0
    bDeviceSubClass: int = 0
    bDeviceProtocol: int = 0
    bMaxPacketSize0: int = 64
    bcdDevice: int = 0x0100
    iManufacturer: int = 1
    iProduct: int = 2
    bNumConfigurations: int = 1
    port_number: int = 1
    port_numbers: tuple[int, ...] = (1,)
    speed: int = 3  # high speed


@dataclass(slots=True)
class _ConfigDescriptor:
    bLength: int = 9
    bDescriptorType: int = 2
    wTotalLength: int = 32
    bNumInterfaces: int = 1
    bConfigurationValue: int = 1
    iConfiguration: int = 0
    bmAttributes: int = 0xC0
    bMaxPower: int = 50
    extra_descriptors: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _InterfaceDescriptor:
    bLength: int = 9
    bDescriptorType: int = 4
    bInterfaceNumber: int = 0
    bAlternateSetting: int = 0
    bNumEndpoints: int = 2
    bInterfaceClass: int = 0xFF
    bInterfaceSubClass: int = 0
    bInterfaceProtocol: int = 0
    iInterface: int = 0
    extra_descriptors: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _EndpointDescriptor:
    bEndpointAddress: int
    bLength: int = 7
    bDescriptorType: int = 5
    bmAttributes: int = 0x02
    wMaxPacketSize: int = MAX_PACKET
    bInterval: int = 0
    bRefresh: int = 0
    bSynchAddress: int = 0
    extra_descriptors: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _DeviceId:
    generation: int


@dataclass(slots=True)
class _Handle:
    generation: int
    configuration: int = 0
    claimed: set[int] = field(default_factory=set)


def _no_device() -> usb.core.USBError:
    return usb.core.USBError(
        "No such device (it may have been disconnected)", _LIBUSB_ERROR_NO_DEVICE, errno.ENODEV
    )


class SimulatedUsbBackend(usb.backend.IBackend):  # type: ignore[misc]
    """One simulated scanner on a simulated bus.

    Args:
        vendor_id: idVendor.
        product_id: idProduct (``None``: :data:`PRODUCT_ID`, or the HID simulators' ids).
        serial: The serial-number string.
        product: The product string (``tablectl devices`` recognises ``tablectl``).
        hid: ``"pos"`` or ``"kbd"``: a HID barcode scanner with an interrupt IN endpoint;
            ``None``: the framed scanner on bulk endpoints.

    Attributes:
        on_host_bytes: Called with every bulk OUT payload (from a driver thread).
        dropped_bytes: Device bytes thrown away because no host had the device open.
    """

    def __init__(
        self,
        *,
        vendor_id: int = VENDOR_ID,
        product_id: int | None = None,
        serial: str = "SIM0001",
        product: str = PRODUCT,
        hid: Literal["pos", "kbd"] | None = None,
    ) -> None:
        self.vendor_id = vendor_id
        hid_ids = {None: PRODUCT_ID, "pos": HID_POS_PRODUCT_ID, "kbd": HID_KBD_PRODUCT_ID}
        self.product_id = product_id if product_id is not None else hid_ids[hid]
        self.strings = {1: MANUFACTURER, 2: product, 3: serial}
        self.on_host_bytes: Callable[[bytes], None] | None = None
        self.dropped_bytes = 0
        self._lock = threading.Condition()
        self._present = True
        self._generation = 1
        self._address = 5
        self._in = bytearray()
        self._claimed_by: _Handle | None = None
        self.hid = hid
        self.kernel_driver_active = hid is not None
        self.detaches = 0
        self._reports: deque[bytes] = deque()

    # ------------------------------------------------------------------ device side

    @property
    def present(self) -> bool:
        """Whether the device is plugged in."""
        return self._present

    def device_write(self, data: bytes) -> None:
        """The device puts bytes on its bulk IN endpoint (dropped when no host claims it)."""
        with self._lock:
            if not self._present or self._claimed_by is None:
                self.dropped_bytes += len(data)
                return
            self._in += data
            self._lock.notify_all()

    def device_report(self, report: bytes) -> None:
        """The HID device queues one input report (dropped when no host claims it)."""
        with self._lock:
            if not self._present or self._claimed_by is None:
                self.dropped_bytes += len(report)
                return
            self._reports.append(report)
            self._lock.notify_all()

    def pending_in(self) -> int:
        """Bytes waiting on the bulk IN endpoint."""
        return len(self._in)

    def unplug(self) -> None:
        """The cable is pulled: the device leaves enumeration, open handles go dead."""
        with self._lock:
            self._present = False
            self._claimed_by = None
            self._in.clear()
            self._reports.clear()
            self._lock.notify_all()

    def replug(self) -> None:
        """The cable is plugged back: the device enumerates again, at a new address."""
        with self._lock:
            self._present = True
            self._generation += 1
            self._address = self._address % 127 + 1
            self._in.clear()
            self._reports.clear()
            self.kernel_driver_active = self.hid is not None  # the kernel binds it again

    # ------------------------------------------------------------------ IBackend

    def _check(self, handle: _Handle) -> None:
        if not self._present or handle.generation != self._generation:
            raise _no_device()

    def enumerate_devices(self) -> Iterator[_DeviceId]:  # noqa: D102
        with self._lock:
            present, generation = self._present, self._generation
        if present:
            yield _DeviceId(generation)

    def get_device_descriptor(self, dev: _DeviceId) -> _DeviceDescriptor:  # noqa: D102
        return _DeviceDescriptor(
            idVendor=self.vendor_id,
            idProduct=self.product_id,
            iSerialNumber=3,
            address=self._address,
        )

    def get_configuration_descriptor(self, dev: _DeviceId, config: int) -> _ConfigDescriptor:  # noqa: D102
        if config != 0:
            raise IndexError("configuration index out of range")
        return _ConfigDescriptor()

    def get_interface_descriptor(  # noqa: D102
        self, dev: _DeviceId, intf: int, alt: int, config: int
    ) -> _InterfaceDescriptor:
        if (intf, alt, config) != (0, 0, 0):
            raise IndexError("interface index out of range")
        if self.hid is not None:
            boot = 1 if self.hid == "kbd" else 0
            return _InterfaceDescriptor(
                bNumEndpoints=1, bInterfaceClass=3, bInterfaceSubClass=boot,
                bInterfaceProtocol=boot,
            )  # fmt: skip
        return _InterfaceDescriptor()

    def get_endpoint_descriptor(  # noqa: D102
        self, dev: _DeviceId, ep: int, intf: int, alt: int, config: int
    ) -> _EndpointDescriptor:
        if (intf, alt, config) != (0, 0, 0) or ep not in (0, 1):
            raise IndexError("endpoint index out of range")
        if self.hid is not None:
            if ep != 0:
                raise IndexError("endpoint index out of range")
            size = 8 if self.hid == "kbd" else 64
            return _EndpointDescriptor(
                bEndpointAddress=EP_IN, bmAttributes=0x03, wMaxPacketSize=size, bInterval=1
            )
        return _EndpointDescriptor(bEndpointAddress=EP_IN if ep == 0 else EP_OUT)

    def open_device(self, dev: _DeviceId) -> _Handle:  # noqa: D102
        with self._lock:
            if not self._present or dev.generation != self._generation:
                raise _no_device()
            return _Handle(self._generation)

    def close_device(self, dev_handle: _Handle) -> None:  # noqa: D102
        with self._lock:
            if self._claimed_by is dev_handle:
                self._claimed_by = None

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:  # noqa: D102
        with self._lock:
            self._check(dev_handle)
            dev_handle.configuration = config_value

    def get_configuration(self, dev_handle: _Handle) -> int:  # noqa: D102
        with self._lock:
            self._check(dev_handle)
            return dev_handle.configuration

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:  # noqa: D102
        with self._lock:
            self._check(dev_handle)
            return self.kernel_driver_active

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:  # noqa: D102
        with self._lock:
            self._check(dev_handle)
            self.kernel_driver_active = False
            self.detaches += 1

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:  # noqa: D102
        with self._lock:
            self._check(dev_handle)
            self.kernel_driver_active = self.hid is not None

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:  # noqa: D102
        with self._lock:
            self._check(dev_handle)
            if self.kernel_driver_active:
                raise usb.core.USBError("Resource busy", _LIBUSB_ERROR_BUSY, errno.EBUSY)
            if self._claimed_by is not None and self._claimed_by is not dev_handle:
                raise usb.core.USBError("Resource busy", _LIBUSB_ERROR_BUSY, errno.EBUSY)
            self._claimed_by = dev_handle
            self._in.clear()  # what nobody read before belongs to nobody
            self._reports.clear()

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:  # noqa: D102
        with self._lock:
            if self._claimed_by is dev_handle:
                self._claimed_by = None

    def bulk_write(  # noqa: D102
        self, dev_handle: _Handle, ep: int, intf: int, data: array.array[int], timeout: int
    ) -> int:
        with self._lock:
            self._check(dev_handle)
            if ep != EP_OUT:
                raise usb.core.USBError("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
            sink = self.on_host_bytes
        payload = bytes(data)
        if sink is not None:
            sink(payload)
        return len(payload)

    def bulk_read(  # noqa: D102
        self, dev_handle: _Handle, ep: int, intf: int, buff: array.array[int], timeout: int
    ) -> int:
        deadline = time.monotonic() + (timeout / 1000 if timeout else 3600.0)
        with self._lock:
            while True:
                self._check(dev_handle)
                if ep != EP_IN:
                    raise usb.core.USBError("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
                if self._in:
                    size = min(len(buff), len(self._in))
                    buff[:size] = array.array("B", self._in[:size])
                    del self._in[:size]
                    return size
                left = deadline - time.monotonic()
                if left <= 0:
                    raise usb.core.USBTimeoutError(
                        "Operation timed out", _LIBUSB_ERROR_TIMEOUT, errno.ETIMEDOUT
                    )
                self._lock.wait(left)

    def intr_read(  # noqa: D102
        self, dev_handle: _Handle, ep: int, intf: int, buff: array.array[int], timeout: int
    ) -> int:
        deadline = time.monotonic() + (timeout / 1000 if timeout else 3600.0)
        with self._lock:
            while True:
                self._check(dev_handle)
                if ep != EP_IN or self.hid is None:
                    raise usb.core.USBError("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
                if self._reports:
                    report = self._reports.popleft()
                    size = min(len(buff), len(report))
                    buff[:size] = array.array("B", report[:size])
                    return size
                left = deadline - time.monotonic()
                if left <= 0:
                    raise usb.core.USBTimeoutError(
                        "Operation timed out", _LIBUSB_ERROR_TIMEOUT, errno.ETIMEDOUT
                    )
                self._lock.wait(left)

    def ctrl_transfer(  # noqa: D102, PLR0917 - pyusb's signature
        self,
        dev_handle: _Handle,
        bmRequestType: int,
        bRequest: int,
        wValue: int,
        wIndex: int,
        data: array.array[int],
        timeout: int,
    ) -> int:
        with self._lock:
            self._check(dev_handle)
        if bmRequestType == 0x80 and bRequest == 0x06 and wValue >> 8 == 3:  # GET_DESCRIPTOR
            index = wValue & 0xFF
            if index == 0:
                body = (0x0409).to_bytes(2, "little")  # English (US)
            elif index in self.strings:
                body = self.strings[index].encode("utf-16-le")
            else:
                raise usb.core.USBError("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
            descriptor = bytes((2 + len(body), 3)) + body
            size = min(len(data), len(descriptor))
            data[:size] = array.array("B", descriptor[:size])
            return size
        raise usb.core.USBError("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)  # a stall


@dataclass
class HidStats:
    """What a :class:`HidScannerSimulator` did."""

    codes_sent: int = 0
    unknown_codes: int = 0
    unplugs: int = 0


class HidScannerSimulator:
    """A HID barcode scanner (POS or keyboard mode) dealing cards through its profile's codes.

    The dealer (the test) scans when the table's event feed shows a cue: :meth:`screen`
    with ``"expect"`` scans the next card, with ``"rescan"`` scans the card in hand again.

    Args:
        backend: The simulated device (``hid="pos"`` or ``"kbd"``).
        profile: The device profile whose code table gives each card's code.
        cards: The cards to deal, in order.
        unknown_at: Indices of cards whose first scan sends a code the table does not know.
        unplug_every: Pull the cable as every n-th card is scanned (that scan is lost).
        unplug_seconds: How long the cable stays out.
    """

    def __init__(
        self,
        backend: SimulatedUsbBackend,
        profile: LoadedProfile,
        cards: Sequence[str],
        *,
        unknown_at: frozenset[int] = frozenset(),
        unplug_every: int | None = None,
        unplug_seconds: float = 0.15,
    ) -> None:
        if backend.hid is None:
            raise ValueError("a HID scanner simulator needs a backend with hid='pos' or 'kbd'")
        self.backend = backend
        self.loaded = profile
        self.profile = profile.profile
        self.cards = list(cards)
        missing = [card for card in self.cards if profile.table.code_of(card) is None]
        if missing:
            raise ValueError(f"cards not in code table {profile.table.name!r}: {missing}")
        self.unknown_at = unknown_at
        self.unplug_every = unplug_every
        self.unplug_seconds = unplug_seconds
        self.stats = HidStats()
        self.drawn: list[str] = []
        self._index = -1
        self._spoiled: set[int] = set()
        self._pulled: set[int] = set()

    def screen(self, cue: str, slot_name: str, *, round_no: int = 1, slot_index: int = 0) -> None:
        """The dealer reads a cue on the event feed and scans."""
        if cue == "expect" and slot_index > self._index:
            self._index = slot_index
        if self._index < 0 or self._index >= len(self.cards):
            return
        self._scan(self._index)

    def _scan(self, index: int) -> None:
        card = self.cards[index]
        code = self.loaded.table.code_of(card)
        assert code is not None
        if self.unplug_every and (index + 1) % self.unplug_every == 0 and index not in self._pulled:
            self._pulled.add(index)
            self.stats.unplugs += 1
            self.backend.unplug()
            asyncio.get_running_loop().call_later(self.unplug_seconds, self.backend.replug)
            return
        if index in self.unknown_at and index not in self._spoiled:
            self._spoiled.add(index)
            code = self._unknown(code)
            self.stats.unknown_codes += 1
        elif card not in self.drawn:
            self.drawn.append(card)
        self.send_code(code)

    async def free_run(self, interval: float, deck: Sequence[str], seed: int) -> None:
        """Deal without cues (a task): every ``interval`` seconds the next card of a shoe.

        For ``tablectl run --simulate`` with a HID scanner: nobody reads the event feed,
        so the dealer scans on their own; a shoe is ``deck`` shuffled with
        ``random.Random(f"{seed}:{n}")``, a new one when it runs out.
        """
        shoe: list[str] = []
        shoes = 0
        while True:
            await asyncio.sleep(interval)
            if not shoe:
                shoe = list(deck)
                random.Random(f"{seed}:{shoes}").shuffle(shoe)
                shoes += 1
            card = shoe.pop(0)
            code = self.loaded.table.code_of(card)
            if code is None:
                raise ValueError(f"card {card!r} is not in code table {self.loaded.table.name!r}")
            self.drawn.append(card)
            self.send_code(code)

    def send_code(self, code: str) -> None:
        """Scan a code: its reports go to the host."""
        reports = encode_pos(code.encode()) if self.backend.hid == "pos" else encode_keyboard(code)
        for report in reports:
            self.backend.device_report(report)
        self.stats.codes_sent += 1

    def _unknown(self, code: str) -> str:
        """A code the pattern accepts but the table does not know."""
        regex = self.profile.regex
        for char in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ":
            candidate = code[:-1] + char
            if self.loaded.table.card_of(candidate) is None and regex.fullmatch(candidate):
                return candidate
        raise ValueError(f"no unknown code close to {code!r} fits the profile's pattern")
