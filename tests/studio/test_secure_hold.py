"""The secure-delay overlay shows no hole card while its hand is still being played.

A Hold'em table on a Mosquitto with the committed ACL file, whose betting system takes
2.5 s over each decision: a hand lasts many times the studio's secure delay (1 s). The
test records the table's own messages (the stream role) and reads the secure-delay socket's
frames and what a secure-delay overlay in Chromium shows, then checks:

* no hole card and no secure equity reaches the secure-delay socket or overlay before its
  round's result was journalled (the hold), nor before the delay passed;
* every hole card is shown once the round is over;
* the rest of the secure feed keeps its plain delay: the secure-delay overlay follows the
  hand (dealing, cards as backs) while it is played, long before the result.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import websockets

from simulators.table import Simulation
from tests.integration._live_helpers import TABLE, acl_broker
from tests.integration._secure_broker import ROLE_PASSWORDS
from tests.studio._harness import OBSERVE_CARDS, make_studio_settings, running_studio, running_table
from tests.studio.test_overlay_page import Recorder, _epoch, _token
from tests.support.browser import artifacts_dir

pytestmark = [pytest.mark.hil, pytest.mark.slow]

DELAY = 0.5
"""The studio's secure delay (seconds): far shorter than a hand here."""

THINK = 1.0
"""How long the betting system takes over each decision (seconds)."""


async def _frames(url: str, into: list[tuple[float, dict[str, Any]]]) -> None:
    async with websockets.connect(url) as socket:
        async for text in socket:
            message = json.loads(text)
            if message.get("type") == "state":
                into.append((time.time(), message))


def _results(recorder: Recorder) -> dict[str, float]:
    """``round -> journalled at`` of each round's result or void (``results`` topic)."""
    ends: dict[str, float] = {}
    for _, topic, body in recorder.messages:
        if topic.endswith(f"{TABLE}/results") and not body.get("replayed"):
            ends.setdefault(body["round"], _epoch(body["at"]))
    return ends


async def test_hole_cards_wait_for_the_result_when_decisions_outlast_the_delay(browser, tmp_path):
    with acl_broker(tmp_path / "broker") as broker:
        url = f"mqtt://127.0.0.1:{broker.port}"
        settings = make_studio_settings(
            url,
            tables=[TABLE],
            mqtt={"username": "viewer", "password": ROLE_PASSWORDS["viewer"]},
            secure={
                "delay_seconds": DELAY,
                "username": "stream",
                "password": ROLE_PASSWORDS["stream"],
            },
        )
        recorder = Recorder(broker.port)
        frames: list[tuple[float, dict[str, Any]]] = []
        async with asyncio.TaskGroup() as group, running_studio(settings) as address:
            tasks = [group.create_task(recorder.run(), name="recorder")]
            async with asyncio.timeout(10):
                await recorder.ready.wait()
            ws = address.url.replace("http", "ws")
            tasks.append(
                group.create_task(
                    _frames(f"{ws}/ws/tables/{TABLE}/secure-delay", frames), name="ws-secure"
                )
            )
            page = await browser.new_page(viewport={"width": 1920, "height": 1080})
            await page.goto(f"{address.url}/tables/{TABLE}/overlay?mode=secure-delay")
            await page.evaluate(OBSERVE_CARDS)
            async with running_table(
                url,
                tmp_path / "j.sqlite",
                table_id=TABLE,
                game="texas-holdem",
                sim=Simulation(seed=11, deal_delay=0.05),
                rounds=1,
                game_options={"seats": 2, "action_seconds": 10, "equity_samples": 1000},
                betting={
                    "username": "betting",
                    "password": ROLE_PASSWORDS["betting"],
                    "think_seconds": THINK,
                },
                mqtt={"username": f"table-{TABLE}", "password": ROLE_PASSWORDS[f"table-{TABLE}"]},
            ) as played:
                shot = False
                async with asyncio.timeout(180):
                    while not played.done():
                        await asyncio.sleep(0.1)
                        if not shot and recorder.hidden():
                            await asyncio.sleep(DELAY + 1.0)  # past the delay, hand not over
                            await page.screenshot(
                                path=artifacts_dir() / "overlay-secure-delay-held.png",
                                omit_background=True,
                            )
                            shot = True
                    played.result()
            await asyncio.sleep(DELAY + 1.0)  # the delayed floor catches up
            shown = await page.evaluate("window.__cards")
            await page.screenshot(
                path=artifacts_dir() / "overlay-secure-delay-after.png", omit_background=True
            )
            for task in tasks:
                task.cancel()

    hidden = recorder.hidden()
    ends = _results(recorder)
    assert hidden and ends, "the table dealt no hidden card or had no result"
    for round_id, slot, card, journalled in hidden:
        ended = ends[round_id]
        assert ended - journalled > 2 * DELAY, "the hand did not outlast the delay"
        token = _token(card)
        on_socket = [
            at
            for at, message in frames
            if message["view"]["round"]["id"] == round_id
            and token.search(json.dumps(message["view"]["round"]["cards"]))
        ]
        assert on_socket, f"{card} ({slot}) never reached the secure-delay socket"
        assert min(on_socket) >= ended, f"{card} on the secure socket before the result"
        assert min(on_socket) >= journalled + DELAY
        on_page = [s["at"] / 1000 for s in shown if s["round"] == round_id and s["slot"] == slot]
        assert on_page, f"{card} never shown on the secure-delay overlay"
        assert min(on_page) >= ended, f"{card} on the secure-delay overlay before the result"
    for round_id, ended in ends.items():
        equities = [
            at
            for at, message in frames
            if message["view"]["round"]["id"] == round_id
            and message["view"]["round"].get("secure_equity")
        ]
        assert equities, "the secure equities never reached the secure-delay socket"
        assert min(equities) >= ended, "a secure equity before the result"
        # Everything else keeps its plain delay: the hand is followed while it is played.
        dealing = [
            at
            for at, message in frames
            if message["view"]["round"]["id"] == round_id
            and message["view"]["round"]["state"] == "dealing"
            and any(c["face"] == "hidden" for c in message["view"]["round"]["cards"])
        ]
        assert dealing and min(dealing) < ended - DELAY, "the public facts were held too"
