"""``tablectl devices`` with USB HID barcode scanners: recognised by the VID:PID table shipped
as data, listed with the driver URL of their mode and the profile suggested (pyusb's real
enumeration runs on the simulated backend)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from controller.cli.devices import run
from drivers.discovery import FoundDevice, hid_scanner_table, list_usb_scanners
from drivers.hid import HidSpec
from drivers.profile import ProfileError, load_profile
from drivers.source import parse_url
from simulators.usb import HID_KBD_PRODUCT_ID, HID_POS_PRODUCT_ID, VENDOR_ID, SimulatedUsbBackend


def test_shipped_table_names_real_profiles() -> None:
    table = hid_scanner_table()
    assert {(VENDOR_ID, HID_POS_PRODUCT_ID), (VENDOR_ID, HID_KBD_PRODUCT_ID)} <= set(table)
    for model in table.values():
        assert load_profile(model.profile).table.codes  # loads, code table and all


@pytest.mark.parametrize(
    ("hid", "mode", "words"), [("pos", "hidpos", "HID POS"), ("kbd", "hidkbd", "keyboard mode")]
)
def test_hid_scanner_listed_with_url_and_profile(hid: str, mode: str, words: str) -> None:
    backend = SimulatedUsbBackend(hid=hid, serial="H-7")  # type: ignore[arg-type]
    found, note = list_usb_scanners(backend)
    assert note is None
    assert len(found) == 1
    device = found[0]
    assert device == FoundDevice(
        f"{mode}://{VENDOR_ID:04x}:{backend.product_id:04x}?profile=barcode-crlf&serial=H-7",
        "usb-hid",
        f"{hid_scanner_table()[(VENDOR_ID, backend.product_id)].name} ({words}), serial H-7",
        True,
        "barcode-crlf",
    )
    # The printed URL is one the driver accepts.
    spec = parse_url(device.url)
    assert isinstance(spec, HidSpec) and spec.kind == mode and spec.serial == "H-7"


def test_cli_prints_the_suggested_profile(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(known_only=True, usb_only=True)
    code = run(args, usb_backend=SimulatedUsbBackend(hid="kbd"))
    out = capsys.readouterr().out
    assert code == 0
    assert "hidkbd://1209:7ab3?profile=barcode-crlf&serial=SIM0001" in out
    assert "suggested profile: barcode-crlf" in out


def test_unknown_hid_ids_are_not_listed() -> None:
    backend = SimulatedUsbBackend(hid="pos", product_id=0x0001, product="Some keyboard")
    assert list_usb_scanners(backend) == ([], None)


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ('[[scanner]]\nvid = 1\npid = 2\nname = "x"\nmode = "usb"\nprofile = "barcode-crlf"\n',
         "scanner.0.mode", "pos"),
        ('[[scanner]]\nvid = 1\npid = 2\nname = "x"\nmode = "pos"\nprofile = "nope"\n',
         "scanner.0.profile", "no shipped device profile"),
        ('[[scanner]]\nvid = 1\npid = 2\nname = "x"\nmode = "pos"\nprofile = "barcode-crlf"\n'
         '[[scanner]]\nvid = 1\npid = 2\nname = "y"\nmode = "kbd"\nprofile = "barcode-crlf"\n',
         "scanner.1", "0001:0002 is listed twice"),
    ],
)  # fmt: skip
def test_bad_table_names_file_field_and_reason(
    tmp_path: Path, body: str, field: str, reason: str
) -> None:
    path = tmp_path / "scanners.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ProfileError, match="HID scanner table") as info:
        hid_scanner_table(path)
    assert info.value.context["file"] == str(path)
    assert info.value.context["field"] == field
    assert reason in str(info.value.detail)
