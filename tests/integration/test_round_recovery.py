"""A controller that dies mid-round: the journal brings the round back (issue 5's core rule).

A round that had not started is voided with a refund of every bet; a started round resumes
with the cards already read and asks the dealer for the next slot.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from controller.app import run_table
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from controller.settings import load_settings
from simulators.table import Simulation, simulated_scanner
from tests.support.rounds import round_id
from tests.support.settlement import group

pytestmark = pytest.mark.hil


def settings_for(broker_url: str, journal: Path, device_url: str, betting: float) -> object:
    return load_settings(
        None,
        table_id="rec-1",
        device={"url": device_url},
        mqtt={"urls": [broker_url]},
        journal={"path": journal},
        rounds={"betting_seconds": betting, "pause_seconds": 0},
    )


def kinds(journal: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(journal) as db:
        return [(k, r) for k, r in db.execute("SELECT kind, round_id FROM entries ORDER BY seq")]


async def run_until(settings: object, condition, journal: Path) -> None:
    """Run the table and cancel it (a crash, as far as the journal can tell) on a condition."""
    task = asyncio.create_task(run_table(settings, rounds=5))  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(30):
            while not (os.path.exists(journal) and condition(kinds(journal))):  # noqa: ASYNC240
                assert not task.done(), task
                await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_started_round_resumes_with_its_cards(mosquitto, tmp_path):
    journal = tmp_path / "j.sqlite"
    first = Simulation(cards=("As", "Kd", "Ah"), deal_delay=0.0)
    async with simulated_scanner("teen-patti-20-20", first) as url:
        await run_until(
            settings_for(mosquitto.url, journal, url, 0.1),
            lambda ks: [k for k, _ in ks].count("card_dealt") == 3,
            journal,
        )

    second = Simulation(cards=("Kc", "Ad", "Kh"), deal_delay=0.0)
    async with simulated_scanner("teen-patti-20-20", second) as url:
        settings = settings_for(mosquitto.url, journal, url, 0.1)
        async with asyncio.timeout(30):
            summaries = await run_table(settings, rounds=1)  # type: ignore[arg-type]

    assert [s.round_id for s in summaries] == [round_id(journal, "rec-1")]
    result = summaries[0].result
    assert result is not None
    assert result["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}
    assert result["winner"] == "A"
    log = [k for k, _ in kinds(journal)]
    assert log.count("round_opened") == 1
    assert log.count("betting_closed") == 1
    assert log.count("card_dealt") == 6
    # Settled exactly as the rule sheet pays a trail of aces against a trail of kings.
    assert group(result["bets"])["player_a"]["payout"] == "1.95"
    assert group(result["bets"])["pair_plus_b"]["payout"] == "41"


async def test_round_not_started_is_voided_with_refunds(mosquitto, tmp_path):
    journal = tmp_path / "j.sqlite"
    sim = Simulation(seed=3, deal_delay=0.0)
    async with simulated_scanner("teen-patti-20-20", sim) as url:
        await run_until(
            settings_for(mosquitto.url, journal, url, 30.0),
            lambda ks: any(k == "round_opened" for k, _ in ks),
            journal,
        )
        settings = settings_for(mosquitto.url, journal, url, 0.1)
        async with asyncio.timeout(30):
            summaries = await run_table(settings, rounds=1)  # type: ignore[arg-type]

    first = round_id(journal, "rec-1")
    assert [(s.round_id, s.phase.value) for s in summaries] == [(first, "voided")]
    log = kinds(journal)
    assert ("betting_closed", first) not in log
    with sqlite3.connect(journal) as db:
        body = db.execute("SELECT body FROM entries WHERE kind='round_voided'").fetchone()[0]
    assert '"refund"' in body
    for bet in TEEN_PATTI_20_20.bet_ids:
        assert f'"{bet}"' in body
