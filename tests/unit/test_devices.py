"""``tablectl devices``: what it lists and the URL it prints (USB through the simulated
backend, so pyusb's enumeration and string descriptors really run)."""

from __future__ import annotations

import argparse
import os

import pytest
from serial.tools import list_ports
from serial.tools.list_ports_common import ListPortInfo

from controller.cli.devices import register, run
from drivers.discovery import (
    FoundDevice,
    list_serial_ports,
    list_usb_scanners,
    render,
)
from drivers.source import UsbSpec, parse_url
from simulators.usb import PRODUCT_ID, VENDOR_ID, SimulatedUsbBackend


def test_known_usb_scanner_is_listed_with_its_url() -> None:
    found, note = list_usb_scanners(SimulatedUsbBackend(serial="SN42"))
    assert note is None
    assert found == [
        FoundDevice(
            f"usb://{VENDOR_ID:04x}:{PRODUCT_ID:04x}?serial=SN42",
            "usb",
            "tablectl card scanner, serial SN42",
            True,
        )
    ]
    # The printed URL is one the driver accepts.
    assert parse_url(found[0].url) == UsbSpec(VENDOR_ID, PRODUCT_ID, "SN42", "1209:7ab1/SN42")


def test_unknown_ids_are_recognised_by_product_string_only() -> None:
    ours = SimulatedUsbBackend(vendor_id=0x0483, product_id=0x5740)  # product says tablectl
    assert [d.url for d in list_usb_scanners(ours)[0]] == ["usb://0483:5740?serial=SIM0001"]
    other = SimulatedUsbBackend(vendor_id=0x0483, product_id=0x5740, product="Some keyboard")
    assert list_usb_scanners(other)[0] == []


def test_unplugged_device_is_not_listed() -> None:
    backend = SimulatedUsbBackend()
    backend.unplug()
    assert list_usb_scanners(backend) == ([], None)


@pytest.mark.infra
def test_serial_ports_have_serial_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every port listed has a serial URL; a real pty is added so at least one port is."""
    system = list_ports.comports()
    leader, follower = os.openpty()
    try:
        pty = os.ttyname(follower)
        monkeypatch.setattr(list_ports, "comports", lambda: [*system, ListPortInfo(pty)])
        ports = list_serial_ports()
    finally:
        os.close(leader)
        os.close(follower)
    assert len(ports) == len(system) + 1
    assert f"serial://{pty}?baud=115200" in [port.url for port in ports]
    for port in ports:
        assert port.url.startswith("serial:///") and port.kind == "serial"
        assert parse_url(port.url).kind == "serial"


def test_render_and_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert render([], [], "no libusb") == "no serial port and no USB scanner found\nnote: no libusb"
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    # pcscd is asked in tests/integration/test_pcsc_source.py (a pure test asks no daemon).
    args = parser.parse_args(["devices", "--usb-only", "--no-pcsc"])
    assert run(args, usb_backend=SimulatedUsbBackend()) == 0
    out = capsys.readouterr().out
    assert out.startswith("scanner  usb://1209:7ab1?serial=SIM0001")
    backend = SimulatedUsbBackend()
    backend.unplug()
    assert run(args, usb_backend=backend) == 1
