"""Hardware in the loop: the scanner's cable is pulled mid-round (issue 5), pit boss commands.

The scanner simulator (real pty, scripted deck) pulls its cable as a card is dealt
(``FaultPlan.unplug_every`` / a scripted ``unplug`` fault: the pty closes and the symlink the
driver opens disappears for ``unplug_seconds``). With ``rounds.device_halt_seconds`` shorter
than the unplug the round must be halted (``round_halted`` + ``pit_alert``), and the pit boss
ends the halt with the real CLI (``tablectl pit resume|void`` run as a subprocess with the
``pitboss`` credential, against a Mosquitto running the committed ACL). A short unplug must
not halt: the round waits and completes.

The controller runs in-process (``run_table``); the test watches with the ``betting``
credential, as the betting system would.

Decisions where the brief is silent:

* The void test pulls the cable once (a scripted ``unplug`` fault at the 4th card, the same
  mechanism as ``unplug_every``), so that the next round is not unplugged too.
* After a void the dealer goes on with the next cards of the script: round 2's cards are the
  script's cards after every card drawn in round 1 (dealt, or refused while halted).
* "The right cards" after a resume are the cards in the order the dealer drew them: the card
  in the dealer's hand when the cable was pulled belongs to the slot that was waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.cards import parse_cards
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from simulators.scanner import CardFault, FaultPlan
from simulators.table import Simulation
from tests.integration._live_helpers import TABLE, Live, Received, acl_broker, live_table
from tests.integration._secure_broker import ROLE_PASSWORDS, SecureBroker
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto
from tests.support.settlement import group

pytestmark = [
    pytest.mark.hil,
    pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING),
]

GAME = "teen-patti-20-20"
ROUND_1 = ["As", "Kd", "Ah", "Kc", "Ad", "Kh"]
ROUND_2 = ["Qs", "Jd", "Qh", "Jc", "Qd", "Jh"]
DRIVER = {"backoff_min": 0.05, "backoff_max": 0.25}
"""Reopen the lost device quickly (the default backoff grows to 5 s)."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SecureBroker]:
    with acl_broker(tmp_path / "broker") as running:
        yield running


async def pit(broker: SecureBroker, *args: str, user: str = "pitboss") -> tuple[int, str]:
    """Run ``tablectl pit ...`` as a subprocess; returns (exit status, stdout + stderr)."""
    env = {**os.environ, "TABLECTL_PIT_PASSWORD": ROLE_PASSWORDS[user]}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "pit",
        *args,
        "--broker",
        f"mqtt://127.0.0.1:{broker.port}",
        "--table-id",
        TABLE,
        "--username",
        user,
        "--timeout",
        "10",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        async with asyncio.timeout(20):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, (out + err).decode()


def _hands(cards: list[str]) -> dict[str, list[str]]:
    return {"A": cards[0::2], "B": cards[1::2]}


def _expected_bets(cards: list[str]) -> dict[str, Any]:
    hands = {hand: parse_cards(values) for hand, values in _hands(cards).items()}
    settled = TEEN_PATTI_20_20.settle(
        TEEN_PATTI_20_20.resolve(hands), TEEN_PATTI_20_20.default_paytables
    )
    return {bet: result.to_wire() for bet, result in settled.items()}


def _device_states(live: Live) -> list[str]:
    return [m.data["state"] for m in live["betting"].events("device_status")]


def _kinds(messages: list[Received]) -> list[str]:
    return [m.kind or "" for m in messages]


async def _halted(live: Live) -> tuple[int, Received]:
    """Wait for the halt and its alert; the device must have been lost first."""
    betting = live["betting"]
    lost_at, _ = await betting.wait_event("device_status", where=lambda d: d["state"] == "lost")
    at, halted = await betting.wait_event("round_halted", after=lost_at)
    assert halted.data["reason"] == "card reader lost"  # the public phrase (docs/mqtt.md)
    _, alert = await betting.wait_event("pit_alert", after=at)
    assert alert.data["reason"] == "round halted: pit boss needed"
    return at, halted


def unplugged_table(
    broker: SecureBroker,
    tmp_path: Path,
    cards: list[str],
    faults: FaultPlan,
    *,
    rounds: int = 1,
    **round_settings: Any,
) -> contextlib.AbstractAsyncContextManager[Live]:
    """A Teen Patti table dealing ``cards`` from a scanner unplugged as ``faults`` say,
    watched by the betting system's credential."""
    sim = Simulation(cards=tuple(cards), deal_delay=0.0, faults=faults)
    return live_table(
        broker,
        GAME,
        sim,
        tmp_path / "j.sqlite",
        rounds=rounds,
        users=("betting",),
        round_settings=round_settings,
        driver=DRIVER,
    )


async def test_device_lost_halts_and_pit_resume_completes_the_round(
    broker: SecureBroker, tmp_path: Path
) -> None:
    # The cable is pulled for 2.5 s as the 4th card (Kc, slot B2) is dealt; the round halts
    # after 0.5 s without the device.
    faults = FaultPlan(unplug_every=4, unplug_seconds=2.5)
    async with unplugged_table(broker, tmp_path, ROUND_1, faults, device_halt_seconds=0.5) as live:
        betting = live["betting"]
        at, halted = await _halted(live)
        round_id = halted.body["round"]
        at, _ = await betting.wait_event(
            "device_status", after=at, where=lambda d: d["state"] == "recovered", seconds=15
        )
        code, output = await pit(broker, "resume", "--round", round_id)
        assert code == 0, output
        assert "ACCEPTED resume" in output
        at, resumed = await betting.wait_event("round_resumed", after=at)
        assert resumed.data == {"by": "pit"} and resumed.body["round"] == round_id
        try:
            _, result = await betting.wait_event("round_result", after=at, seconds=10)
        except TimeoutError:
            since = [
                (m.kind, m.data) for m in betting.events() if (m.seq or 0) >= (halted.seq or 0)
            ]
            raise AssertionError(
                f"the resumed round did not complete within 10 s; events since the halt: {since}"
            ) from None
        await live.finished()

    kinds = _kinds(betting.events())
    assert kinds.index("round_halted") < kinds.index("round_resumed") < kinds.index("round_result")
    assert result.data["cards"] == _hands(ROUND_1)
    assert group(result.data["bets"]) == _expected_bets(ROUND_1)
    dealt = [m.data["card"] for m in betting.events("card_dealt")]
    assert dealt == ROUND_1, "every card dealt once, in order"
    assert _device_states(live)[-2:] == ["lost", "recovered"]
    assert not betting.events("round_voided")


async def test_device_lost_halts_and_pit_void_refunds_then_next_round_plays(
    broker: SecureBroker, tmp_path: Path
) -> None:
    # One unplug only (a scripted fault at the 4th card), so the next round plays normally.
    faults = FaultPlan(script=(CardFault(at=3, kind="unplug", seconds=2.5),))
    reason = "scanner cable pulled at B2"
    async with unplugged_table(
        broker, tmp_path, ROUND_1 + ROUND_2, faults, rounds=2, device_halt_seconds=0.5
    ) as live:
        betting = live["betting"]
        at, halted = await _halted(live)
        round_id = halted.body["round"]
        at, _ = await betting.wait_event(
            "device_status", after=at, where=lambda d: d["state"] == "recovered", seconds=15
        )
        code, output = await pit(broker, "void", "--reason", reason)
        assert code == 0, output
        assert "ACCEPTED void" in output
        at, voided = await betting.wait_event("round_voided", after=at)
        _, result = await betting.wait_event("round_result", after=at, seconds=20)
        await live.finished()

    assert voided.body["round"] == round_id
    assert voided.data["reason"] == "voided by the pit"  # the pit's words: secure/events only
    assert reason not in str(voided.body)
    assert set(voided.data["bets"]) == set(TEEN_PATTI_20_20.bet_ids)
    assert all(b == {"outcome": "refund", "payout": "1"} for b in voided.data["bets"].values())
    assert betting.on("results")[0].body == voided.body
    # The next round: a new id, the next cards of the dealer's script (after every card drawn
    # in round 1: those dealt, and any refused while halted, which the dealer put aside), all
    # accepted, and a normal result.
    assert result.body["round"] != round_id
    assert result.data["round_no"] == 2
    script = ROUND_1 + ROUND_2
    drawn_1 = [
        m.data["card"]
        for m in betting.events()
        if m.kind in ("card_dealt", "card_refused") and m.body["round"] == round_id
    ]
    assert drawn_1 == script[: len(drawn_1)]
    round_2 = [
        m.data["card"]
        for m in betting.events("card_dealt")
        if m.body["round"] == result.body["round"]
    ]
    assert round_2 == script[len(drawn_1) : len(drawn_1) + 6]
    assert not [m for m in betting.events("card_refused") if m.body["round"] != round_id]
    assert result.data["cards"] == _hands(round_2)
    assert group(result.data["bets"]) == _expected_bets(round_2)
    assert "round_halted" not in [
        m.kind for m in betting.events() if m.body["round"] == result.body["round"]
    ]


async def test_short_unplug_waits_without_halting_and_refusals(
    broker: SecureBroker, tmp_path: Path
) -> None:
    # The cable is out for 0.6 s, well under device_halt_seconds (5 s): the round waits.
    faults = FaultPlan(unplug_every=4, unplug_seconds=0.6)
    async with unplugged_table(
        broker, tmp_path, ROUND_1, faults, device_halt_seconds=5.0, betting_seconds=3.0
    ) as live:
        betting = live["betting"]
        at, opened = await betting.wait_event("round_opened")
        round_id = opened.body["round"]
        # During the betting window: the round is not halted, so resume is refused; and the
        # betting credential cannot void (the broker refuses the publish).
        (resume_code, resume_out), (void_code, void_out) = await asyncio.gather(
            pit(broker, "resume"),
            pit(broker, "void", "--reason", "forged by betting", user="betting"),
        )
        assert resume_code == 1, resume_out
        assert f"round {round_id} is not halted" in resume_out
        assert void_code == 1, void_out
        assert "REFUSED by the broker" in void_out and "0x87" in void_out
        _, result = await betting.wait_event("round_result", after=at, seconds=20)
        await live.finished()

    assert _device_states(live)[-2:] == ["lost", "recovered"]
    kinds = _kinds(betting.events())
    assert "round_halted" not in kinds and "round_voided" not in kinds
    states = [(m.kind, m.data.get("state")) for m in betting.events()]
    lost = states.index(("device_status", "lost"))
    recovered = states.index(("device_status", "recovered"))
    assert kinds.index("betting_closed") < lost < recovered < kinds.index("round_result")
    answered = [m.data for m in betting.events("command_answered")]
    assert [(a["name"], a["accepted"]) for a in answered] == [("resume", False)]
    assert result.data["cards"] == _hands(ROUND_1)
    assert group(result.data["bets"]) == _expected_bets(ROUND_1)
    assert [m.data["card"] for m in betting.events("card_dealt")] == ROUND_1
