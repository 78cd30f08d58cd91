"""``tablectl devices``: the serial ports and USB devices that look like card scanners.

Serial ports come from ``serial.tools.list_ports``; USB devices from pyusb (skipped with a
note when no libusb backend is installed). A USB device is a scanner when its VID:PID is in
:data:`KNOWN_SCANNERS` or its product string mentions ``tablectl``; a serial port is listed
with the USB device behind it when there is one (USB-serial adapters). Each line ends with
the URL to put in the table config's ``[device] url``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KNOWN_SCANNERS: dict[tuple[int, int], str] = {
    (0x1209, 0x7AB1): "tablectl card scanner (simulator and reference firmware)",
}
"""USB VID:PID pairs of scanners we know. Add a shoe's ids here when the hardware arrives."""

PRODUCT_MARK = "tablectl"
"""A USB product string containing this (case-insensitive) marks our firmware."""


@dataclass(frozen=True, slots=True)
class FoundDevice:
    """One candidate scanner.

    Attributes:
        url: The card-source URL for the config.
        kind: ``"serial"`` or ``"usb"``.
        description: What the system says it is.
        known: Whether it is a known scanner (rather than any serial port).
    """

    url: str
    kind: str
    description: str
    known: bool


def list_serial_ports() -> list[FoundDevice]:
    """Every serial port the system has (known USB-serial scanners flagged)."""
    from serial.tools import list_ports

    found = []
    for port in sorted(list_ports.comports(), key=lambda p: p.device):
        known = (port.vid, port.pid) in KNOWN_SCANNERS or PRODUCT_MARK in (
            (port.product or "") + (port.description or "")
        ).lower()
        usb = f" [{port.vid:04x}:{port.pid:04x}]" if port.vid is not None else ""
        found.append(
            FoundDevice(
                f"serial://{port.device}?baud=115200",
                "serial",
                f"{port.description or port.name}{usb}",
                known,
            )
        )
    return found


def list_usb_scanners(backend: Any = None) -> tuple[list[FoundDevice], str | None]:
    """USB devices that look like scanners, and a note when USB could not be searched.

    Args:
        backend: A pyusb backend (``None``: pyusb's default; tests pass the simulated one).
    """
    try:
        import usb.core
        import usb.util
    except ImportError as exc:  # pragma: no cover - pyusb is a dependency
        return [], f"pyusb is not installed ({exc})"
    try:
        devices = list(usb.core.find(find_all=True, backend=backend))
    except usb.core.NoBackendError:
        return (
            [],
            "no libusb backend for pyusb: USB devices not searched (apt install libusb-1.0-0)",
        )
    except usb.core.USBError as exc:
        return [], f"USB devices could not be listed: {exc}"
    found = []
    for device in devices:
        ids = (int(device.idVendor), int(device.idProduct))
        product = serial = None
        try:
            product = usb.util.get_string(device, device.iProduct)
            serial = usb.util.get_string(device, device.iSerialNumber)
        except (usb.core.USBError, ValueError, NotImplementedError):
            pass  # no permission to open it: judge by the ids alone
        if ids not in KNOWN_SCANNERS and PRODUCT_MARK not in (product or "").lower():
            continue
        url = f"usb://{ids[0]:04x}:{ids[1]:04x}" + (f"?serial={serial}" if serial else "")
        description = product or KNOWN_SCANNERS.get(ids, "USB device")
        if serial:
            description += f", serial {serial}"
        found.append(FoundDevice(url, "usb", description, True))
    return found, None


def render(serial_ports: list[FoundDevice], usb: list[FoundDevice], note: str | None) -> str:
    """The listing ``tablectl devices`` prints."""
    lines = []
    for device in [*usb, *serial_ports]:
        mark = "scanner" if device.known else "port   "
        lines.append(f"{mark}  {device.url:<44}  {device.description}")
    if not lines:
        lines.append("no serial port and no USB scanner found")
    if note:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def find_devices(
    *, known_only: bool = False, usb_only: bool = False, usb_backend: Any = None
) -> tuple[list[FoundDevice], list[FoundDevice], str | None]:
    """The candidate devices: serial ports, USB scanners, and a note on USB enumeration.

    Args:
        known_only: Only serial ports recognised as scanners.
        usb_only: Skip serial ports.
        usb_backend: The pyusb backend (``None``: pyusb's default libusb backend).
    """
    serial_ports = [] if usb_only else list_serial_ports()
    if known_only:
        serial_ports = [port for port in serial_ports if port.known]
    usb, note = list_usb_scanners(usb_backend)
    return serial_ports, usb, note
