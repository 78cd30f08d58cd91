"""Cards entered by hand on the dealer screen and the stream overlay (issue 24, item 4).

A simulated table on a real Mosquitto whose scanner's cable is pulled at the 4th card and left
out; the pit boss's ``enter-card`` commands (sent as ``tablectl pit`` sends them) fill the
last three slots. In Chromium, the dealer screen and the overlay mark exactly those three
cards as entered by hand (``data-manual``, a "by hand" tag); the reader's cards are not
marked. Screenshots: ``dealer-manual.png``, ``overlay-manual.png``.
"""

from __future__ import annotations

import pytest

from controller.mqtt.settings import MqttSettings
from controller.pitcli import EXIT_ACCEPTED, Target, send_command
from simulators.scanner import CardFault, FaultPlan
from simulators.table import Simulation
from tests.studio._harness import make_studio_settings, running_studio, running_table, wait_for
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil

CARDS = ["As", "Kd", "Ah", "Kc", "Ad", "Kh"]
MARKED = """
() => [...document.querySelectorAll(".card[data-manual='true']")].map(
  (el) => [el.dataset.slot, el.dataset.card, el.querySelector("[data-role=manual]")?.textContent])
"""


async def test_the_pages_mark_the_cards_entered_by_hand(mosquitto, browser, tmp_path):
    table = "mn-1"
    faults = FaultPlan(script=(CardFault(at=3, kind="unplug", seconds=120.0),))
    sim = Simulation(cards=tuple(CARDS), deal_delay=0.0, faults=faults)
    settings = make_studio_settings(mosquitto.url, tables=[table])
    target = Target(MqttSettings(urls=[mosquitto.url]), table)
    shots = artifacts_dir()
    async with running_studio(settings) as address:
        dealer = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await dealer.goto(f"{address.url}/tables/{table}/dealer")
        overlay = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await overlay.goto(f"{address.url}/tables/{table}/overlay")
        async with running_table(
            mosquitto.url,
            tmp_path / "j.sqlite",
            table_id=table,
            sim=sim,
            rounds=1,
            round_settings={"device_halt_seconds": 0.5, "pause_seconds": 30},
        ):
            await wait_for(
                lambda: dealer.locator(".card[data-slot='A2'][data-face='up']").count(),
                30,
                "the reader's three cards",
            )
            for slot, card in zip(["B2", "A3", "B3"], CARDS[3:], strict=True):
                body = {"card": card, "slot": slot, "reason": "reader dead", "operator": "alice"}
                outcome = await send_command(target, "pit", "enter-card", body, timeout=20)
                assert outcome.code == EXIT_ACCEPTED, outcome.text
            expected = [["B2", "Kc", "by hand"], ["A3", "Ad", "by hand"], ["B3", "Kh", "by hand"]]
            for page in (dealer, overlay):
                await wait_for(lambda page=page: _marked(page, expected), 20, "three cards marked")
            await dealer.screenshot(path=shots / "dealer-manual.png")
            await overlay.screenshot(path=shots / "overlay-manual.png")
            for page in (dealer, overlay):
                unmarked = page.locator(".card[data-slot='A1']:not([data-manual])")
                assert await unmarked.count() >= 1, "a card the reader read is not marked"


async def _marked(page, expected: list[list[str]]) -> bool:
    return sorted(await page.evaluate(MARKED)) == sorted(expected)
