"""``tablectl run --simulate --profile pepper-c1``'s table: a whole table on a Pepper C1.

The simulated Eccel Pepper C1 of :func:`simulators.table.simulated_devices` (a real pty, an
antenna a hand, cues on the reader's UART passthrough) read through ``pepper+serial://`` by
``run_table`` (orchestrator, SQLite journal, a real Mosquitto): rounds dealt to the end, every
card read once at its hand's antenna, the cards of a round collected before the next.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from controller.app import run_table
from controller.journal import Journal
from simulators.table import Simulation, simulated_devices
from tests.integration.test_table_hil import settings_for


async def test_run_simulate_on_the_pepper_profile_plays_rounds(
    mosquitto: Any, tmp_path: Path
) -> None:
    sim = Simulation(seed=7, deal_delay=0.01, profile="pepper-c1")
    async with asyncio.timeout(60), simulated_devices("teen-patti-20-20", sim) as devices:
        url = devices.settings["device"]["url"]
        assert url.startswith("pepper+serial://") and "antennas=1:A,2:B" in url and "cues=1" in url
        settings = settings_for(mosquitto.url, "pep-1", tmp_path / "j.sqlite", url)
        summaries = await run_table(settings, rounds=2)
        reader = devices.simulator
    assert len(summaries) == 2
    with Journal.open(tmp_path / "j.sqlite") as journal:
        entries = list(journal.entries())
    kinds = [entry.kind for entry in entries]
    assert kinds.count("round_result") == 2 and kinds.count("card_dealt") == 12
    odd = [
        (e.kind, dict(e.body)) for e in entries if e.kind in ("card_refused", "rescan_requested")
    ]
    assert odd == []
    dealt = [str(entry.body["card"]) for entry in entries if entry.kind == "card_dealt"]
    assert dealt == reader.stats.dealt  # each card read once, in the order dealt
    hands = {str(e.body["slot"])[0] for e in entries if e.kind == "card_dealt"}
    assert hands == {"A", "B"}
    states = [str(e.body["state"]) for e in entries if e.kind == "device_status"]
    assert states == ["connected"]
