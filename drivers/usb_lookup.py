"""Finding one USB device for a driver: by vendor, product and serial number, through pyusb.

Blocking (pyusb): the drivers call it from their executor thread. Shared by the bulk-pair
driver (:mod:`drivers.usb_source`) and the HID scanner driver (:mod:`drivers.hid_source`),
which then claim the device each their own way (a bulk IN/OUT pair; a HID interrupt
endpoint, with the kernel's keyboard driver detached and given back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import usb.core
import usb.util

from drivers.errors import DriverError, TransportError

__all__ = ["UsbIds", "find_device"]


class UsbIds(Protocol):
    """What names one USB device (``usb://`` and ``hidpos://``/``hidkbd://`` URLs resolve to it)."""

    @property
    def vendor_id(self) -> int:
        """USB idVendor."""

    @property
    def product_id(self) -> int:
        """USB idProduct."""

    @property
    def serial(self) -> str | None:
        """The serial-number string to match, or ``None`` for the first device."""


def _matches_serial(wanted: str | None) -> Callable[[Any], bool]:
    def match(device: Any) -> bool:
        if wanted is None:
            return True
        try:
            return bool(usb.util.get_string(device, device.iSerialNumber) == wanted)
        except (usb.core.USBError, ValueError, NotImplementedError):
            return False

    return match


def find_device(
    ids: UsbIds,
    *,
    backend: Any,
    error: Callable[[type[DriverError], str, str | None], DriverError],
    what: str,
) -> Any:
    """The first plugged-in device with these ids (and serial-number string, if one is given).

    Args:
        ids: The vendor and product ids, and the serial number or ``None``.
        backend: The pyusb backend (``None``: pyusb's default, libusb).
        error: The driver's error factory (its URL and device filled in).
        what: What the driver calls the device, in the "not plugged in" error.

    Raises:
        TransportError: No libusb backend, the bus cannot be enumerated, or no such device.
    """
    try:
        device = usb.core.find(
            idVendor=ids.vendor_id,
            idProduct=ids.product_id,
            backend=backend,
            custom_match=_matches_serial(ids.serial),
        )
    except usb.core.NoBackendError as exc:
        raise error(
            TransportError,
            "no libusb backend is available for pyusb (install libusb-1.0)",
            str(exc),
        ) from exc
    except usb.core.USBError as exc:
        raise error(TransportError, "cannot enumerate USB devices", str(exc)) from exc
    if device is None:
        raise error(TransportError, f"no such {what} is plugged in", None)
    return device
