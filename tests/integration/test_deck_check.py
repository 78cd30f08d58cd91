"""``tablectl deck-check`` against a simulated reader, and its report journalled at a table.

The reader is ``tablectl simulate-scanner --profile line-shoe --pty`` (a process, real pty);
the deck put on it lacks the 7h, holds the As twice, a joker, and the Kd, whose tag the
deck's code table (``--codes``) does not know (a tag of another deck). The check, a process
too, names each finding and exits 1: the deck must not go into play. Sent to a running table
(real Mosquitto, the committed ACL, the ``pitboss`` credential), the report is journalled
there (``command_received``, on ``secure/events`` in full) and answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from controller.cards import Deck
from drivers.enrolment import write_code_table
from drivers.profile import CodeTable, load_profile
from simulators.scanner import CardFault, FaultPlan
from simulators.table import Simulation
from tests.integration._live_helpers import TABLE, acl_broker, live_table
from tests.integration._secure_broker import ROLE_PASSWORDS, SecureBroker
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto

pytestmark = pytest.mark.hil

STANDARD = [str(piece) for piece in Deck.standard()]
PUT_DOWN = [card for card in STANDARD if card != "7h"] + ["As", "JK"]


async def _process(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


@asynccontextmanager
async def simulated_reader(cards: list[str]) -> AsyncIterator[str]:
    """``tablectl simulate-scanner --profile line-shoe --pty --cards ...``; yields its URL."""
    simulator = await _process(
        "simulate-scanner",
        "--profile",
        "line-shoe",
        "--pty",
        "--deal-delay",
        "0",
        "--cards",
        " ".join(cards),
    )
    assert simulator.stdout is not None
    try:
        async with asyncio.timeout(30):
            path = (await simulator.stdout.readline()).decode().strip()
        yield f"profile+serial://{path}?profile=line-shoe"
    finally:
        simulator.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            await simulator.communicate()


def other_deck_codes(path: Path) -> Path:
    """The line shoe's code table without the Kd's tag (its Kd is of another deck)."""
    codes = {code: card for code, card in load_profile("line-shoe").table.codes.items()}
    codes = {code: card for code, card in codes.items() if card != "Kd"}
    write_code_table(CodeTable(name="red-07", codes=codes), path)
    return path


async def test_the_deck_check_names_what_is_wrong(tmp_path: Path) -> None:
    codes = other_deck_codes(tmp_path / "red-07.toml")
    async with simulated_reader(PUT_DOWN) as url:
        check = await _process(
            "deck-check", "--device", url, "--codes", str(codes), "--idle", "1", "--json"
        )
        async with asyncio.timeout(60):
            out, err = await check.communicate()
    assert check.returncode == 1, err.decode()
    report = json.loads(out)
    assert report["ok"] is False
    assert report["read"] == 52 and report["expected"] == 52
    assert sorted(report["missing"]) == ["7h", "Kd"]
    assert report["extra"] == ["JK"]
    assert report["duplicated"] == {"As": 2}
    assert report["unknown"] == ["3D"]  # the Kd's tag, as its code: never guessed


async def test_a_clean_deck_may_go_into_play(tmp_path: Path) -> None:
    async with simulated_reader(STANDARD) as url:
        check = await _process("deck-check", "--device", url, "--idle", "1")
        async with asyncio.timeout(60):
            out, err = await check.communicate()
    assert check.returncode == 0, err.decode()
    assert "52 read; the deck may go into play" in out.decode()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SecureBroker]:
    if not have_mosquitto():
        pytest.skip(MOSQUITTO_MISSING)
    with acl_broker(tmp_path / "broker") as running:
        yield running


async def test_the_report_is_journalled_at_the_table(broker: SecureBroker, tmp_path: Path) -> None:
    # A table whose reader is unplugged at the first card: it stays up (halted) meanwhile.
    faults = FaultPlan(script=(CardFault(at=0, kind="unplug", seconds=120.0),))
    sim = Simulation(cards=("As", "Kd"), deal_delay=0.0, faults=faults)
    async with live_table(
        broker,
        "teen-patti-20-20",
        sim,
        tmp_path / "j.sqlite",
        users=("betting", "stream"),
        driver={"backoff_min": 0.05, "backoff_max": 0.25},
    ) as live:
        await live["betting"].wait_event("round_opened")
        async with simulated_reader([*STANDARD[:-1], "JK"]) as url:
            env = {**os.environ, "TABLECTL_PIT_PASSWORD": ROLE_PASSWORDS["pitboss"]}
            check = await _process(
                "deck-check",
                "--device",
                url,
                "--idle",
                "1",
                "--broker",
                f"mqtt://127.0.0.1:{broker.port}",
                "--table-id",
                TABLE,
                "--username",
                "pitboss",
                "--operator",
                "alice",
                env=env,
            )
            async with asyncio.timeout(60):
                out, err = await check.communicate()
        assert check.returncode == 1, (out + err).decode()
        assert "ACCEPTED deck-check" in out.decode(), (out + err).decode()
        _, received = await live["stream"].wait_for(
            lambda m: (
                m.topic.endswith("/secure/events")
                and m.kind == "command_received"
                and m.data.get("name") == "deck-check"
            )
        )
    data = received.data["data"]
    assert data["operator"] == "alice" and data["ok"] is False
    assert data["missing"] == [STANDARD[-1]] and data["extra"] == ["JK"]
    assert data["device"] == url
    public = [m for m in live["betting"].events("command_received") if m.seq == received.seq]
    assert public and "data" not in public[0].data, "the report stays off the public topic"
