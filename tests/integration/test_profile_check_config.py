"""``check-config`` and the table config with a device profile (``profile+serial://``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.checkconfig import check_config, check_device
from drivers.source import DriverSettings
from tests.integration.test_check_config import write_config


@pytest.fixture
def pty_path() -> Iterator[str]:
    controller_end, device_end = os.openpty()
    yield os.ttyname(device_end)
    os.close(controller_end)
    os.close(device_end)


def test_a_malformed_profile_stops_the_config_naming_file_and_field(tmp_path: Path) -> None:
    shipped = Path(__file__).parents[2] / "drivers" / "profiles" / "line-shoe.toml"
    broken = tmp_path / "my-shoe.toml"
    broken.write_text(shipped.read_text().replace('checksum = "xor8"', 'checksum = "xor"'))
    config = write_config(
        tmp_path,
        device=f"profile+serial:///dev/ttyUSB0?profile={broken}",
        brokers=["mqtt://127.0.0.1:1883"],
    )
    result, settings = check_config(config)
    assert result.verdict == "FAIL" and settings is None
    assert str(broken) in result.detail
    assert "field='checksum'" in result.detail
    assert "device.url" in result.detail


def test_unknown_shipped_profile_is_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        device="profile+serial:///dev/ttyUSB0?profile=no-such-reader",
        brokers=["mqtt://127.0.0.1:1883"],
    )
    result, _ = check_config(config)
    assert result.verdict == "FAIL"
    assert "no shipped device profile" in result.detail and "barcode-crlf" in result.detail


async def test_device_check_loads_the_profile_and_opens_the_port(pty_path: str) -> None:
    url = f"profile+serial://{pty_path}?profile=line-shoe"
    result = await check_device(url, DriverSettings(), 5.0)
    assert result.verdict == "OK", result.detail
    assert "profile line-shoe" in result.detail and "53 codes" in result.detail
    missing = await check_device(
        "profile+serial:///dev/no-such-tty?profile=line-shoe", DriverSettings(), 5.0
    )
    assert missing.verdict == "FAIL" and "does not exist" in missing.detail


def _multi_config(tmp_path: Path, readers: list[tuple[str, str, str]]) -> Path:
    lines = ['table_id = "rf-01"', 'game = "teen-patti-20-20"', "[journal]",
             f'path = "{tmp_path / "j.sqlite"}"']  # fmt: skip
    for name, url, positions in readers:
        lines += ["[[devices]]", f'name = "{name}"', f'url = "{url}"', f"positions = {positions}"]
    path = tmp_path / "multi.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_check_config_checks_every_reader_of_a_multi_reader_table(
    tmp_path: Path, pty_path: str
) -> None:
    from controller.checkconfig import run_checks

    config = _multi_config(
        tmp_path,
        [
            ("seat-A", f"profile+serial://{pty_path}?profile=rfid-ntag", '["A"]'),
            ("seat-B", "profile+serial:///dev/no-such-tty?profile=rfid-ntag", '["B"]'),
        ],
    )
    checks = {check.name: check for check in await run_checks(config, timeout=2.0)}
    assert checks["config"].verdict == "OK"
    assert checks["device[0] (seat-A)"].verdict == "OK"
    assert "profile rfid-ntag" in checks["device[0] (seat-A)"].detail
    assert checks["device[1] (seat-B)"].verdict == "FAIL"
    assert "does not exist" in checks["device[1] (seat-B)"].detail


def test_check_config_refuses_two_readers_on_one_position(tmp_path: Path) -> None:
    config = _multi_config(
        tmp_path,
        [
            ("seat-A", "profile+serial:///dev/ttyACM0?profile=rfid-ntag", '["A", "B1"]'),
            ("seat-B", "profile+serial:///dev/ttyACM1?profile=rfid-ntag", '["B"]'),
        ],
    )
    result, settings = check_config(config)
    assert result.verdict == "FAIL" and settings is None
    assert str(config) in result.detail
    assert "devices[1] (seat-B).positions: 'B' claims slot B1, already read by devices[0]" in (
        result.detail
    )
