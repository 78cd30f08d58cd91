"""``tablectl run --simulate --profile pcsc-uid``'s table: a whole table on a PC/SC reader.

The private pcscd with the virtual ACR122U of :func:`simulators.table.simulated_devices`,
read through ``pcsc://`` (pyscard, libpcsclite, the real pcscd) by ``run_table``
(orchestrator, SQLite journal, a real Mosquitto): rounds dealt to the end, every card read
once, each card's removal after its read (no removal is a fold in Teen Patti).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from controller.app import run_table
from controller.journal import Journal
from simulators.table import Simulation, simulated_devices
from tests.integration.test_table_hil import settings_for
from tests.support.pcsc import needs_pcscd

pytestmark = needs_pcscd


async def test_run_simulate_on_the_pcsc_profile_plays_rounds(
    mosquitto: Any, tmp_path: Path
) -> None:
    sim = Simulation(seed=7, deal_delay=0.01, profile="pcsc-uid")
    async with asyncio.timeout(90), simulated_devices("teen-patti-20-20", sim) as devices:
        url = devices.settings["device"]["url"]
        assert url.startswith("pcsc://?reader=ACS%20ACR122U%2000%2000&pcscd=/")
        settings = settings_for(mosquitto.url, "pcsc-1", tmp_path / "j.sqlite", url)
        summaries = await run_table(settings, rounds=2)
        dealer = devices.simulator
    assert len(summaries) == 2
    with Journal.open(tmp_path / "j.sqlite") as journal:
        entries = list(journal.entries())
    kinds = [entry.kind for entry in entries]
    assert kinds.count("round_result") == 2
    dealt = [str(entry.body["card"]) for entry in entries if entry.kind == "card_dealt"]
    assert len(dealt) == 12
    # Each card dealt was one the dealer put on the reader, in the dealer's order; cards
    # placed during betting are refused, never guessed into the round.
    placed = list(dealer.drawn)
    positions = [placed.index(card) for card in dealt]
    assert positions == sorted(positions)
    states = [str(e.body["state"]) for e in entries if e.kind == "device_status"]
    assert states == ["connected"]
