"""The Eccel Pepper C1's URLs: ``pepper://HOST:PORT`` and ``pepper+serial:///dev/...``.

Options (``docs/drivers.md``, "Eccel Pepper C1"):

* ``antennas=1:seat1,2:seat2,8:muck``: the antennas polled (1-8, through the reader's
  multiplexer) and the table position each is bound to (a hand or slot name; ``muck`` for a
  muck antenna); ``antennas=1,2`` polls without positions; without the option the reader has
  one antenna and none is selected;
* ``codes=FILE``: the enrolled deck's code table (tag UID -> card), replacing the profile's;
* ``profile=NAME``: a reader profile (``drivers/profiles/readers``; default ``pepper-c1``);
* ``baud=N`` (serial only): the serial speed, else the profile's;
* ``cues=1``: write the cue, rescan and refusal through the reader's UART passthrough
  (``0C``) to a dealer display wired there (and the simulator's dealer); default ``0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from drivers.errors import UnsupportedUrl

__all__ = ["PEPPER_SCHEMES", "PepperSpec", "parse_pepper_url"]

PEPPER_SCHEMES = ("pepper", "pepper+serial")
_KNOWN = {
    "pepper": "antennas,codes,profile,cues",
    "pepper+serial": "antennas,codes,profile,cues,baud",
}


@dataclass(frozen=True, slots=True)
class PepperSpec:
    """What a Pepper C1 URL resolves to.

    Attributes:
        kind: ``"pepper"`` (TCP) or ``"pepper+serial"``.
        port_url: What pyserial opens (``socket://host:port`` or the device path).
        device: ``host:port`` or the device path (for logs and errors).
        antennas: ``(number, position)`` of each antenna polled, in order; empty: one
            antenna, none selected.
        profile: The reader profile's name or path.
        codes: A code table file replacing the profile's, or ``None``.
        baud: The serial speed (``None``: the profile's).
        cues: Send cues, rescans and refusals through the UART passthrough.
    """

    kind: Literal["pepper", "pepper+serial"]
    port_url: str
    device: str
    antennas: tuple[tuple[int, str | None], ...]
    profile: str = "pepper-c1"
    codes: str | None = None
    baud: int | None = None
    cues: bool = False


def _antennas(url: str, text: str) -> tuple[tuple[int, str | None], ...]:
    out: list[tuple[int, str | None]] = []
    for item in text.split(","):
        number_text, _, position = item.strip().partition(":")
        if not number_text.isdigit() or not 1 <= int(number_text) <= 8:
            raise UnsupportedUrl(
                "an antenna is a number 1-8, optionally with its position: antennas=1:seat1,2",
                url=url,
                detail=item or "empty",
            )
        number = int(number_text)
        if any(number == seen for seen, _ in out):
            raise UnsupportedUrl("an antenna is listed twice", url=url, detail=str(number))
        if position and not all(ch.isalnum() or ch in "-_" for ch in position):
            raise UnsupportedUrl(
                "an antenna's position takes letters, digits, - and _", url=url, detail=position
            )
        out.append((number, position or None))
    return tuple(out)


def _flag(url: str, name: str, text: str) -> bool:
    if text not in ("0", "1"):
        raise UnsupportedUrl(f"{name} is 0 or 1", url=url, detail=text)
    return text == "1"


def _baud(url: str, options: dict[str, list[str]]) -> int | None:
    if "baud" not in options:
        return None
    text = options["baud"][-1]
    if not text.isdigit() or int(text) <= 0:
        raise UnsupportedUrl("baud must be a positive integer", url=url, detail=text)
    return int(text)


def parse_pepper_url(url: str, scheme: str) -> PepperSpec:
    """Read a ``pepper://`` or ``pepper+serial://`` URL.

    Raises:
        UnsupportedUrl: No host and port (TCP) or device path (serial), an unknown option,
            a bad antenna list, or an empty value.
    """
    parts = urlsplit(url)
    options = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(options) - set(_KNOWN[scheme].split(",")))
    if unknown:
        raise UnsupportedUrl(
            f"unknown option in a {scheme} URL (only {_KNOWN[scheme]} is known)",
            url=url,
            detail=", ".join(unknown),
        )
    for name, values in options.items():
        if not values[-1]:
            raise UnsupportedUrl(f"the {name} option of a {scheme} URL is empty", url=url)
    antennas = _antennas(url, options["antennas"][-1]) if "antennas" in options else ()
    profile = options.get("profile", ["pepper-c1"])[-1]
    codes = options["codes"][-1] if "codes" in options else None
    cues = _flag(url, "cues", options.get("cues", ["0"])[-1])
    if scheme == "pepper":
        try:
            port = parts.port
        except ValueError as exc:
            raise UnsupportedUrl("the port of a pepper URL is not a number", url=url) from exc
        if not parts.hostname or port is None or parts.path not in ("", "/"):
            raise UnsupportedUrl("a pepper URL is pepper://HOST:PORT[?options]", url=url)
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return PepperSpec(
            "pepper", f"socket://{host}:{port}", f"{host}:{port}", antennas, profile, codes,
            cues=cues,
        )  # fmt: skip
    if parts.netloc or not parts.path.startswith("/") or parts.path == "/":
        raise UnsupportedUrl(
            "a pepper+serial URL names a device path: pepper+serial:///dev/ttyUSB0", url=url
        )
    baud = _baud(url, options)
    return PepperSpec("pepper+serial", parts.path, parts.path, antennas, profile, codes, baud, cues)
