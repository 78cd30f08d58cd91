"""USB HID barcode scanners (HID POS and keyboard mode) through real pyusb code paths, on the
simulated backend: cards in order, unknown codes refused with the reason, unplug/replug."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from drivers.errors import ConnectionLost, TransportError, UnsupportedUrl
from drivers.hid import (
    HidSpec,
    KeyboardDecoder,
    PosReportDecoder,
    encode_keyboard,
    encode_pos,
)
from drivers.hid_source import HidCardSource
from drivers.profile import load_profile
from drivers.source import CardRead, DriverSettings, Misread, open_card_source, parse_url
from drivers.supervisor import SupervisedCardSource
from simulators.usb import HidScannerSimulator, SimulatedUsbBackend

SETTINGS = DriverSettings(
    read_timeout=0.05, usb_poll_timeout=0.02, backoff_min=0.02, backoff_max=0.2
)
PROFILE = "barcode-crlf"
KINDS: list[Literal["pos", "kbd"]] = ["pos", "kbd"]


def url_of(kind: str, backend: SimulatedUsbBackend) -> str:
    return f"hid{kind}://{backend.vendor_id:04x}:{backend.product_id:04x}?profile={PROFILE}"


def test_hid_urls() -> None:
    spec = parse_url("hidpos://05E0:1200?profile=barcode-crlf&serial=S1")
    assert spec == HidSpec("hidpos", 0x05E0, 0x1200, "S1", "barcode-crlf", "05e0:1200/S1")
    assert parse_url("hidkbd://1:2?profile=x").kind == "hidkbd"
    with pytest.raises(UnsupportedUrl, match=r"needs \?profile=NAME"):
        parse_url("hidpos://05e0:1200")
    with pytest.raises(UnsupportedUrl, match="unknown option") as info:
        parse_url("hidkbd://05e0:1200?profile=x&baud=9600")
    assert info.value.detail == "baud"
    with pytest.raises(UnsupportedUrl, match="hexadecimal VID:PID"):
        parse_url("hidpos://scanner?profile=x")


def test_pos_reports_round_trip_and_split_long_codes() -> None:
    decoder = PosReportDecoder()
    long_code = bytes(range(48, 58)) * 10  # 100 bytes: two reports
    reports = encode_pos(long_code)
    assert len(reports) == 2 and all(len(report) == 64 for report in reports)
    assert decoder.feed(reports[0]) == []
    assert decoder.feed(reports[1]) == [long_code]
    refused = decoder.feed(b"\x01" + bytes(63))
    assert len(refused) == 1 and "report id 01" in str(refused[0])


def test_keyboard_reports_decode_shift_and_held_keys() -> None:
    decoder = KeyboardDecoder()
    out: list[bytes | str] = []
    for report in encode_keyboard("Ab-9_z"):
        out += decoder.feed(report)
    assert out == [b"Ab-9_z"]
    # A held key repeated in the next report is typed once; an unknown key spoils the code.
    held = [bytes([0, 0, 0x04, 0, 0, 0, 0, 0])] * 3 + [bytes(8)]
    assert [item for report in held for item in decoder.feed(report)] == []
    decoder.reset()
    bad = [bytes([0, 0, 0x04, 0, 0, 0, 0, 0]), bytes([0, 0, 0x3A, 0, 0, 0, 0, 0]), bytes(8)]
    bad += encode_keyboard("")
    result = [item for report in bad for item in decoder.feed(report)]
    assert result == ["the scanner typed key usage 0x3a, which is no character"]


@pytest.mark.parametrize("kind", KINDS)
async def test_cards_in_order_and_unknown_code_refused(kind: Literal["pos", "kbd"]) -> None:
    backend = SimulatedUsbBackend(hid=kind)
    cards = ["As", "Kd", "7h"]
    sim = HidScannerSimulator(backend, load_profile(PROFILE), cards, unknown_at=frozenset({1}))
    source = open_card_source(url_of(kind, backend), SETTINGS, usb_backend=backend)
    assert isinstance(source, HidCardSource)
    async with asyncio.timeout(10):
        await source.open()
        try:
            assert source.detached_kernel_driver and backend.detaches == 1
            reads: list[CardRead | Misread] = []
            for slot in range(len(cards)):
                sim.screen("expect", f"S{slot}", slot_index=slot)
                read = await source.next_read()
                assert isinstance(read, CardRead | Misread)
                reads.append(read)
                if isinstance(read, Misread):
                    sim.screen("rescan", f"S{slot}", slot_index=slot)
                    read = await source.next_read()
                    assert isinstance(read, CardRead)
                    reads.append(read)
        finally:
            await source.close()
    assert [r.value if isinstance(r, CardRead) else r.cause for r in reads] == [
        "As", "unknown_code", "Kd", "7h",
    ]  # fmt: skip
    refused = reads[1]
    assert isinstance(refused, Misread) and "ean13-standard" in refused.detail
    assert backend.kernel_driver_active  # the keyboard is given back on close


@pytest.mark.parametrize("kind", KINDS)
async def test_unplug_is_connection_lost_then_replug_reads_again(
    kind: Literal["pos", "kbd"],
) -> None:
    backend = SimulatedUsbBackend(hid=kind)
    sim = HidScannerSimulator(backend, load_profile(PROFILE), ["As", "Kd"])
    source = open_card_source(url_of(kind, backend), SETTINGS, usb_backend=backend)
    async with asyncio.timeout(10):
        await source.open()
        try:
            backend.unplug()
            with pytest.raises(ConnectionLost, match="unplugged") as info:
                await source.next_read()
            assert "errno=19" in str(info.value.detail)
        finally:
            await source.close()
        with pytest.raises(TransportError, match="no such USB HID scanner"):
            await source.open()
        backend.replug()
        await source.open()
        try:
            assert backend.detaches == 2  # the kernel took the replugged device again
            sim.screen("expect", "S0", slot_index=0)
            read = await source.next_read()
            assert isinstance(read, CardRead) and read.value == "As"
        finally:
            await source.close()


async def test_supervisor_recovers_a_replugged_scanner() -> None:
    backend = SimulatedUsbBackend(hid="pos")
    sim = HidScannerSimulator(backend, load_profile(PROFILE), ["As"])
    source = SupervisedCardSource(url_of("pos", backend), SETTINGS, usb_backend=backend)
    async with asyncio.timeout(10):
        await source.open()
        try:
            states = []
            backend.unplug()
            asyncio.get_running_loop().call_later(0.1, backend.replug)
            while "recovered" not in states:
                read = await source.next_read()
                states.append(getattr(read, "state", None))
            sim.screen("expect", "S0", slot_index=0)
            while not isinstance(read := await source.next_read(), CardRead):
                pass
            assert read.value == "As" and source.reconnects == 1
        finally:
            await source.close()


async def test_a_bulk_device_is_not_a_hid_scanner() -> None:
    backend = SimulatedUsbBackend()  # the framed scanner: bulk endpoints, vendor class
    source = open_card_source(url_of("pos", backend), SETTINGS, usb_backend=backend)
    with pytest.raises(TransportError, match="not a HID scanner"):
        await source.open()
