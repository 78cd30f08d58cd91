"""USB HID barcode scanners: the URL, and the pure report codecs (no I/O, no clock).

Two kinds of scanner (``docs/drivers.md``, "USB HID scanners"):

* ``hidpos://VID:PID?profile=NAME[&serial=SN]``: a HID POS scanner (usage page 0x8C). Each
  input report on the interrupt IN endpoint is ``report id 0x02, length n, n data bytes,
  padding, flags``: the last byte's bit 0 says "more data follows" (a code longer than one
  report spans several). :class:`PosReportDecoder` joins them into codes.
* ``hidkbd://VID:PID?profile=NAME[&serial=SN]``: a keyboard-mode scanner. Each 8-byte boot
  keyboard report is ``modifiers, reserved, six key usages``; a key is typed when it appears
  in a report (not held over from the previous one), shift (left or right) selects the upper
  character, Enter ends the code. :class:`KeyboardDecoder` turns reports into codes.

A code is then handed, with the profile's terminator, to the profile's
:class:`~drivers.profile.LineDecoder`: the same pattern, code table and refusals as a serial
reader of that profile (an unknown code is a ``Misread("unknown_code")``, never guessed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs

from drivers.errors import UnsupportedUrl

__all__ = [
    "HID_SCHEMES",
    "KEY_USAGES",
    "POS_REPORT_ID",
    "POS_REPORT_SIZE",
    "HidSpec",
    "KeyboardDecoder",
    "PosReportDecoder",
    "encode_keyboard",
    "encode_pos",
    "parse_hid_url",
]

HidKind = Literal["hidpos", "hidkbd"]
HID_SCHEMES: tuple[HidKind, ...] = ("hidpos", "hidkbd")

POS_REPORT_ID = 0x02
"""The report id of a HID POS scanner's decoded-data input report."""
POS_REPORT_SIZE = 64
"""Bytes of one HID POS input report (id, length, up to 61 data bytes, flags)."""
_POS_DATA = POS_REPORT_SIZE - 3
_MORE = 0x01

KEYBOARD_REPORT_SIZE = 8
_SHIFT = 0x02 | 0x20  # left shift, right shift
_ENTER = 0x28


def _key_usages() -> dict[int, tuple[str, str]]:
    """HID usage id (page 0x07) → (character, shifted character), US layout."""
    usages: dict[int, tuple[str, str]] = {}
    for index, letter in enumerate("abcdefghijklmnopqrstuvwxyz"):
        usages[0x04 + index] = (letter, letter.upper())
    for index, (digit, shifted) in enumerate(zip("1234567890", "!@#$%^&*()", strict=True)):
        usages[0x1E + index] = (digit, shifted)
    for usage, pair in {
        0x2C: (" ", " "),
        0x2D: ("-", "_"),
        0x2E: ("=", "+"),
        0x2F: ("[", "{"),
        0x30: ("]", "}"),
        0x33: (";", ":"),
        0x36: (",", "<"),
        0x37: (".", ">"),
        0x38: ("/", "?"),
    }.items():
        usages[usage] = pair
    return usages


KEY_USAGES = _key_usages()
"""The keys a keyboard-mode scanner types (US layout), by HID usage id."""


@dataclass(frozen=True, slots=True)
class HidSpec:
    """What a ``hidpos://`` or ``hidkbd://`` URL resolves to.

    Attributes:
        kind: ``"hidpos"`` or ``"hidkbd"``.
        vendor_id: USB idVendor.
        product_id: USB idProduct.
        serial: The serial-number string to match, or ``None`` for the first device.
        profile: The device profile (shipped name or ``.toml`` path) giving the code table.
        device: ``"vvvv:pppp"`` (plus ``"/SN"``), for logs and errors.
        codes: A code table file replacing the profile's (as ``profile+serial://``'s
            ``codes=``), or ``None``.
    """

    kind: HidKind
    vendor_id: int
    product_id: int
    serial: str | None
    profile: str
    device: str
    codes: str | None = None


def parse_hid_url(url: str, kind: HidKind, netloc: str, path: str, query: str) -> HidSpec:
    """Resolve ``hidpos://VID:PID?profile=NAME[&serial=SN][&codes=FILE]`` (or ``hidkbd://``).

    Raises:
        UnsupportedUrl: No hexadecimal VID:PID, a path, an unknown option, no profile.
    """
    ids = netloc.split(":")
    if len(ids) != 2 or not all(
        1 <= len(part) <= 4 and all(char in "0123456789abcdefABCDEF" for char in part)
        for part in ids
    ):
        raise UnsupportedUrl(
            f"a {kind} URL names the device by hexadecimal VID:PID: {kind}://05e0:1200",
            url=url,
            detail=netloc or "no VID:PID",
        )
    if path not in ("", "/"):
        raise UnsupportedUrl(f"a {kind} URL takes no path", url=url, detail=path)
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"profile", "serial", "codes"})
    if unknown:
        raise UnsupportedUrl(
            f"unknown option in a {kind} URL (only profile, serial, codes are known)",
            url=url,
            detail=", ".join(unknown),
        )
    profile = options.get("profile", [""])[-1]
    if not profile:
        raise UnsupportedUrl(
            f"a {kind} URL needs ?profile=NAME (the code table to read codes with)", url=url
        )
    serial = options["serial"][-1] if "serial" in options else None
    if serial == "":
        raise UnsupportedUrl(f"the serial option of a {kind} URL is empty", url=url)
    codes = options["codes"][-1] if "codes" in options else None
    if codes == "":
        raise UnsupportedUrl(f"the codes option of a {kind} URL is empty", url=url)
    vendor, product = int(ids[0], 16), int(ids[1], 16)
    device = f"{vendor:04x}:{product:04x}" + (f"/{serial}" if serial else "")
    return HidSpec(kind, vendor, product, serial, profile, device, codes)


# ---------------------------------------------------------------------- HID POS


def encode_pos(code: bytes) -> list[bytes]:
    """The input reports a HID POS scanner sends for one code (the simulator's side)."""
    chunks = [code[start : start + _POS_DATA] for start in range(0, len(code), _POS_DATA)]
    reports = []
    for index, chunk in enumerate(chunks or [b""]):
        flags = _MORE if index < len(chunks) - 1 else 0
        body = bytes([POS_REPORT_ID, len(chunk)]) + chunk
        reports.append(body.ljust(POS_REPORT_SIZE - 1, b"\0") + bytes([flags]))
    return reports


class PosReportDecoder:
    """HID POS input reports in, whole codes (bytes) or a refusal reason (str) out."""

    def __init__(self) -> None:
        self._parts = bytearray()

    def reset(self) -> None:
        """Forget a code half received (the device was reopened)."""
        self._parts.clear()

    def feed(self, report: bytes) -> list[bytes | str]:
        """The codes (or refusal reasons) completed by one report."""
        if len(report) < 3 or report[0] != POS_REPORT_ID:
            self._parts.clear()
            head = report[:1].hex() or "empty"
            return [f"not a HID POS data report (report id {head}, {len(report)} bytes)"]
        length = report[1]
        if length > len(report) - 3:
            self._parts.clear()
            return [f"HID POS report says {length} data bytes but carries {len(report) - 3}"]
        self._parts += report[2 : 2 + length]
        if report[-1] & _MORE:
            return []
        code = bytes(self._parts)
        self._parts.clear()
        return [code] if code else []


# ---------------------------------------------------------------------- keyboard mode


def encode_keyboard(text: str) -> list[bytes]:
    """The boot keyboard reports a keyboard-mode scanner sends for ``text`` + Enter."""
    by_char: dict[str, tuple[int, int]] = {}
    for usage, (plain, shifted) in KEY_USAGES.items():
        by_char.setdefault(plain, (usage, 0))
        by_char.setdefault(shifted, (usage, 0x02))
    release = bytes(KEYBOARD_REPORT_SIZE)
    reports = []
    for char in text:
        if char not in by_char:
            raise ValueError(f"a keyboard scanner cannot type {char!r}")
        usage, modifiers = by_char[char]
        reports += [bytes([modifiers, 0, usage, 0, 0, 0, 0, 0]), release]
    reports += [bytes([0, 0, _ENTER, 0, 0, 0, 0, 0]), release]
    return reports


class KeyboardDecoder:
    """Boot keyboard reports in, whole codes (bytes) or a refusal reason (str) out.

    A key counts when it is newly down (a report repeating a held key adds nothing); a key
    the table of :data:`KEY_USAGES` does not have spoils the code (refused at Enter, naming
    the usage), since a character is never guessed.
    """

    def __init__(self) -> None:
        self._held: set[int] = set()
        self._text: list[str] = []
        self._bad: str | None = None

    def reset(self) -> None:
        """Forget a code half typed (the device was reopened)."""
        self._held.clear()
        self._text.clear()
        self._bad = None

    def feed(self, report: bytes) -> list[bytes | str]:
        """The codes (or refusal reasons) completed by one report."""
        if len(report) != KEYBOARD_REPORT_SIZE:
            self.reset()
            return [f"not a boot keyboard report ({len(report)} bytes, not 8)"]
        modifiers = report[0]
        keys = [usage for usage in report[2:] if usage]
        if any(usage in (0x01, 0x02, 0x03) for usage in keys):  # rollover / errors
            return []
        out: list[bytes | str] = []
        for usage in keys:
            if usage in self._held:
                continue
            if usage == _ENTER:
                out.append(self._bad if self._bad is not None else "".join(self._text).encode())
                self._text.clear()
                self._bad = None
            elif usage in KEY_USAGES:
                self._text.append(KEY_USAGES[usage][1 if modifiers & _SHIFT else 0])
            elif self._bad is None:
                self._bad = f"the scanner typed key usage 0x{usage:02x}, which is no character"
        self._held = set(keys)
        return [item for item in out if item != b""]
