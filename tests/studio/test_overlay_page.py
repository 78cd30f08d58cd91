"""The stream overlay, on the wire and in Chromium, on a broker with the studio's ACLs.

A Hold'em table (hidden hole cards, secure equities) plays on a Mosquitto with the committed
ACL file: the studio connects as ``viewer`` (its public feed) and as ``stream`` (the secure
role, for secure-delay mode). The test reads the frames of a public and of a secure-delay
socket itself, and logs every card value two overlays in Chromium show (a MutationObserver),
then checks against the table's own messages:

* a public frame or a public overlay shows a hidden card only after the entry that revealed
  it (``cards_revealed`` or the result) was journalled;
* no public frame carries a secure equity or a secure card, and the public overlay shows no
  win probability (Hold'em's are secure) while the secure-delay overlay does;
* the secure-delay socket and overlay show each hidden card, never before the delay has
  passed since its secure entry was journalled.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from datetime import datetime
from typing import Any

import aiomqtt
import pytest

from simulators.table import Simulation
from tests.integration._live_helpers import TABLE, acl_broker
from tests.integration._secure_broker import ROLE_PASSWORDS
from tests.studio._harness import (
    OBSERVE_CARDS,
    follow_page_socket,
    make_studio_settings,
    running_studio,
    running_table,
    stop_readers,
)
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil

DELAY = 1.5
"""The secure delay of this test's studio (seconds)."""


def _epoch(at: str) -> float:
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


class Recorder:
    """The stream role's own subscription: every message of the table, with its arrival."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.messages: list[tuple[float, str, dict[str, Any]]] = []
        self.ready = asyncio.Event()

    async def run(self) -> None:
        async with aiomqtt.Client(
            "127.0.0.1",
            self.port,
            username="stream",
            password=ROLE_PASSWORDS["stream"],
            identifier=f"recorder-{uuid.uuid4().hex[:8]}",
            protocol=aiomqtt.ProtocolVersion.V5,
        ) as client:
            await client.subscribe(f"tables/{TABLE}/#", qos=1)
            self.ready.set()
            async for message in client.messages:
                body = json.loads(message.payload) if message.payload else {}
                self.messages.append((time.time(), str(message.topic), body))

    def hidden(self) -> list[tuple[str, str, str, float]]:
        """``(round, slot, card, journalled at)`` of every hidden card (secure/events)."""
        found = []
        for _, topic, body in self.messages:
            if topic.endswith("/secure/events") and body.get("kind") == "card_dealt":
                data = body["data"]
                if data.get("face") == "hidden" and data.get("card"):
                    found.append((body["round"], data["slot"], data["card"], _epoch(body["at"])))
        return found

    def reveals(self) -> dict[tuple[str, str], float]:
        """``(round, card) -> journalled at`` of the public entry that revealed the card."""
        shown: dict[tuple[str, str], float] = {}
        for _, topic, body in self.messages:
            if not topic.endswith(f"{TABLE}/events"):
                continue
            data = body.get("data") or {}
            cards: list[str] = []
            if body.get("kind") == "cards_revealed":
                cards = list(data.get("cards") or [])
            elif body.get("kind") == "round_result":
                cards = [c for hand in (data.get("cards") or {}).values() for c in hand]
            for card in cards:
                shown.setdefault((body["round"], card), _epoch(body["at"]))
        return shown


async def _frames(url: str, into: list[tuple[float, str]]) -> None:
    await follow_page_socket(url, lambda text: into.append((time.time(), text)))


def _token(card: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(card)}(?![A-Za-z0-9])")


def _round_of(text: str) -> str | None:
    message = json.loads(text)
    return message["view"]["round"]["id"] if message.get("type") == "state" else None


async def test_overlay_hides_hidden_cards_until_reveal_and_delays_the_secure_feed(
    browser, tmp_path
):
    shots = artifacts_dir()
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
        public_frames: list[tuple[float, str]] = []
        secure_frames: list[tuple[float, str]] = []
        async with asyncio.TaskGroup() as group, running_studio(settings) as address:
            tasks = [group.create_task(recorder.run(), name="recorder")]
            async with asyncio.timeout(10):
                await recorder.ready.wait()
            ws = address.url.replace("http", "ws")
            tasks.append(
                group.create_task(
                    _frames(f"{ws}/ws/tables/{TABLE}/public", public_frames), name="ws-public"
                )
            )
            tasks.append(
                group.create_task(
                    _frames(f"{ws}/ws/tables/{TABLE}/secure-delay", secure_frames),
                    name="ws-secure",
                )
            )
            public = await browser.new_page(viewport={"width": 1920, "height": 1080})
            await public.goto(f"{address.url}/tables/{TABLE}/overlay")
            await public.evaluate(OBSERVE_CARDS)
            secure = await browser.new_page(viewport={"width": 1920, "height": 1080})
            await secure.goto(f"{address.url}/tables/{TABLE}/overlay?mode=secure-delay")
            await secure.evaluate(OBSERVE_CARDS)
            async with running_table(
                url,
                tmp_path / "j.sqlite",
                table_id=TABLE,
                game="texas-holdem",
                sim=Simulation(seed=11, deal_delay=0.05),
                rounds=2,
                game_options={"seats": 2, "action_seconds": 3, "equity_samples": 1000},
                betting={"username": "betting", "password": ROLE_PASSWORDS["betting"]},
                mqtt={"username": f"table-{TABLE}", "password": ROLE_PASSWORDS[f"table-{TABLE}"]},
            ) as played:
                shot_taken = False
                async with asyncio.timeout(120):
                    while not played.done():
                        await asyncio.sleep(0.1)
                        if not shot_taken and recorder.hidden():
                            await asyncio.sleep(DELAY + 0.5)
                            await public.screenshot(
                                path=shots / "overlay-public.png", omit_background=True
                            )
                            await secure.screenshot(
                                path=shots / "overlay-secure-delay.png", omit_background=True
                            )
                            shot_taken = True
                    played.result()
            await asyncio.sleep(DELAY + 1.0)  # the delayed floor catches up
            public_log = await public.evaluate("window.__cards")
            secure_log = await secure.evaluate("window.__cards")
            # Hold'em's win probabilities are secure (computed from hole cards): only the
            # secure-delay overlay shows them.
            assert await public.evaluate("window.__equity") == []
            assert "preflop" in await secure.evaluate("window.__equity")
            await stop_readers(tasks)

    hidden = recorder.hidden()
    assert hidden, "the table dealt no hidden card"
    _check_public(hidden, recorder.reveals(), public_frames, public_log)
    _check_secure(hidden, secure_frames, secure_log)


def _check_public(
    hidden: list[tuple[str, str, str, float]],
    reveals: dict[tuple[str, str], float],
    frames: list[tuple[float, str]],
    log: list[dict[str, Any]],
) -> None:
    """On the wire and in the page, a hidden card only after its reveal; nothing secure."""
    for round_id, slot, card, _ in hidden:
        revealed = reveals.get((round_id, card), float("inf"))
        token = _token(card)
        for at, text in frames:
            if _round_of(text) == round_id and token.search(text):
                assert at >= revealed, f"{card} ({slot}) on the public socket before its reveal"
        for seen in log:
            if seen["round"] == round_id and seen["slot"] == slot:
                assert seen["at"] / 1000 >= revealed, f"{card} on the public overlay early"
    assert frames and not any("secure_equity" in text for _, text in frames)
    assert not any('"secure":true' in text for _, text in frames)


def _check_secure(
    hidden: list[tuple[str, str, str, float]],
    frames: list[tuple[float, str]],
    log: list[dict[str, Any]],
) -> None:
    """Secure-delay: every hidden card shown, and never before the delay."""
    for round_id, slot, card, journalled in hidden:
        token = _token(card)
        times = [at for at, text in frames if _round_of(text) == round_id and token.search(text)]
        assert times, f"{card} ({slot}) never reached the secure-delay socket"
        assert min(times) >= journalled + DELAY, f"{card} on the secure socket before the delay"
        shown = [s["at"] / 1000 for s in log if s["round"] == round_id and s["slot"] == slot]
        assert shown, f"{card} never shown on the secure-delay overlay"
        assert min(shown) >= journalled + DELAY, f"{card} on the secure-delay overlay early"
