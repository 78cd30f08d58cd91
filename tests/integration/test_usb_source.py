"""The USB driver through real pyusb code paths, on the simulated backend (a scanner that can
be unplugged), with the scanner simulator behind its bulk endpoints."""

from __future__ import annotations

import asyncio

import pytest
import usb.core
import usb.util

from drivers.errors import ConnectionLost, TransportError, UnsupportedUrl
from drivers.source import (
    CardRead,
    DeviceStatus,
    DriverSettings,
    UsbSpec,
    open_card_source,
    parse_url,
)
from drivers.usb_source import UsbCardSource, find_endpoints
from simulators.scanner import ScannerSimulator
from simulators.usb import EP_IN, EP_OUT, PRODUCT, PRODUCT_ID, VENDOR_ID, SimulatedUsbBackend

SETTINGS = DriverSettings(read_timeout=0.05, heartbeat_timeout=2.0, usb_poll_timeout=0.02)
URL = f"usb://{VENDOR_ID:04x}:{PRODUCT_ID:04x}"


def fast_sim(**kwargs: object) -> ScannerSimulator:
    options: dict[str, object] = {"deal_delay": 0.0, "ack_timeout": 0.05}
    options["heartbeat_interval"] = 0.05
    options.update(kwargs)
    return ScannerSimulator(**options)  # type: ignore[arg-type]


def test_usb_urls() -> None:
    spec = parse_url("usb://1209:7AB1?serial=SN-9")
    assert spec == UsbSpec(0x1209, 0x7AB1, "SN-9", "1209:7ab1/SN-9")
    assert parse_url("usb://1:2") == UsbSpec(1, 2, None, "0001:0002")
    with pytest.raises(UnsupportedUrl, match="hexadecimal VID:PID") as info:
        parse_url("usb://scanner")
    assert info.value.url == "usb://scanner"


def test_pyusb_sees_the_simulated_scanner() -> None:
    backend = SimulatedUsbBackend(serial="ABC123")
    device = usb.core.find(idVendor=VENDOR_ID, idProduct=PRODUCT_ID, backend=backend)
    assert device is not None
    assert usb.util.get_string(device, device.iProduct) == PRODUCT
    assert usb.util.get_string(device, device.iSerialNumber) == "ABC123"
    device.set_configuration()
    number, ep_in, ep_out = find_endpoints(device)
    assert (number, ep_in.bEndpointAddress, ep_out.bEndpointAddress) == (0, EP_IN, EP_OUT)
    backend.unplug()
    assert usb.core.find(idVendor=VENDOR_ID, backend=backend) is None
    backend.replug()
    assert usb.core.find(idVendor=VENDOR_ID, backend=backend) is not None


async def test_deal_over_usb_with_serial_match() -> None:
    sim = fast_sim(cards=["As", "Kd"], positions=True)
    async with asyncio.timeout(10), sim.serve_usb(SimulatedUsbBackend(serial="T-1")) as backend:
        source = open_card_source(f"{URL}?serial=T-1", SETTINGS, usb_backend=backend)
        assert isinstance(source, UsbCardSource)
        await source.open()
        try:
            reads = []
            for slot, name in enumerate(["A1", "B1"]):
                await source.expect(1, slot, name)
                while not isinstance(read := await source.next_read(), CardRead):
                    assert isinstance(read, DeviceStatus)
                reads.append((read.value, read.position))
            assert reads == [("As", "A1"), ("Kd", "B1")]
            assert source.stats.acks_sent >= 2
        finally:
            await source.close()
        await asyncio.sleep(0.1)
        assert [type(f).__name__ for f in sim.host_commands()] == ["ExpectFrame"] * 2


async def test_wrong_serial_and_absent_device_are_clear_errors() -> None:
    backend = SimulatedUsbBackend(serial="REAL")
    source = open_card_source(f"{URL}?serial=OTHER", SETTINGS, usb_backend=backend)
    with pytest.raises(TransportError, match="no such USB device") as info:
        await source.open()
    assert info.value.url == f"{URL}?serial=OTHER"
    assert info.value.device == "1209:7ab1/OTHER"
    backend.unplug()
    with pytest.raises(TransportError, match="no such USB device"):
        await open_card_source(URL, SETTINGS, usb_backend=backend).open()


async def test_second_claim_is_refused() -> None:
    backend = SimulatedUsbBackend()
    first = open_card_source(URL, SETTINGS, usb_backend=backend)
    await first.open()
    try:
        with pytest.raises(TransportError, match="cannot claim") as info:
            await open_card_source(URL, SETTINGS, usb_backend=backend).open()
        assert "Resource busy" in str(info.value.detail)
    finally:
        await first.close()
    again = open_card_source(URL, SETTINGS, usb_backend=backend)
    await again.open()  # released on close
    await again.close()


async def test_unplug_is_connection_lost_and_commands_fail() -> None:
    sim = fast_sim(cards=["As"])
    async with asyncio.timeout(10), sim.serve_usb() as backend:
        source = open_card_source(URL, SETTINGS, usb_backend=backend)
        await source.open()
        try:
            assert isinstance(await source.next_read(), DeviceStatus)  # boot
            backend.unplug()
            with pytest.raises(ConnectionLost, match="unplugged") as info:
                await source.next_read()
            assert "errno=19" in str(info.value.detail)
            with pytest.raises(TransportError):
                await source.expect(1, 0, "A1")
        finally:
            await source.close()
        backend.replug()
        await source.open()  # the same source object opens the replugged device
        try:
            await source.expect(1, 0, "A1")
            while not isinstance(read := await source.next_read(), CardRead):
                pass
            assert read.value == "As"
        finally:
            await source.close()


async def test_no_libusb_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a backend argument pyusb looks for libusb; if there is none, say so.

    This machine has libusb (Chromium's packages bring it), so its absence is what cannot
    exist here: each of pyusb's backend loaders is made to find no library, and the rest of
    pyusb's real lookup (``usb.core.find`` raising ``NoBackendError``) runs as it would.
    """
    import usb.backend.libusb0
    import usb.backend.libusb1
    import usb.backend.openusb

    for module in (usb.backend.libusb1, usb.backend.openusb, usb.backend.libusb0):
        monkeypatch.setattr(module, "get_backend", lambda *args, **kwargs: None)
    with pytest.raises(TransportError, match="no libusb backend"):
        await open_card_source(URL, SETTINGS).open()
