"""``tablectl devices``: the serial ports and USB devices that look like card scanners.

Serial ports come from ``serial.tools.list_ports``; USB devices from pyusb (skipped with a
note when no libusb backend is installed). A USB device is a scanner when its VID:PID is in
:data:`KNOWN_SCANNERS` or its product string mentions ``tablectl``; a serial port is listed
with the USB device behind it when there is one (USB-serial adapters). Each line ends with
the URL to put in the table config's ``[device] url``.

USB HID barcode scanners are recognised by the VID:PID table shipped as data
(``drivers/hid_scanners.toml``, :func:`hid_scanner_table`): each is listed with the driver
URL of its mode (``hidpos://`` or ``hidkbd://``) and the device profile it suggests.
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drivers.profile import ProfileError, resolve_profile_path

KNOWN_SCANNERS: dict[tuple[int, int], str] = {
    (0x1209, 0x7AB1): "tablectl card scanner (simulator and reference firmware)",
}
"""USB VID:PID pairs of scanners we know. Add a shoe's ids here when the hardware arrives."""

PRODUCT_MARK = "tablectl"
"""A USB product string containing this (case-insensitive) marks our firmware."""


HID_SCANNERS_FILE = "hid_scanners.toml"
"""The shipped table of USB HID scanners (in the ``drivers`` package)."""


class HidScannerModel(BaseModel):
    """One line of the HID scanner table: a model, its mode and the profile it suggests."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vid: int = Field(ge=0, le=0xFFFF)
    pid: int = Field(ge=0, le=0xFFFF)
    name: str = Field(min_length=1)
    mode: Literal["pos", "kbd"]
    profile: str = Field(min_length=1)


class _HidScannerTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scanner: list[HidScannerModel] = Field(default_factory=list)


def hid_scanner_table(path: Path | None = None) -> dict[tuple[int, int], HidScannerModel]:
    """The HID scanners we know, by ``(VID, PID)``.

    Args:
        path: The table's file (``None``: the one shipped with tablectl).

    Raises:
        ProfileError: Unreadable, not TOML, a bad field, a VID:PID twice or a profile that
            does not exist (the file, the field and the reason).
    """
    if path is None:
        path = Path(str(resources.files("drivers").joinpath(HID_SCANNERS_FILE)))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        table = _HidScannerTable.model_validate(data)
    except OSError as exc:
        raise ProfileError(
            "cannot read the HID scanner table", file=str(path), detail=str(exc)
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(
            "the HID scanner table is not valid TOML", file=str(path), detail=str(exc)
        ) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ProfileError(
            "invalid HID scanner table", file=str(path),
            field=".".join(str(part) for part in first["loc"]), detail=first["msg"],
        ) from exc  # fmt: skip
    models: dict[tuple[int, int], HidScannerModel] = {}
    for index, model in enumerate(table.scanner):
        ids = (model.vid, model.pid)
        where = f"scanner.{index}"
        if ids in models:
            raise ProfileError(
                "invalid HID scanner table", file=str(path), field=where,
                detail=f"{model.vid:04x}:{model.pid:04x} is listed twice",
            )  # fmt: skip
        try:
            resolve_profile_path(model.profile)
        except ProfileError as exc:
            raise ProfileError(
                "invalid HID scanner table", file=str(path), field=f"{where}.profile",
                detail=f"{exc.message}: {model.profile!r}",
            ) from exc  # fmt: skip
        models[ids] = model
    return models


SYSTEM_PCSCD = "/run/pcscd/pcscd.comm"
"""The system pcscd's socket (pcsc-lite on Debian)."""


@dataclass(frozen=True, slots=True)
class FoundDevice:
    """One candidate scanner.

    Attributes:
        url: The card-source URL for the config.
        kind: ``"serial"`` or ``"usb"``.
        description: What the system says it is.
        known: Whether it is a known scanner (rather than any serial port).
        profile: The device profile suggested (HID scanners), ``None`` otherwise.
    """

    url: str
    kind: str
    description: str
    known: bool
    profile: str | None = None


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
    hid_models = hid_scanner_table()
    found = []
    for device in devices:
        ids = (int(device.idVendor), int(device.idProduct))
        if ids in hid_models:
            found.append(_hid_found(device, hid_models[ids]))
            continue
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


def _hid_found(device: Any, model: HidScannerModel) -> FoundDevice:
    import usb.core
    import usb.util

    serial = None  # no permission to open it: the first device of that VID:PID
    with contextlib.suppress(usb.core.USBError, ValueError, NotImplementedError):
        serial = usb.util.get_string(device, device.iSerialNumber)
    url = f"hid{model.mode}://{model.vid:04x}:{model.pid:04x}?profile={model.profile}"
    if serial:
        url += f"&serial={serial}"
    mode = "HID POS" if model.mode == "pos" else "keyboard mode"
    description = f"{model.name} ({mode})" + (f", serial {serial}" if serial else "")
    return FoundDevice(url, "usb-hid", description, True, model.profile)


def list_pcsc_readers(pcscd: str | None = None) -> tuple[list[FoundDevice], str | None]:
    """The PC/SC readers pcscd knows (by name), and a note when they could not be listed.

    Args:
        pcscd: The pcscd socket (``None``: the system's, ``/run/pcscd/pcscd.comm``).
    """
    from urllib.parse import quote

    from drivers.errors import TransportError
    from drivers.pcsc_source import PcscUnavailable, list_readers

    socket = pcscd or os.environ.get("PCSCLITE_CSOCK_NAME") or SYSTEM_PCSCD
    if not Path(socket).exists():
        return [], f"PC/SC readers not searched: pcscd is not running (no {socket})"
    try:
        names = list_readers(pcscd)
    except PcscUnavailable:
        return [], "pyscard is not installed: PC/SC readers not searched (tablectl[pcsc])"
    except TransportError as exc:
        return [], f"PC/SC readers not searched: {exc.message} (apt install pcscd)"
    suffix = f"&pcscd={quote(pcscd)}" if pcscd else ""
    return [
        FoundDevice(
            f"pcsc://?reader={quote(name)}{suffix}",
            "pcsc",
            f"PC/SC reader {name!r} (add &codes=FILE: the enrolled deck)",
            True,
            "pcsc-uid",
        )
        for name in names
    ], None


def render(serial_ports: list[FoundDevice], usb: list[FoundDevice], note: str | None) -> str:
    """The listing ``tablectl devices`` prints."""
    lines = []
    for device in [*usb, *serial_ports]:
        mark = "scanner" if device.known else "port   "
        line = f"{mark}  {device.url:<44}  {device.description}"
        if device.profile is not None:
            line += f"; suggested profile: {device.profile}"
        lines.append(line)
    if not lines:
        lines.append("no serial port and no USB scanner found")
    if note:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def find_devices(
    *,
    known_only: bool = False,
    usb_only: bool = False,
    usb_backend: Any = None,
    pcsc: bool = False,
    pcscd: str | None = None,
) -> tuple[list[FoundDevice], list[FoundDevice], str | None]:
    """The candidate devices: serial ports, USB scanners, and a note on USB enumeration.

    Args:
        known_only: Only serial ports recognised as scanners.
        usb_only: Skip serial ports.
        usb_backend: The pyusb backend (``None``: pyusb's default libusb backend).
        pcsc: Also the PC/SC readers pcscd knows (listed with the USB devices: they are
            USB readers), by name.
        pcscd: The pcscd socket for ``pcsc`` (``None``: the system's).
    """
    serial_ports = [] if usb_only else list_serial_ports()
    if known_only:
        serial_ports = [port for port in serial_ports if port.known]
    usb, note = list_usb_scanners(usb_backend)
    if pcsc:
        readers, pcsc_note = list_pcsc_readers(pcscd)
        usb = [*readers, *usb]
        note = "; ".join(text for text in (note, pcsc_note) if text) or None
    return serial_ports, usb, note
