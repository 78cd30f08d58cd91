"""The PC/SC contactless readers' URL: ``pcsc://?reader=NAME&codes=FILE``.

Options (``docs/drivers.md``, "PC/SC contactless readers"):

* ``reader=NAME`` (required): the reader, by its PC/SC name as ``tablectl devices`` lists it
  (``ACS ACR122U PICC Interface 00 00``), or by the start of one name when only one reader's
  name starts so (``ACS ACR122U``); several readers on one computer are several URLs;
* ``codes=FILE``: the enrolled deck's code table (tag UID -> card), replacing the profile's;
* ``profile=NAME``: a reader profile (``drivers/profiles/readers``; default ``pcsc-uid``);
* ``pcscd=PATH``: the socket of the ``pcscd`` to use (default: the system's,
  ``/run/pcscd/pcscd.comm``); one per process (libpcsclite reads it once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from drivers.errors import UnsupportedUrl

__all__ = ["PCSC_SCHEMES", "PcscSpec", "parse_pcsc_url"]

PCSC_SCHEMES = ("pcsc",)
_KNOWN = "reader,codes,profile,pcscd"


@dataclass(frozen=True, slots=True)
class PcscSpec:
    """What a ``pcsc://`` URL resolves to.

    Attributes:
        reader: The reader's PC/SC name, or the start of exactly one reader's name.
        device: The reader as logs and errors name it (``pcsc:NAME``).
        profile: The reader profile's name or path.
        codes: A code table file replacing the profile's, or ``None``.
        pcscd: The pcscd socket path, ``None``: the system's.
        kind: ``"pcsc"``.
    """

    reader: str
    device: str
    profile: str = "pcsc-uid"
    codes: str | None = None
    pcscd: str | None = None
    kind: Literal["pcsc"] = "pcsc"


def parse_pcsc_url(url: str, scheme: str) -> PcscSpec:
    """Read a ``pcsc://?reader=NAME[&codes=FILE][&profile=NAME][&pcscd=PATH]`` URL.

    Raises:
        UnsupportedUrl: A host or path, an unknown option, an empty value, no reader, a
            reader name that is not printable, or a pcscd socket that is not an absolute path.
    """
    parts = urlsplit(url)
    if parts.netloc or parts.path not in ("", "/"):
        raise UnsupportedUrl(
            "a pcsc URL has no host or path: pcsc://?reader=ACS%20ACR122U&codes=FILE",
            url=url,
            detail=(parts.netloc + parts.path) or None,
        )
    options = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(options) - set(_KNOWN.split(",")))
    if unknown:
        raise UnsupportedUrl(
            f"unknown option in a {scheme} URL (only {_KNOWN} is known)",
            url=url,
            detail=", ".join(unknown),
        )
    for name, values in options.items():
        if not values[-1]:
            raise UnsupportedUrl(f"the {name} option of a {scheme} URL is empty", url=url)
    reader = options.get("reader", [""])[-1]
    if not reader:
        raise UnsupportedUrl(
            "a pcsc URL names its reader: pcsc://?reader=NAME (tablectl devices lists them)",
            url=url,
        )
    if not reader.isprintable() or len(reader) > 200:
        raise UnsupportedUrl(
            "a reader name is at most 200 printable characters", url=url, detail=repr(reader)
        )
    pcscd = options["pcscd"][-1] if "pcscd" in options else None
    if pcscd is not None and not pcscd.startswith("/"):
        raise UnsupportedUrl("pcscd= is the absolute path of a socket", url=url, detail=pcscd)
    return PcscSpec(
        reader=reader,
        device=f"pcsc:{reader}",
        profile=options.get("profile", ["pcsc-uid"])[-1],
        codes=options["codes"][-1] if "codes" in options else None,
        pcscd=pcscd,
    )
