"""Mahjong Pai Gow's bank offers come before betting (issue 12, item 11), on the real table.

The table runs in-process (``run_table``) on the pty scanner simulator against the Mosquitto
running the committed ACL; the betting credential watches and answers, as the betting system
would. The rules choose the banker (offer; a decline passes the bank on) before players bet
against it, so the round is ``round_opened`` (``before_betting``, no closing time yet) → the
bank offers → ``table_info`` ``bank`` (who banks) → ``betting_opened`` → ``betting_closed`` →
the tiles → ``round_result``. A controller that dies during the offers resumes them from the
journal at the next start: the declines stand and the open offer is made again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.app import run_table
from controller.cards import Tile
from controller.games.mahjong_pai_gow import rules as mj
from controller.journal import Journal
from controller.recall import recall_round
from simulators.table import Simulation, simulated_scanner
from tests.integration._live_helpers import (
    Live,
    Peer,
    Received,
    acl_broker,
    live_table,
    table_settings,
)
from tests.integration._secure_broker import SecureBroker
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto
from tests.support.settlement import group

pytestmark = [
    pytest.mark.hil,
    pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING),
]

GAME = "mahjong-pai-gow"
# P1 declines, P2 banks: P1, P3, P4 are dealt in table order, then the banker box B.
HANDS = {"P1": ["9p", "6p"], "P3": ["wd", "9p"], "P4": ["3p", "3p"], "B": ["5p", "4p"]}
SCRIPT = tuple(tile for label in ("P1", "P3", "P4", "B") for tile in HANDS[label])
OFFERS = [{"position": "P1", "choice": "decline"}, {"position": "P2", "choice": "accept"}]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SecureBroker]:
    with acl_broker(tmp_path / "broker") as running:
        yield running


PLAY = frozenset(
    {
        "round_opened",
        "decision_open",
        "decision_applied",
        "table_info",
        "betting_opened",
        "betting_closed",
        "card_dealt",
        "round_result",
        "round_voided",
    }
)
"""The round's play (not the device's states or the commands' echoes)."""


def _round_events(peer: Peer, round_id: str) -> list[Received]:
    """The round's play on ``events``, in ``seq`` order."""
    mine = [m for m in peer.events() if m.body.get("round") == round_id and m.kind in PLAY]
    return sorted(mine, key=lambda m: m.seq or 0)


def _label(message: Received) -> str:
    data = message.data
    if message.kind in ("decision_open", "decision_applied"):
        return f"{message.kind}:{data['window']}"
    if message.kind == "table_info":
        return f"table_info:{data['kind']}"
    return message.kind or ""


def _window(window: str) -> Callable[[dict[str, Any]], bool]:
    return lambda data: bool(data["window"] == window)


async def _decide(peer: Peer, round_id: str, window: str, choice: str, n: int) -> None:
    answer = await peer.command(
        "decision",
        {
            "command_id": f"bank-{n}",
            "round": round_id,
            "window": window,
            "decision": {"choice": choice},
        },
    )
    assert answer["accepted"] is True, answer


def _assert_settled(live: Live, round_id: str) -> dict[str, Any]:
    """The round's result: P2 banks after P1's decline; the tiles judged by the rules."""
    (result,) = [m for m in live["betting"].events("round_result") if m.body["round"] == round_id]
    data = result.data
    assert data["details"]["banker"] == "P2"
    assert data["details"]["offers"] == OFFERS
    assert data["cards"] == HANDS
    tiles = {label: [Tile.parse(t) for t in hand] for label, hand in HANDS.items()}
    judged = mj.resolve_positions(tiles, ["P1", "P3", "P4"])
    for position, outcome in judged.items():
        settled = mj.settle_position(outcome, mj.DEFAULT_PAYTABLES)
        assert group(data["bets"], position=position) == {
            b: r.to_wire() for b, r in settled.items()
        }
    return dict(data)


async def test_bank_offers_come_before_betting_and_a_decline_passes_the_bank(
    broker: SecureBroker, tmp_path: Path
) -> None:
    journal = tmp_path / "j.sqlite"
    sim = Simulation(cards=SCRIPT, deal_delay=0.0)
    async with live_table(
        broker,
        GAME,
        sim,
        journal,
        users=("betting",),
        game_options={"positions": 4, "bank_seconds": 5},
        round_settings={"betting_seconds": 0.5},
    ) as live:
        betting = live["betting"]
        at, offer = await betting.wait_event(
            "decision_open", where=lambda d: d["window"] == "bank-offer-P1"
        )
        round_id = offer.body["round"]
        assert not betting.events("betting_opened"), "betting waits for the bank"
        await _decide(betting, round_id, "bank-offer-P1", "decline", 1)
        _, offer = await betting.wait_event(
            "decision_open", after=at, where=lambda d: d["window"] == "bank-offer-P2"
        )
        assert offer.data["info"]["declined"] == ["P1"]
        await _decide(betting, round_id, "bank-offer-P2", "accept", 2)
        await betting.wait_event("round_result", seconds=20)
        await live.finished()

    events = _round_events(betting, round_id)
    labels = [_label(m) for m in events]
    assert labels[:8] == [
        "round_opened",
        "decision_open:bank-offer-P1",
        "decision_applied:bank-offer-P1",
        "decision_open:bank-offer-P2",
        "decision_applied:bank-offer-P2",
        "table_info:bank",
        "betting_opened",
        "betting_closed",
    ]
    assert labels[8:] == ["card_dealt"] * 8 + ["round_result"]
    opened = events[0].data
    assert opened["before_betting"] is True
    assert opened["betting_closes_at"] is None
    assert opened["betting_seconds"] == 0.5
    bank = events[5].data
    assert bank == {
        "kind": "bank",
        "data": {"banker": "P2", "offers": OFFERS, "previous_banker": None},
        "secure": False,
    }
    betting_opened = events[6].data
    assert betting_opened["betting_seconds"] == 0.5
    assert betting_opened["betting_closes_at"].endswith("Z")
    # The decline passed the bank on: P1 plays (dealt first), P2 is the banker box.
    dealt = [m.data["slot"] for m in events if m.kind == "card_dealt"]
    assert dealt == ["P1a", "P1b", "P3a", "P3b", "P4a", "P4b", "Ba", "Bb"]
    _assert_settled(live, round_id)
    with Journal.open_readonly(journal) as store:
        report = store.verify()
        record = recall_round(store, round_id)
    assert report.ok, report
    # The betting window is timed from betting_opened, not from the round's opening.
    when = {entry.kind: entry.happened_at for entry in reversed(record.entries)}
    window = (when["betting_closed"] - when["betting_opened"]).total_seconds()
    assert window >= 0.5
    assert record.timing.betting_window == window
    assert record.timing.total is not None and record.timing.total > window


async def test_every_decline_ends_the_round_without_a_betting_window(
    broker: SecureBroker, tmp_path: Path
) -> None:
    journal = tmp_path / "j.sqlite"
    async with live_table(
        broker,
        GAME,
        Simulation(cards=SCRIPT, deal_delay=0.0),
        journal,
        users=("betting",),
        game_options={"positions": 2, "bank_seconds": 5},
    ) as live:
        betting = live["betting"]
        _, offer = await betting.wait_event("decision_open")
        round_id = offer.body["round"]
        for n, window in enumerate(("bank-offer-P1", "bank-offer-P2"), start=1):
            await betting.wait_event("decision_open", where=_window(window))
            await _decide(betting, round_id, window, "decline", n)
        await betting.wait_event("round_result", seconds=20)
        await live.finished()
    labels = [_label(m) for m in _round_events(betting, round_id)]
    assert "betting_opened" not in labels
    assert "table_info:bank" not in labels
    assert labels[-2:] == ["betting_closed", "round_result"]
    (result,) = betting.events("round_result")
    assert result.data["details"]["reason"] == "no banker"
    assert Journal.open_readonly(journal).verify().ok


async def test_a_restart_during_the_bank_offers_resumes_them(
    broker: SecureBroker, tmp_path: Path
) -> None:
    journal = tmp_path / "j.sqlite"
    options = {"positions": 4, "bank_seconds": 30}
    async with live_table(
        broker,
        GAME,
        Simulation(cards=SCRIPT, deal_delay=0.0),
        journal,
        users=("betting",),
        game_options=options,
    ) as live:
        betting = live["betting"]
        _, offer = await betting.wait_event("decision_open")
        round_id = offer.body["round"]
        await _decide(betting, round_id, "bank-offer-P1", "decline", 1)
        await betting.wait_event("decision_open", where=lambda d: d["window"] == "bank-offer-P2")
    # Leaving the block cancels the table mid-offer: as far as the journal can tell, a crash.
    with Journal.open_readonly(journal) as store:
        kinds = [entry.kind for entry in store.entries(round_id=round_id)]
    assert "betting_opened" not in kinds and "round_voided" not in kinds

    async with live_table(
        broker,
        GAME,
        Simulation(cards=SCRIPT, deal_delay=0.0),
        journal,
        users=("betting",),
        game_options=options,
    ) as live:
        betting = live["betting"]
        _, offer = await betting.wait_event("decision_open")
        assert offer.body["round"] == round_id, "the same round goes on"
        assert offer.data["window"] == "bank-offer-P2", "P1's decline stands"
        assert offer.data["info"]["declined"] == ["P1"]
        await _decide(betting, round_id, "bank-offer-P2", "accept", 2)
        await betting.wait_event("round_result", seconds=20)
        await live.finished()
    labels = [_label(m) for m in _round_events(betting, round_id)]
    assert labels[:5] == [
        "decision_open:bank-offer-P2",
        "decision_applied:bank-offer-P2",
        "table_info:bank",
        "betting_opened",
        "betting_closed",
    ]
    assert "round_voided" not in labels
    _assert_settled(live, round_id)
    report = Journal.open_readonly(journal).verify()
    assert report.ok, report


async def test_one_stop_signal_during_an_offer_voids_the_round_at_once(
    broker: SecureBroker, tmp_path: Path
) -> None:
    # The offer stays open 60 s and nobody answers; one SIGTERM (the CLI's handlers, installed
    # by run_table) ends the offer and voids the round: betting never opened.
    journal = tmp_path / "j.sqlite"
    peer = Peer(broker, "betting")
    async with asyncio.TaskGroup() as group:
        watching = group.create_task(peer.run(), name="peer-betting")
        async with asyncio.timeout(10):
            await peer.ready.wait()
        async with simulated_scanner(GAME, Simulation(cards=SCRIPT, deal_delay=0.0)) as url:
            settings = table_settings(
                broker,
                GAME,
                journal,
                url,
                game_options={"positions": 4, "bank_seconds": 60},
            )
            table = group.create_task(
                run_table(settings, rounds=1, install_signal_handlers=True), name="table"
            )
            try:
                await peer.wait_event("decision_open")
                stopped_at = time.monotonic()
                os.kill(os.getpid(), signal.SIGTERM)
                async with asyncio.timeout(15):
                    await table
                took = time.monotonic() - stopped_at
            finally:
                table.cancel()
        await peer.wait_event("round_voided")
        watching.cancel()
    assert took < 5, took
    (voided,) = peer.events("round_voided")
    assert voided.data["reason"] == "table stopped before betting closed"
    assert voided.data["started"] is False
    labels = [m.kind for m in peer.events() if m.kind in PLAY]
    assert labels == ["round_opened", "decision_open", "round_voided"]
    assert Journal.open_readonly(journal).verify().ok
