"""Stale state: the studio restarted mid-round gives its pages the round as it stands.

The new studio process has no memory: what it shows comes from the broker's retained round
snapshot. A dealer screen that reconnects mid-round must show the cards already dealt in that
round (not an empty round, nor the previous one), then go on with the next cards.
"""

from __future__ import annotations

import pytest

from simulators.table import Simulation
from tests.studio._harness import make_studio_settings, running_studio, running_table, wait_for
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil

RENDERS = """
() => {
  window.__renders = [];
  const body = document.body;
  const log = () => window.__renders.push({
    conn: body.dataset.conn, feed: body.dataset.feed, round: body.dataset.round || "",
    cards: document.querySelectorAll("#cards .card:not([data-card=''])").length});
  new MutationObserver(log).observe(body, {subtree: true, childList: true, attributes: true});
}
"""

CARDS = "document.querySelectorAll(\"#cards .card:not([data-card=''])\").length"


async def test_a_studio_restarted_mid_round_shows_the_round_as_it_stands(
    mosquitto, browser, tmp_path
):
    table = "sr-1"
    sim = Simulation(seed=9, deal_delay=2.0)  # a round of 6 cards lasts about 12 s
    settings = make_studio_settings(mosquitto.url, tables=[table])
    async with running_table(mosquitto.url, tmp_path / "j.sqlite", table_id=table, sim=sim):
        async with running_studio(settings) as address:
            page = await browser.new_page(viewport={"width": 1920, "height": 1080})
            await page.goto(f"{address.url}/tables/{table}/dealer")
            await wait_for(lambda: page.evaluate(f"{CARDS} >= 2"), 30, "two cards dealt")
            round_id = await page.evaluate("document.body.dataset.round")
            dealt = await page.evaluate(CARDS)
            port = address.port
        await wait_for(lambda: page.locator("body[data-conn='lost']").count(), 10, "lost")
        await page.evaluate(RENDERS)
        async with running_studio(make_studio_settings(mosquitto.url, tables=[table], port=port)):
            # (Until then the page keeps the old picture under its CONNECTION LOST banner.)
            await wait_for(
                lambda: page.evaluate("window.__renders.some(r => r.conn === 'open' && r.round)"),
                15,
                "a round shown after the reconnection",
            )
            await page.screenshot(path=artifacts_dir() / "dealer-after-studio-restart.png")
    renders = await page.evaluate("window.__renders")
    shown = [r for r in renders if r["conn"] == "open" and r["round"]]
    assert shown, renders
    first = shown[0]
    # The first round the restarted studio shows is the round in play, with its cards.
    assert first["round"] == round_id
    assert first["cards"] >= dealt
    # While it had no broker link yet, the page said so rather than show an empty table as live.
    assert all(r["feed"] == "down" for r in renders if r["conn"] == "open" and not r["round"])
