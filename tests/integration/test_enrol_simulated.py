"""``tablectl enrol`` against ``tablectl simulate-scanner --profile NAME --pty`` (issue 24, 6).

Both commands run as processes, as an operator runs them in two terminals: the simulator
prints its pty first, the enrolment reads the whole deck from it through the
``profile+serial://`` driver and writes the code table, which binds each tag to the card the
profile's own table binds it to.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from drivers.profile import load_code_table, load_profile

pytestmark = pytest.mark.hil


async def _command(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.parametrize("profile", ["line-shoe", "rfid-ntag"])
async def test_enrol_reads_a_whole_deck_from_the_simulated_reader(
    profile: str, tmp_path: Path
) -> None:
    simulator = await _command(
        "simulate-scanner", "--profile", profile, "--pty", "--deal-delay", "0"
    )
    assert simulator.stdout is not None
    try:
        async with asyncio.timeout(30):
            path = (await simulator.stdout.readline()).decode().strip()
            device = (await simulator.stdout.readline()).decode().strip()
            hint = (await simulator.stdout.readline()).decode().strip()
        url = f"profile+serial://{path}?profile={profile}"
        assert path.startswith("/"), path
        assert device == f"device: {url}"
        assert hint.startswith("enrol:  tablectl enrol --device") and url in hint
        out = tmp_path / "deck.toml"
        enrol = await _command(
            "enrol", "--device", url, "--deck", "standard", "--out", str(out), "--tag-timeout", "0"
        )
        async with asyncio.timeout(60):
            said, errors = await enrol.communicate()
        assert enrol.returncode == 0, (said + errors).decode()
        assert "[52/52] scan" in said.decode()
    finally:
        if simulator.returncode is None:
            simulator.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            _, tail = await simulator.communicate()
    assert simulator.returncode == 0, tail.decode()
    assert "put 52 card(s) on the reader" in tail.decode()
    table = load_code_table(out)
    codes = load_profile(profile).table.codes
    assert len(table.codes) == 52
    assert all(codes[code] == card for code, card in table.codes.items())


async def test_a_profile_that_does_not_exist_is_named() -> None:
    simulator = await _command("simulate-scanner", "--profile", "no-such-reader", "--pty")
    async with asyncio.timeout(30):
        _, err = await simulator.communicate()
    assert simulator.returncode == 2
    assert "no-such-reader" in err.decode()


async def test_enrol_against_the_framed_simulator_says_how_to_simulate_a_reader(
    tmp_path: Path,
) -> None:
    out = tmp_path / "deck.toml"
    enrol = await _command(
        "enrol", "--device", "serial:///dev/null", "--deck", "standard", "--out", str(out)
    )
    async with asyncio.timeout(30):
        _, err = await enrol.communicate()
    assert enrol.returncode != 0
    assert "tablectl simulate-scanner --profile NAME --pty" in err.decode(), err.decode()
    assert not out.exists()
