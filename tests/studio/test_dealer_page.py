"""The dealer screen in Chromium against a simulated table on a real Mosquitto.

The page shows RESCAN with the attempt count after an injected misread; a broker restart
(the studio's feed lost) is shown and recovered; the studio's socket lost (the studio
stopped and started again on the same port) is shown, and the page reconnects by itself and
reads the state again; a table that stops is shown offline. Screenshots go to the artifacts.
"""

from __future__ import annotations

import asyncio

import pytest

from simulators.table import Simulation
from tests.studio._harness import (
    make_studio_settings,
    running_studio,
    running_table,
    wait_for,
)
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil

RESCANS = """
() => {
  window.__rescans = [];
  const el = document.getElementById("rescan");
  const log = () => { if (!el.hidden) window.__rescans.push({attempt: el.dataset.attempt,
      slot: el.dataset.slot, text: el.textContent}); };
  new MutationObserver(log).observe(el, {attributes: true, childList: true, subtree: true});
}
"""


async def _body(page, name: str) -> str:
    return str(await page.evaluate(f"document.body.dataset.{name}"))


async def test_dealer_screen_rescan_outages_and_offline(mosquitto, browser, tmp_path):
    table = "dl-1"
    # Card 1 of the shoe misreads twice before its good read: RESCAN attempt 1, then 2.
    sim = Simulation(seed=7, deal_delay=0.3, misreads_at={1: 2})
    settings = make_studio_settings(mosquitto.url, tables=[table])
    shots = artifacts_dir()
    async with running_studio(settings) as address:
        page = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await page.goto(f"{address.url}/tables/{table}/dealer")
        await page.evaluate(RESCANS)
        async with running_table(
            mosquitto.url, tmp_path / "j.sqlite", table_id=table, sim=sim, rounds=3
        ) as played:
            # (a) RESCAN with the attempt count after the injected misreads.
            await wait_for(
                lambda: page.evaluate("window.__rescans.length >= 2"), 30, "two RESCAN prompts"
            )
            rescans = await page.evaluate("window.__rescans")
            attempts = [r["attempt"] for r in rescans]
            assert "1" in attempts and "2" in attempts, rescans
            assert all(r["text"].startswith(f"RESCAN {r['slot']}") for r in rescans)
            await page.screenshot(path=shots / "dealer-rescan.png")
            await wait_for(
                lambda: page.locator("#rescan").is_hidden(), 10, "the prompt gone after the read"
            )
            # (c) the broker goes away: the page says the feed is lost; back: recovered.
            mosquitto.stop()
            await wait_for(lambda: page.locator("body[data-feed='down']").count(), 15, "FEED LOST")
            assert "FEED LOST" in await page.locator("#banner").inner_text()
            await page.screenshot(path=shots / "dealer-feed-lost.png")
            seq_before = await page.evaluate("document.getElementById('line').textContent")
            mosquitto.start()
            await wait_for(
                lambda: page.locator("body[data-feed='up']").count(), 20, "the feed back"
            )
            # The broker may hand back the table's retained Last Will first: the banner goes
            # once the table's birth follows (it reconnects within its back-off).
            await wait_for(lambda: page.locator("#banner").is_hidden(), 20, "no banner")
            # The state moves on after the outage (the table reconnected and deals on).
            await wait_for(
                lambda: page.evaluate(
                    f"document.getElementById('line').textContent !== {seq_before!r}"
                ),
                20,
                "a new message after the broker came back",
            )
            # (d) the table finishes its rounds and stops: offline, shown plainly.
            async with asyncio.timeout(90):
                await played
        await wait_for(lambda: page.locator("body[data-online='false']").count(), 15, "OFFLINE")
        assert "TABLE OFFLINE" in await page.locator("#banner").inner_text()
        await page.screenshot(path=shots / "dealer-offline.png")
        port = address.port
    # (c) the studio's socket is lost: the page says so, and reconnects by itself.
    await wait_for(lambda: page.locator("body[data-conn='lost']").count(), 10, "CONNECTION LOST")
    assert "CONNECTION LOST" in await page.locator("#banner").inner_text()
    await page.screenshot(path=shots / "dealer-connection-lost.png")
    again = make_studio_settings(mosquitto.url, tables=[table], port=port)
    async with running_studio(again):
        await wait_for(lambda: page.locator("body[data-conn='open']").count(), 15, "reconnected")
        # The state is read again (the retained status says offline: still shown).
        await wait_for(
            lambda: page.locator("body[data-online='false']").count(), 10, "the state re-read"
        )
        await page.screenshot(path=shots / "dealer-reconnected.png")
