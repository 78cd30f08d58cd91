"""A deck check from the pit console, on the pit's own reader (issue 24, item 5).

The pit's reader is the line-shoe simulator on a real pty (``[pit.deck_check]``); the deck
put on it lacks the 7h, holds the As twice and a joker. A real table runs (its own reader
unplugged: it stays up, halted), a real Mosquitto with the committed ACL, Chromium signed in
as ``alice``. "Deck check..." asks first, scans the whole deck, and the table records the
report (journalled with alice's name) and answers; the page says in words that the deck must
not go into play and why.
"""

from __future__ import annotations

from playwright.async_api import expect

from controller.cards import Deck
from controller.studio.pit import build_pit_app
from controller.studio.pit.runner import serving
from drivers.profile import load_profile
from simulators.line_device import LineDeviceSimulator
from simulators.scanner import CardFault, FaultPlan
from simulators.table import Simulation
from tests.integration._live_helpers import TABLE, live_table
from tests.studio.test_pit_browser import (
    BROWSER_SECONDS,
    CARDS,
    broker,
    console_settings,
    pytestmark,
    shot,
    sign_in,
)

__all__ = ["broker", "pytestmark"]

STANDARD = [str(piece) for piece in Deck.standard()]
PUT_DOWN = [card for card in STANDARD if card != "7h"] + ["As", "JK"]


async def test_a_deck_check_from_the_console_is_recorded_at_the_table(broker, tmp_path, browser):
    reader = LineDeviceSimulator(load_profile("line-shoe"), cards=PUT_DOWN, deal_delay=0.0)
    faults = FaultPlan(script=(CardFault(at=0, kind="unplug", seconds=120.0),))
    sim = Simulation(cards=tuple(CARDS), deal_delay=0.0, faults=faults)
    async with reader.serve_pty() as path:
        deck_check = {
            "device": f"profile+serial://{path}?profile=line-shoe",
            "idle_seconds": 1.0,
            "first_read_seconds": 20.0,
        }
        async with (
            serving(build_pit_app(console_settings(broker, deck_check=deck_check))) as url,
            live_table(
                broker,
                "teen-patti-20-20",
                sim,
                tmp_path / "j.sqlite",
                users=("betting", "stream"),
                driver={"backoff_min": 0.05, "backoff_max": 0.25},
            ) as live,
        ):
            page = await browser.new_page(viewport={"width": 1920, "height": 1080})
            await sign_in(page, url, "alice", "pw-a")
            table = page.locator(f"#card-{TABLE}")
            await expect(table.locator(".online")).to_have_text("ONLINE", timeout=BROWSER_SECONDS)
            await expect(table).to_contain_text("Teen Patti 20-20", timeout=BROWSER_SECONDS)
            await expect(table.locator("button.deck-check")).to_be_visible()
            await table.locator("button.deck-check").click()
            await expect(page.locator("#confirm-title")).to_have_text(
                f"Check a deck for table {TABLE}?"
            )
            await shot(page, "deck-check-dialog")
            await page.locator("#confirm [data-role=confirm-go]").click()
            answer = table.locator(".answer")
            await expect(answer).to_have_class("answer accepted", timeout=60_000)
            words = answer.locator("[data-role=answer-words]")
            await expect(words).to_have_text(
                f"Table {TABLE} recorded the deck check: the deck must NOT go into play "
                "(missing: 7h; not of this deck: JK; read twice or more: As)."
            )
            await shot(page, "deck-check-report")
            _, received = await live["stream"].wait_for(
                lambda m: (
                    m.topic.endswith("/secure/events")
                    and m.kind == "command_received"
                    and m.data.get("name") == "deck-check"
                )
            )
    data = received.data["data"]
    assert data["operator"] == "alice" and data["ok"] is False
    assert data["missing"] == ["7h"] and data["extra"] == ["JK"]
    assert data["duplicated"] == {"As": 2} and data["read"] == 53
    assert data["device"].startswith("profile+serial://")
    assert reader.drawn == PUT_DOWN
