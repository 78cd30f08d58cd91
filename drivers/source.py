"""What a card source gives the rest of the system, and how to open one from a URL.

A card source is a scanner (or shoe) behind some transport. The rest of the controller sees
only :data:`Read` values and a handful of commands; framing, acknowledgements, repeats and
heartbeats stay inside the driver.

URLs (see ``docs/protocol.md``):

* ``serial:///dev/ttyUSB0?baud=115200`` or a bare ``/dev/ttyUSB0``: a serial port (or pty);
* ``socket://host:port``: the same protocol over TCP (pyserial's socket handler);
* ``usb://VID:PID[?serial=SN]``: a USB scanner with a bulk IN and a bulk OUT endpoint that
  carry the same framed byte stream (pyusb; see ``docs/drivers.md``);
* ``profile+serial:///dev/ttyUSB0?profile=NAME[&baud=9600][&codes=FILE]``: a line-oriented
  reader described by a device profile (a shipped name or a ``.toml`` path;
  ``drivers/profile.py``), ``codes`` an enrolled deck's code table replacing the profile's;
* ``hidpos://VID:PID?profile=NAME`` / ``hidkbd://VID:PID?profile=NAME``: a USB HID barcode
  scanner (HID POS or keyboard mode) read with pyusb, codes mapped by the profile's code table
  (``drivers/hid.py``);
* ``memory://NAME``: protocol v1 on the in-memory null modem of ``drivers/memory.py`` (a
  simulator served in the same process: the fast test tier and demos);
* ``pcsc://?reader=NAME[&codes=FILE]``: a PC/SC contactless reader (ACS ACR122U...) through
  pcscd and pyscard, its tags' UIDs latched and mapped by a code table
  (``drivers/pcsc_source.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable
from urllib.parse import SplitResult, parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drivers.codec import LedColor
from drivers.errors import UnsupportedUrl
from drivers.hid import HID_SCHEMES, HidSpec, parse_hid_url
from drivers.json_readers import (
    JSON_READER_SCHEMES,
    JsonLinesSpec,
    MqttReaderSpec,
    parse_json_reader_url,
)
from drivers.pcsc_url import PCSC_SCHEMES, PcscSpec, parse_pcsc_url
from drivers.pepper_url import PEPPER_SCHEMES, PepperSpec, parse_pepper_url

if TYPE_CHECKING:
    from usb.backend import IBackend

MisreadCauseName = Literal[
    "device", "crc", "malformed", "gap", "line", "checksum", "unknown_code", "position", "away"
]
"""Why a read failed: the scanner said so, a frame failed its CRC, a frame was unusable, or
a sequence gap showed that a frame (maybe a card) was lost. A line-oriented device (a device
profile, ``drivers/profile.py``) adds: a record that does not match the profile (``line``), a
bad checksum, a code its code table does not know, a card read at the wrong position. Those
are not retransmitted by any link: the dealer scans again. ``away``: a device whose reads do
not survive its absence (a line or HID device) came back; a read made meanwhile was lost
with it (the supervisor says so after ``recovered``)."""


@dataclass(frozen=True, slots=True)
class CardRead:
    """The scanner read a card or tile.

    Attributes:
        value: The piece in raw notation as the device sent it; the orchestrator parses it
            against the game's deck.
        position: Where it was read, for position scanners; ``None`` otherwise.
        device_seq: The device's sequence number of the frame.
        at: ``time.monotonic()`` when its bytes arrived.
    """

    value: str
    position: str | None
    device_seq: int
    at: float


@dataclass(frozen=True, slots=True)
class Misread:
    """A read that failed, or may have been lost. The slot keeps waiting.

    Attributes:
        cause: ``"device"`` (the scanner reported a misread), ``"crc"`` (a frame failed its
            CRC), ``"malformed"`` (a frame with a good CRC that cannot be used) or ``"gap"``
            (a sequence gap: a frame was lost, which may have been a card).
        detail: What exactly, for the log and the dealer display.
        device_seq: The sequence number of the device frame concerned, when it is trusted.
        at: ``time.monotonic()`` when the bytes arrived.
    """

    cause: MisreadCauseName
    detail: str
    device_seq: int | None
    at: float


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    """The device reported its state (``"boot"``, ``"ready"``, ``"empty"``, ``"error"``...).

    Attributes:
        state: Machine word for the state.
        detail: Free text from the device.
        at: ``time.monotonic()`` when its bytes arrived.
        device: The device it concerns when a source reads several (a multi-reader table:
            the reader's URL); ``None``: the source's own device.
    """

    state: str
    detail: str
    at: float
    device: str | None = None


@dataclass(frozen=True, slots=True)
class CardRemoved:
    """A card that had been placed (latched) left its reader or antenna.

    Only a source built on the presence latch (``drivers/presence.py``) gives these: the card
    was absent for longer than the latch's removal time (a shorter drop is no removal). A
    source that is not latched never does.

    Attributes:
        value: The piece in raw notation, as in :class:`CardRead`.
        position: Where it had been placed, as in :class:`CardRead`.
        at: ``time.monotonic()`` when the latch decided (the absence's start plus the
            removal time).
    """

    value: str
    position: str | None
    at: float


Read = CardRead | Misread | DeviceStatus | CardRemoved
"""Everything :meth:`CardSource.next_read` returns."""


class DriverSettings(BaseModel):
    """Timeouts and defaults of a card-source driver. Every await on a device is bounded.

    Attributes:
        open_timeout: Seconds to open the port or connect.
        write_timeout: Seconds for one frame to leave (drain), and for a clean close.
        read_timeout: How often (seconds) a waiting ``next_read`` wakes up to check that the
            device is still alive.
        heartbeat_timeout: Seconds without a heartbeat after which ``next_read`` raises
            :class:`~drivers.errors.HeartbeatLost`; ``None`` disables the check.
        baud: Baud rate when the URL does not give one.
        usb_poll_timeout: Seconds one blocking bulk IN read may take in its worker thread
            (an empty poll just loops); also bounds how long a close waits for that thread.
        backoff_min: The supervisor's first delay (seconds) before reopening a lost device.
        backoff_max: The cap of the supervisor's exponential backoff (seconds).
        backoff_jitter: Share of each delay drawn at random (0: none; 0.5: the delay is
            uniformly drawn from 50-100 % of its nominal value).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    open_timeout: float = Field(default=5.0, gt=0)
    write_timeout: float = Field(default=2.0, gt=0)
    read_timeout: float = Field(default=1.0, gt=0)
    heartbeat_timeout: float | None = Field(default=5.0, gt=0)
    baud: int = Field(default=115200, gt=0)
    usb_poll_timeout: float = Field(default=0.1, gt=0, le=5)
    backoff_min: float = Field(default=0.2, gt=0)
    backoff_max: float = Field(default=5.0, gt=0)
    backoff_jitter: float = Field(default=0.5, ge=0, le=1)

    @model_validator(mode="after")
    def _check_backoff(self) -> DriverSettings:
        if self.backoff_max < self.backoff_min:
            raise ValueError("backoff_max must not be below backoff_min")
        return self


@runtime_checkable
class CardSource(Protocol):
    """A scanner as the orchestrator sees it."""

    @property
    def url(self) -> str:
        """The URL the source was opened from."""
        ...

    @property
    def last_heartbeat_at(self) -> float | None:
        """``time.monotonic()`` of the last heartbeat, ``None`` before the first."""
        ...

    async def open(self) -> None:
        """Open the port (bounded by ``open_timeout``).

        Raises:
            TransportError: The port cannot be opened or is already open.
            DeviceTimeout: Opening took longer than ``open_timeout``.
        """
        ...

    async def close(self) -> None:
        """Close the port; the source can be opened again afterwards. Never raises."""
        ...

    async def next_read(self) -> Read:
        """Wait for the next read (a corrupt frame comes out as a :class:`Misread`).

        Raises:
            ConnectionLost: The device went away.
            HeartbeatLost: The device stopped sending heartbeats.
            TransportError: The source is not open.
        """
        ...

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Tell the device the table waits for a card for this slot."""
        ...

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask the dealer to read the same card again."""
        ...

    async def reject(self, slot_name: str, reason: str) -> None:
        """Tell the dealer the card is refused and must be taken away."""
        ...

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """Set the device's LED."""
        ...

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """Sound the device's beeper."""
        ...

    async def reset(self) -> None:
        """Ask the device to restart (it answers with a ``boot`` status)."""
        ...


@dataclass(frozen=True, slots=True)
class PortSpec:
    """What a card-source URL resolves to.

    Attributes:
        kind: ``"serial"`` or ``"socket"``.
        port_url: The URL or path handed to pyserial.
        device: The device path or ``host:port`` (for logs and errors).
        baud: The baud rate (ignored by sockets).
    """

    kind: Literal["serial", "socket"]
    port_url: str
    device: str
    baud: int


@dataclass(frozen=True, slots=True)
class UsbSpec:
    """What a ``usb://VID:PID[?serial=SN]`` URL resolves to.

    Attributes:
        vendor_id: USB idVendor.
        product_id: USB idProduct.
        serial: The device's serial-number string to match, or ``None`` for the first one.
        device: ``"vvvv:pppp"`` (plus ``"/SN"``), for logs and errors.
    """

    vendor_id: int
    product_id: int
    serial: str | None
    device: str
    kind: Literal["usb"] = "usb"


@dataclass(frozen=True, slots=True)
class ProfileSpec:
    """What a ``profile+serial://`` URL resolves to.

    Attributes:
        port_url: The path handed to pyserial.
        device: The device path (for logs and errors).
        baud: The baud rate (``None``: the profile's, else the driver settings').
        profile: The profile's shipped name or file path.
        codes: A code table file that replaces the profile's (an enrolled deck), or ``None``.
    """

    port_url: str
    device: str
    baud: int | None
    profile: str
    kind: Literal["profile+serial"] = "profile+serial"
    codes: str | None = None


@dataclass(frozen=True, slots=True)
class MemorySpec:
    """What a ``memory://NAME`` URL resolves to.

    Attributes:
        name: The name a device serves.
        device: ``"memory:NAME"``, for logs and errors.
    """

    name: str
    device: str
    kind: Literal["memory"] = "memory"


def parse_memory_url(url: str, netloc: str, path: str, query: str) -> MemorySpec:
    """Read ``memory://NAME`` (a name of letters, digits, ``-``, ``_`` and ``.``).

    Raises:
        UnsupportedUrl: No name, a path or options.
    """
    if not netloc or path not in ("", "/") or query:
        raise UnsupportedUrl("a memory URL is memory://NAME, without path or options", url=url)
    if not all(ch.isalnum() or ch in "-_." for ch in netloc):
        raise UnsupportedUrl("a memory URL's name takes letters, digits, - _ and .", url=url)
    return MemorySpec(netloc, f"memory:{netloc}")


def _options(url: str, query: str, kind: str, known: str) -> dict[str, list[str]]:
    """The URL's query options; refuses any not in ``known`` (comma-separated)."""
    options = parse_qs(query, keep_blank_values=True, strict_parsing=False)
    unknown = sorted(set(options) - set(known.split(",")))
    if unknown:
        raise UnsupportedUrl(
            f"unknown option in a {kind} URL (only {known} is known)",
            url=url,
            detail=", ".join(unknown),
        )
    return options


def _parse_serial(url: str, path: str, netloc: str, query: str, default_baud: int) -> PortSpec:
    if netloc:
        raise UnsupportedUrl("a serial URL has an empty host: serial:///dev/ttyUSB0", url=url)
    if not path.startswith("/") or path == "/":
        raise UnsupportedUrl("a serial URL needs an absolute device path", url=url)
    options = _options(url, query, "serial", "baud")
    baud = default_baud
    if "baud" in options:
        text = options["baud"][-1]
        if not text.isdigit() or int(text) <= 0:
            raise UnsupportedUrl("baud must be a positive integer", url=url, detail=text)
        baud = int(text)
    return PortSpec("serial", path, path, baud)


def _parse_socket(url: str, parts: SplitResult, default_baud: int) -> PortSpec:
    try:
        port = parts.port
    except ValueError as exc:
        raise UnsupportedUrl("the port of a socket URL is not a number", url=url) from exc
    if not parts.hostname or port is None:
        raise UnsupportedUrl("a socket URL needs a host and a port: socket://host:port", url=url)
    if parts.path not in ("", "/") or parts.query:
        raise UnsupportedUrl("a socket URL takes no path or options", url=url)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return PortSpec("socket", f"socket://{host}:{port}", f"{host}:{port}", default_baud)


def _parse_usb(url: str, netloc: str, path: str, query: str) -> UsbSpec:
    ids = netloc.split(":")
    if len(ids) != 2 or not all(
        1 <= len(part) <= 4 and all(char in "0123456789abcdefABCDEF" for char in part)
        for part in ids
    ):
        raise UnsupportedUrl(
            "a usb URL names the device by hexadecimal VID:PID: usb://1209:7ab1",
            url=url,
            detail=netloc or "no VID:PID",
        )
    if path not in ("", "/"):
        raise UnsupportedUrl("a usb URL takes no path", url=url, detail=path)
    options = _options(url, query, "usb", "serial")
    serial = options["serial"][-1] if "serial" in options else None
    if serial == "":
        raise UnsupportedUrl("the serial option of a usb URL is empty", url=url)
    vendor, product = int(ids[0], 16), int(ids[1], 16)
    device = f"{vendor:04x}:{product:04x}" + (f"/{serial}" if serial else "")
    return UsbSpec(vendor, product, serial, device)


def _parse_profile(url: str, path: str, netloc: str, query: str) -> ProfileSpec:
    if netloc or not path.startswith("/") or path == "/":
        raise UnsupportedUrl(
            "a profile URL names a device path: profile+serial:///dev/ttyUSB0?profile=NAME",
            url=url,
        )
    options = _options(url, query, "profile+serial", "profile,baud,codes")
    profile = options.get("profile", [""])[-1]
    if not profile:
        raise UnsupportedUrl("a profile URL needs ?profile=NAME (or a .toml path)", url=url)
    baud: int | None = None
    if "baud" in options:
        text = options["baud"][-1]
        if not text.isdigit() or int(text) <= 0:
            raise UnsupportedUrl("baud must be a positive integer", url=url, detail=text)
        baud = int(text)
    codes = options["codes"][-1] if "codes" in options else None
    if codes == "":
        raise UnsupportedUrl("the codes option of a profile URL is empty", url=url)
    return ProfileSpec(path, path, baud, profile, codes=codes)


SCHEME_PARSERS: dict[
    str, Callable[[str, str], MqttReaderSpec | JsonLinesSpec | PepperSpec | PcscSpec]
] = {
    **dict.fromkeys(JSON_READER_SCHEMES, parse_json_reader_url),
    **dict.fromkeys(PEPPER_SCHEMES, parse_pepper_url),
    **dict.fromkeys(PCSC_SCHEMES, parse_pcsc_url),
}
"""URL kinds read by their driver family's own parser: ``scheme -> parser(url, scheme)``."""


def parse_url(
    url: str, default_baud: int = 115200
) -> (
    PortSpec
    | UsbSpec
    | ProfileSpec
    | HidSpec
    | MemorySpec
    | MqttReaderSpec
    | JsonLinesSpec
    | PepperSpec
    | PcscSpec
):
    """Resolve a card-source URL.

    Raises:
        UnsupportedUrl: Unknown scheme, missing path/host/port, or unknown option.
    """
    if url.startswith("/"):
        return PortSpec("serial", url, url, default_baud)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "serial":
        return _parse_serial(url, parts.path, parts.netloc, parts.query, default_baud)
    if scheme == "socket":
        return _parse_socket(url, parts, default_baud)
    if scheme == "usb":
        return _parse_usb(url, parts.netloc, parts.path, parts.query)
    if scheme == "profile+serial":
        return _parse_profile(url, parts.path, parts.netloc, parts.query)
    if scheme == "memory":
        return parse_memory_url(url, parts.netloc, parts.path, parts.query)
    for hid in HID_SCHEMES:
        if scheme == hid:
            return parse_hid_url(url, hid, parts.netloc, parts.path, parts.query)
    by_scheme = SCHEME_PARSERS.get(scheme)
    if by_scheme is not None:
        return by_scheme(url, scheme)
    raise UnsupportedUrl(
        "unknown card-source URL scheme"
        " (serial://, socket://, usb://, profile+serial://, hidpos://, hidkbd://, memory://,"
        " mqtt-reader://, jsonl+serial://, pepper://, pepper+serial://, pcsc:// or a /dev path)",
        url=url,
        detail=scheme or "no scheme",
    )


BACKENDS: dict[str, tuple[str, str]] = {
    "serial": ("drivers.serial_source", "SerialCardSource"),
    "socket": ("drivers.serial_source", "SerialCardSource"),
    "usb": ("drivers.usb_source", "UsbCardSource"),
    "profile+serial": ("drivers.profile_source", "ProfileCardSource"),
    "hidpos": ("drivers.hid_source", "HidCardSource"),
    "hidkbd": ("drivers.hid_source", "HidCardSource"),
    "memory": ("drivers.memory", "MemoryCardSource"),
    "mqtt-reader": ("drivers.mqtt_reader", "MqttReaderSource"),
    "jsonl+serial": ("drivers.jsonl_source", "JsonLinesCardSource"),
    "pepper": ("drivers.pepper_source", "PepperCardSource"),
    "pepper+serial": ("drivers.pepper_source", "PepperCardSource"),
    "pcsc": ("drivers.pcsc_source", "PcscCardSource"),
}
"""The driver of each URL kind: ``(module, class)``, imported only when a URL of that kind is
opened (so this module does not import the drivers that import it, and ``tablectl --help``
stays fast). The class is called as ``cls(url, spec, settings)``, and for ``usb`` also with
``backend=`` (and so do ``hidpos`` and ``hidkbd``)."""


def open_card_source(
    url: str, settings: DriverSettings | None = None, *, usb_backend: IBackend | None = None
) -> CardSource:
    """Build the card source for a URL (not opened yet: call ``await source.open()``).

    Args:
        url: ``serial://``, ``socket://``, ``usb://`` or a ``/dev`` path.
        settings: Timeouts (defaults when ``None``).
        usb_backend: The pyusb backend for ``usb://`` URLs (``None``: pyusb's default
            libusb backend). Tests pass :class:`simulators.usb.SimulatedUsbBackend`.

    Raises:
        UnsupportedUrl: The URL names no driver we have.
    """
    effective = settings if settings is not None else DriverSettings()
    spec = parse_url(url, effective.baud)
    module_name, class_name = BACKENDS[spec.kind]
    backend_class = getattr(importlib.import_module(module_name), class_name)
    takes_backend = spec.kind in ("usb", *HID_SCHEMES)
    options: dict[str, object] = {"backend": usb_backend} if takes_backend else {}
    source: CardSource = backend_class(url, spec, effective, **options)
    return source
