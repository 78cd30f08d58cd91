"""A private pcscd with virtual readers for the PC/SC tests (``simulators/pcscd.py``).

``pcsc_table()`` starts the real ``pcscd`` (socket-activated on this process's socket path,
a ``vsmartcard-vpcd`` reader whose two slots are the readers ``ACS ACR122U 00 00`` and
``ACS ACR122U 00 01``) and stops it after the block.
Tests that need it are skipped with the reason when pcscd or vpcd is not installed here
(``make test`` installs both), or pyscard is missing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote

import pytest

from simulators.pcscd import PrivatePcscd, pcscd_binary

FIRST = "ACS ACR122U 00 00"
SECOND = "ACS ACR122U 00 01"

needs_pcscd = pytest.mark.skipif(
    pcscd_binary() is None or importlib.util.find_spec("smartcard") is None,
    reason="pcscd, vsmartcard-vpcd or pyscard is not installed (make test installs them)",
)


def pcsc_url(daemon: PrivatePcscd, reader: str, **options: str) -> str:
    """The ``pcsc://`` URL of a reader of ``daemon``."""
    query = "&".join(
        f"{key}={quote(value)}"
        for key, value in {"reader": reader, "pcscd": str(daemon.socket_path), **options}.items()
    )
    return f"pcsc://?{query}"


@asynccontextmanager
async def pcsc_table(name: str = "ACS ACR122U") -> AsyncIterator[PrivatePcscd]:
    """A started private pcscd with this virtual reader's two slots."""
    daemon = PrivatePcscd(name)
    try:
        await daemon.start()
        yield daemon
    finally:
        await daemon.close()
