"""A Hold'em hand folded by its cards leaving the seat's antenna (issue 24, item 3).

A real table round: the :class:`~controller.orchestrator.Orchestrator` built directly (as in
``test_cue_settle.py``), journalling to a real SQLite file, reading a simulated Eccel Pepper
C1 on a real pty through the supervised ``pepper+serial://`` source (latched: the shipped
profile's 300 ms removal time). The simulator's dealer deals the scripted cards as the table
cues them (``cues=1``, the reader's UART passthrough). The test plays the dealer's hands:
during the first seat's action it lifts that seat's two cards (or puts them on the muck
antenna, or lifts them for less than the removal time), and reads the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from controller.games.registry import make_live_game
from controller.journal import Journal, JournalEntry
from controller.orchestrator import Orchestrator, RoundSummary
from controller.round import Phase
from controller.settings import RoundSettings
from drivers.reader_profile import load_reader_profile
from drivers.source import DriverSettings
from drivers.supervisor import SupervisedCardSource
from simulators.pepper_reader import PepperReaderSimulator

pytestmark = pytest.mark.hil

# Heads-up: the four hole cards (seat 1, seat 2, seat 1, seat 2 from the small blind), then
# the board if the hand goes on.
SCRIPT = ["As", "Kd", "Ah", "Kc", "2s", "7d", "9c", "Jh", "3d"]
ACTION_SECONDS = 2.0
REMOVE_AFTER = 0.3  # the shipped pepper-c1 profile's


class Entries:
    """The journal's entries as they are committed, for the test to wait on."""

    def __init__(self, journal: Journal) -> None:
        self.seen: list[JournalEntry] = []
        self._changed = asyncio.Event()
        loop = asyncio.get_running_loop()

        def listener(entry: JournalEntry) -> None:
            loop.call_soon_threadsafe(self._add, entry)

        journal.add_listener(listener)

    def _add(self, entry: JournalEntry) -> None:
        self.seen.append(entry)
        self._changed.set()

    async def first(self, test: Callable[[JournalEntry], bool]) -> JournalEntry:
        """The first entry passing ``test`` (waiting for it)."""
        while True:
            for entry in self.seen:
                if test(entry):
                    return entry
            self._changed.clear()
            await self._changed.wait()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [dict(entry.body) for entry in self.seen if entry.kind == kind]


@contextlib.asynccontextmanager
async def table(
    tmp_path: Path,
) -> AsyncIterator[tuple[PepperReaderSimulator, Entries, asyncio.Task[list[RoundSummary]]]]:
    codes = load_reader_profile("pepper-c1").table
    sim = PepperReaderSimulator(codes, cards=SCRIPT, slot_antennas={}, default_antenna=1)
    with Journal.open(tmp_path / "table.sqlite") as journal:
        async with sim.serve_pty(tmp_path / "pepper") as path:
            url = f"pepper+serial://{path}?antennas=1,8:muck&cues=1"
            source = SupervisedCardSource(url, DriverSettings(heartbeat_timeout=2.0))
            await source.open()
            entries = Entries(journal)
            orchestrator = Orchestrator(
                table_id="fold-1",
                game=make_live_game(
                    "texas-holdem",
                    {"seats": 2, "action_seconds": ACTION_SECONDS, "equity_samples": 1000},
                    {},
                ),
                source=source,
                journal=journal,
                settings=RoundSettings(
                    betting_seconds=0.05, pause_seconds=0, wait_for_broker=False
                ),
            )
            run = asyncio.create_task(orchestrator.run(rounds=1), name="table")
            try:
                yield sim, entries, run
            finally:
                if not run.done():
                    run.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await run
                await source.close()


async def first_action(entries: Entries) -> tuple[str, str, list[str]]:
    """The first action window: its id, the seat to act and that seat's hole cards."""
    opened = await entries.first(lambda e: e.kind == "decision_open")
    seat = str(opened.body["seat"])
    hole = [str(card["card"]) for card in entries.of("card_dealt") if card["hand"] == seat]
    assert len(hole) == 2, hole
    return str(opened.body["window"]), seat, hole


def applied(entries: Entries, window: str) -> dict[str, Any]:
    (decision,) = [d for d in entries.of("decision_applied") if d["window"] == window]
    return decision


@pytest.mark.parametrize("where", ["lifted", "mucked"])
async def test_a_seat_whose_cards_leave_its_antenna_during_its_action_folds(
    tmp_path: Path, where: str
) -> None:
    async with asyncio.timeout(30), table(tmp_path) as (sim, entries, run):
        window, seat, hole = await first_action(entries)
        opened_at = asyncio.get_running_loop().time()
        for card in hole:
            sim.lift_card(card)
            if where == "mucked":
                sim.place_card(8, card)  # the muck antenna
        (summary,) = await run
        folded_in = asyncio.get_running_loop().time() - opened_at
    assert summary.phase is Phase.SETTLED
    decision = applied(entries, window)
    assert decision["decision"]["action"] == "fold" and decision["decision"]["seat"] == seat
    assert decision["default"] is False and decision["command_id"] is None
    assert decision["source"] == "removal"
    assert seat in decision["reason"] and not any(card in decision["reason"] for card in hole)
    assert folded_in < ACTION_SECONDS  # not the deadline's default
    (result,) = entries.of("round_result")
    assert result["details"]["ended"] == "folds", result
    assert entries.of("card_refused") == []  # a mucked card is no card out of turn


async def test_cards_back_within_the_removal_time_are_no_fold(tmp_path: Path) -> None:
    async with asyncio.timeout(30), table(tmp_path) as (sim, entries, run):
        window, _seat, hole = await first_action(entries)
        for card in hole:
            sim.lift_card(card)
        await asyncio.sleep(REMOVE_AFTER / 3)  # a hand over the antenna, not a fold
        for card in hole:
            sim.place_card(1, card)
        # The window runs to its deadline: its default, never a removal.
        await entries.first(lambda e: e.kind == "decision_applied")
        decision = applied(entries, window)
        assert decision["default"] is True and "source" not in decision
        run.cancel()
    assert entries.of("card_refused") == []
