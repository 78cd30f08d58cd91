"""The dealer screen: a refused card with its reason, and a decision window with its countdown."""

from __future__ import annotations

import pytest

from simulators.table import Simulation
from tests.studio._harness import make_studio_settings, running_studio, running_table, wait_for
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil

REFUSALS = """
() => {
  window.__refused = [];
  const el = document.getElementById("refused");
  const log = () => { if (!el.hidden) window.__refused.push({slot: el.dataset.slot,
      reason: el.dataset.reason, text: el.textContent}); };
  new MutationObserver(log).observe(el, {attributes: true, childList: true, subtree: true});
}
"""


async def test_a_refused_card_is_shown_with_its_reason(mosquitto, browser, tmp_path):
    table = "dr-1"
    # The second ace of spades is a duplicate: refused at A2, the dealer scans the next card.
    script = ("As", "Kd", "As", "Ah", "Kc", "Ad", "Kh")
    sim = Simulation(cards=script, deal_delay=0.4)
    async with running_studio(make_studio_settings(mosquitto.url, tables=[table])) as address:
        page = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await page.goto(f"{address.url}/tables/{table}/dealer")
        await page.evaluate(REFUSALS)
        async with running_table(
            mosquitto.url, tmp_path / "j.sqlite", table_id=table, sim=sim, rounds=1
        ):
            await wait_for(lambda: page.evaluate("window.__refused.length > 0"), 30, "REFUSED")
            await page.screenshot(path=artifacts_dir() / "dealer-refused.png")
            refused = (await page.evaluate("window.__refused"))[0]
            assert refused["slot"] == "A2"
            assert "duplicate" in refused["reason"]
            assert refused["text"].startswith("REFUSED ace of spades at A2: ")
            # The next good card clears it.
            await wait_for(lambda: page.locator("#refused").is_hidden(), 10, "the refusal gone")


async def test_a_decision_window_is_shown_with_its_countdown(mosquitto, browser, tmp_path):
    table = "dw-1"
    async with running_studio(make_studio_settings(mosquitto.url, tables=[table])) as address:
        page = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await page.goto(f"{address.url}/tables/{table}/dealer")
        async with running_table(
            mosquitto.url,
            tmp_path / "j.sqlite",
            table_id=table,
            game="texas-holdem",
            sim=Simulation(seed=5, deal_delay=0.05),
            game_options={"seats": 2, "action_seconds": 4},
        ):
            # No betting system answers: each action window stays open until its deadline.
            await wait_for(
                lambda: page.locator("#decision[data-kind='action']").is_visible(), 30, "a window"
            )
            text = await page.locator("#decision").inner_text()
            assert "Hold'em action" in text and "Seat " in text
            assert "all-in" in text and "all_in" not in text  # a dealer's words, not tokens
            await wait_for(
                lambda: page.locator("#countdown:not([data-seconds=''])").count(), 5, "countdown"
            )
            seconds = float(await page.locator("#countdown").get_attribute("data-seconds") or -1)
            assert 0 <= seconds <= 4
            # The countdown as a bar across the screen: its share of the window's 4 s.
            timer = page.locator("[data-role='timer']")
            assert await timer.is_visible()
            assert float(await timer.get_attribute("data-total") or 0) == 4.0
            width = await timer.evaluate("(t) => t.firstElementChild.getBoundingClientRect().width")
            assert 0 < width <= 1920
            await page.screenshot(path=artifacts_dir() / "dealer-decision.png")
