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
