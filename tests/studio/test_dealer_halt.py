"""The dealer screen when the scanner's cable is pulled: SCANNER LOST, HALTED, then resumed.

The scanner simulator pulls its cable at the 4th card for longer than
``rounds.device_halt_seconds``: the table journals the device lost and halts the round for the
pit boss. The dealer screen shows both plainly; the pit boss's ``resume`` (sent as the pit
role would, on ``cmd/pit/resume``) ends the halt and the screen shows the round dealing again.
"""

from __future__ import annotations

import json
import uuid

import aiomqtt
import pytest

from simulators.faults import CardFault, FaultPlan
from simulators.table import Simulation
from tests.studio._harness import make_studio_settings, running_studio, running_table, wait_for
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil


async def test_dealer_screen_shows_a_lost_scanner_and_a_halt_until_resumed(
    mosquitto, browser, tmp_path
):
    table = "dh-1"
    faults = FaultPlan(script=(CardFault(at=3, kind="unplug", seconds=4.0),))
    sim = Simulation(seed=3, deal_delay=0.2, faults=faults)
    async with running_studio(make_studio_settings(mosquitto.url, tables=[table])) as address:
        page = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await page.goto(f"{address.url}/tables/{table}/dealer")
        async with running_table(
            mosquitto.url,
            tmp_path / "j.sqlite",
            table_id=table,
            sim=sim,
            round_settings={"device_halt_seconds": 0.5},
        ):
            await wait_for(lambda: page.locator("#halted").is_visible(), 30, "HALTED")
            assert "HALTED" in await page.locator("#halted").inner_text()
            assert await page.locator("#state").get_attribute("data-state") == "dealing"
            # The cable stays out 4 s and the halt comes after 0.5 s: the loss is still shown.
            assert "SCANNER LOST" in await page.locator("#device").inner_text()
            await page.screenshot(path=artifacts_dir() / "dealer-halted.png")
            round_id = await page.evaluate("document.body.dataset.round")
            await wait_for(lambda: page.locator("#device").is_hidden(), 30, "the scanner back")
            command = {"command_id": f"resume-{uuid.uuid4().hex[:8]}", "round": round_id}
            async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
                await client.publish(f"tables/{table}/cmd/pit/resume", json.dumps(command), qos=1)
            await wait_for(lambda: page.locator("#halted").is_hidden(), 20, "the halt ended")
            await wait_for(
                lambda: page.locator("#next[data-slot]:not([data-slot=''])").count(),
                20,
                "a next slot to deal after the resume",
            )
