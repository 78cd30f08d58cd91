"""A round run to the end with a dead reader: the pit boss enters each card (issue 24, item 4).

A real Teen Patti table (in process, ``run_table``) on the scanner simulator's pty, a real
Mosquitto with the committed ACL. The scanner's cable is pulled as the 4th card is dealt and
stays out for the whole test (the reader is dead); the round halts. The pit boss then enters
the three cards the round waits for with the real CLI (``tablectl pit enter-card`` as a
subprocess, the ``pitboss`` credential): each is checked like a read card, journalled with who
and why, published as ``source: manual`` (who and why on ``secure/events`` only), and the
round is settled with exactly the cards entered. Wrong entries (a card already dealt, a card
not in the deck, another slot than the one waiting, another round, no operator) are refused
with the reason and change nothing.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simulators.scanner import CardFault, FaultPlan
from simulators.table import Simulation
from tests.integration._live_helpers import TABLE, acl_broker, live_table
from tests.integration._secure_broker import SecureBroker
from tests.integration.test_pit_halt import pit
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto

pytestmark = [
    pytest.mark.hil,
    pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING),
]

GAME = "teen-patti-20-20"
ROUND_1 = ["As", "Kd", "Ah", "Kc", "Ad", "Kh"]
SLOTS = ["A1", "B1", "A2", "B2", "A3", "B3"]
DRIVER = {"backoff_min": 0.05, "backoff_max": 0.25}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SecureBroker]:
    with acl_broker(tmp_path / "broker") as running:
        yield running


def _entry(card: str, **extra: object) -> dict[str, object]:
    return {
        "command_id": f"enter-{card}-{len(extra)}-{sorted(extra)}",
        "card": card,
        "reason": "reader dead",
        "operator": "alice",
        **extra,
    }


async def _tablectl(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode() + err.decode()


async def _recall(journal: Path, round_id: str) -> dict[str, Any]:
    code, out = await _tablectl("recall", round_id, "--journal", str(journal), "--json")
    assert code == 0, out
    document = json.loads(out)
    assert isinstance(document, dict)
    return document


async def test_a_round_runs_to_the_end_with_a_dead_reader(
    broker: SecureBroker, tmp_path: Path
) -> None:
    faults = FaultPlan(script=(CardFault(at=3, kind="unplug", seconds=120.0),))
    sim = Simulation(cards=tuple(ROUND_1), deal_delay=0.0, faults=faults)
    journal = tmp_path / "j.sqlite"
    async with live_table(
        broker,
        GAME,
        sim,
        journal,
        users=("betting", "stream", "pitboss"),
        round_settings={"device_halt_seconds": 0.5},
        driver=DRIVER,
    ) as live:
        betting = live["betting"]
        pitboss = live["pitboss"]
        at, halted = await betting.wait_event("round_halted", seconds=20)
        round_id = halted.body["round"]

        # Refused, each with its reason, nothing journalled as a card.
        dealt = await pitboss.command("pit/enter-card", _entry("As"))
        assert not dealt["accepted"] and "As" in dealt["reason"], dealt
        assert "dealt" in dealt["reason"], dealt
        unknown = await pitboss.command("pit/enter-card", _entry("Zq"))
        assert not unknown["accepted"], unknown
        assert "not a card of this game's deck" in unknown["reason"], unknown
        other = await pitboss.command("pit/enter-card", _entry("Kc", slot="A3"))
        assert not other["accepted"], other
        assert "waits for a card for B2, not A3" in other["reason"], other
        nameless = await pitboss.command(
            "pit/enter-card", {"command_id": "enter-nameless", "card": "Kc", "reason": "x"}
        )
        assert not nameless["accepted"] and "operator" in nameless["reason"], nameless
        wrong_round = await pitboss.command(
            "pit/enter-card", _entry("Kc", round=f"{TABLE}-00000000-000099")
        )
        assert not wrong_round["accepted"] and "not the current round" in wrong_round["reason"]
        assert len(betting.events("card_dealt")) == 3

        # The pit boss enters the three cards the round waits for, with the CLI.
        for slot, card in zip(SLOTS[3:], ROUND_1[3:], strict=True):
            code, output = await pit(
                broker,
                "enter-card",
                "--card",
                card,
                "--slot",
                slot,
                "--round",
                round_id,
                "--operator",
                "alice",
                "--reason",
                "reader dead",
            )
            assert code == 0, output
            assert "ACCEPTED enter-card" in output, output
        _, result = await betting.wait_event("round_result", after=at, seconds=15)
        await live.finished()

    assert result.data["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}
    cards = betting.events("card_dealt")
    assert [m.data["card"] for m in cards] == ROUND_1, "every card once, in order"
    assert [m.data.get("source") for m in cards] == [None] * 3 + ["manual"] * 3
    for message in cards:
        assert "operator" not in message.data and "reason" not in message.data, message.data
    secure = [m for m in live["stream"].on("secure/events") if m.kind == "card_dealt"]
    assert [(m.data["card"], m.data["operator"], m.data["reason"]) for m in secure] == [
        (card, "alice", "reader dead") for card in ROUND_1[3:]
    ]

    record = await _recall(journal, round_id)
    manual = [card for card in record["cards"] if card.get("source") == "manual"]
    assert [(c["slot"], c["card"], c["operator"], c["reason"]) for c in manual] == [
        (slot, card, "alice", "reader dead")
        for slot, card in zip(SLOTS[3:], ROUND_1[3:], strict=True)
    ]
    assert record["status"] == "settled"
    code, text = await _tablectl("recall", round_id, "--journal", str(journal))
    assert code == 0, text
    assert "B2   hand B   Kc   up" in text and "MANUAL by alice: reader dead" in text, text
    # The result re-evaluated from the journalled cards, the manual ones included.
    code, verdict = await _tablectl("journal", "verify", "--journal", str(journal))
    assert code == 0, verdict


async def test_no_card_is_entered_while_no_slot_waits(broker: SecureBroker, tmp_path: Path) -> None:
    """During the betting window no slot is cued: an entry is refused and changes nothing."""
    sim = Simulation(cards=tuple(ROUND_1), deal_delay=0.0)
    async with live_table(
        broker,
        GAME,
        sim,
        tmp_path / "j.sqlite",
        users=("betting", "pitboss"),
        round_settings={"betting_seconds": 30.0},
        driver=DRIVER,
    ) as live:
        _, opened = await live["betting"].wait_event("round_opened")
        early = await live["pitboss"].command("pit/enter-card", _entry("As"))
        assert not early["accepted"], early
        assert early["reason"] == (
            f"round {opened.body['round']} is not waiting for a card (no slot is cued)"
        )
        assert not live["betting"].events("card_dealt")
