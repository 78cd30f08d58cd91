"""A dead reader on the pit console: the pit boss enters the cards from the page (issue 24).

A real table (in process) whose scanner's cable is pulled at the 4th card and left out, a
real Mosquitto with the committed ACL, the console served with its broker account and a
real headless Chromium signed in as ``alice``. "Enter card..." opens a dialog that names the
slot the round waits for; Confirm stays disabled until a card and a reason are typed; the
table's answer is shown in words (a card already dealt refused with the table's reason). The
round is dealt to the end from the page and the cards are journalled as manual, by alice.
"""

from __future__ import annotations

from playwright.async_api import Page, expect

from controller.journal import Journal
from controller.recall import recall_round
from controller.studio.pit import build_pit_app
from controller.studio.pit.runner import serving
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

REASON = "reader dead at B2"


async def _enter(page: Page, card: str, slot: str, *, screenshot: str | None = None) -> None:
    table = page.locator(f"#card-{TABLE}")
    # The page ignores clicks for 0.5 s after a Confirm (a double click must not act twice).
    await page.wait_for_timeout(600)
    await table.locator("button.enter-card").click()
    dialog = page.locator("#confirm")
    await expect(dialog).to_be_visible()
    await expect(page.locator("#confirm-title")).to_have_text(f"Enter a card by hand for {slot}?")
    go = page.locator("#confirm [data-role=confirm-go]")
    await expect(go).to_be_disabled()
    await page.fill("#confirm-card", card)
    await expect(go).to_be_disabled()  # the reason is needed too
    await page.fill("#confirm-reason", REASON)
    await expect(go).to_be_enabled()
    if screenshot is not None:
        await shot(page, screenshot)
    await go.click()


async def test_the_pit_boss_deals_a_round_to_the_end_from_the_page(broker, tmp_path, browser):
    faults = FaultPlan(script=(CardFault(at=3, kind="unplug", seconds=120.0),))
    sim = Simulation(cards=tuple(CARDS), deal_delay=0.0, faults=faults)
    journal = tmp_path / "j.sqlite"
    async with (
        serving(build_pit_app(console_settings(broker))) as url,
        live_table(
            broker,
            "teen-patti-20-20",
            sim,
            journal,
            users=("betting",),
            round_settings={"device_halt_seconds": 0.5},
            driver={"backoff_min": 0.05, "backoff_max": 0.25},
        ) as live,
    ):
        betting = live["betting"]
        page = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await sign_in(page, url, "alice", "pw-a")
        table = page.locator(f"#card-{TABLE}")
        await expect(table.locator(".online")).to_have_text("ONLINE", timeout=BROWSER_SECONDS)
        # No deck-check reader at this pit: no Deck check button.
        await expect(table.locator("button.deck-check")).to_be_hidden()
        _, halted = await betting.wait_event("round_halted", seconds=20)
        round_id = halted.body["round"]
        answer = table.locator(".answer")

        # A card already dealt: refused by the table, in words.
        await _enter(page, "As", "B2")
        await expect(answer).to_have_class("answer refused", timeout=BROWSER_SECONDS)
        await expect(answer.locator("[data-role=answer-words]")).to_contain_text(
            "As cannot be entered for B2: duplicate: already dealt in this round"
        )
        await shot(page, "enter-card-refused")

        # The three cards the round waits for.
        for number, (slot, card) in enumerate(zip(["B2", "A3", "B3"], CARDS[3:], strict=True)):
            await _enter(page, card, slot, screenshot="enter-card-dialog" if number == 0 else None)
            await expect(answer).to_have_class("answer accepted", timeout=BROWSER_SECONDS)
            await expect(answer.locator("[data-role=answer-words]")).to_contain_text(
                f"Round {round_id} at table {TABLE} took the card entered by hand for {slot}"
            )
            if number == 0:
                await shot(page, "enter-card-accepted")
        _, result = await betting.wait_event("round_result", seconds=15)
        await live.finished()

        # Recall on the page draws the round with the three cards marked as entered by hand.
        await page.fill("#recall-round", round_id)
        await page.wait_for_timeout(600)  # clicks right after a Confirm are ignored (0.5 s)
        await page.click("#recall-go")
        recalled = page.locator("[data-role=recalled]")
        await expect(recalled.locator("[data-role=recall-outcome]")).to_contain_text(
            "A wins", timeout=BROWSER_SECONDS
        )
        marked = recalled.locator("[data-role=card][data-manual=true]")
        await expect(marked).to_have_count(3)
        assert await marked.evaluate_all("cs => cs.map(c => c.dataset.card)") == ["Ad", "Kc", "Kh"]
        await expect(marked.first.locator("[data-role=manual]")).to_have_text("by hand")
        actions = recalled.locator("[data-role=pit-action]")
        await expect(actions).to_have_count(4)
        await expect(actions.nth(0)).to_contain_text("alice asked to enter a card by hand: refused")
        await expect(actions.nth(1)).to_contain_text("alice entered a card by hand for B2")
        await shot(page, "enter-card-recall")

    assert result.data["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}
    with Journal.open_readonly(journal) as opened:
        record = recall_round(opened, round_id)
    manual = [card for card in record.to_dict()["cards"] if card.get("source") == "manual"]
    assert [(c["slot"], c["card"], c["operator"], c["reason"]) for c in manual] == [
        ("B2", "Kc", "alice", REASON),
        ("A3", "Ad", "alice", REASON),
        ("B3", "Kh", "alice", REASON),
    ]
