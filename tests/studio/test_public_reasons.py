"""The pit boss's words and name stay off the public feed, the dealer screen and the overlay.

A table halts (the scanner's cable pulled); the pit boss resumes it and then voids the round,
each command naming the operator, the void with a free-text reason. Every public message of
the table (``events``, ``results``, the retained ``round``), every frame of a public page
socket, and what the dealer screen and the public overlay show carry only the fixed public
phrases ("card reader lost", "pit", "voided by the pit"); the full entries, words and name,
are on ``secure/events``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import aiomqtt
import pytest

from simulators.faults import CardFault, FaultPlan
from simulators.table import Simulation
from tests.studio._harness import (
    follow_page_socket,
    make_studio_settings,
    running_studio,
    running_table,
    stop_readers,
    wait_for,
)
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil

OPERATOR = "Marguerite Okonkwo"
WORDS = "dealer Bartholomew flashed the hole card"


async def _record(host: str, port: int, table: str, into: list[tuple[str, bytes]]) -> None:
    async with aiomqtt.Client(host, port, identifier=f"rec-{uuid.uuid4().hex[:6]}") as client:
        await client.subscribe(f"tables/{table}/#", qos=1)
        async for message in client.messages:
            into.append((str(message.topic), bytes(message.payload or b"")))


async def _command(host: str, port: int, table: str, name: str, body: dict[str, Any]) -> None:
    command = {"command_id": f"{name}-{uuid.uuid4().hex[:8]}", **body}
    async with aiomqtt.Client(host, port) as client:
        await client.publish(f"tables/{table}/cmd/pit/{name}", json.dumps(command), qos=1)


async def test_a_void_and_a_resume_show_only_public_reasons(mosquitto, browser, tmp_path):
    table = "pr-1"
    faults = FaultPlan(script=(CardFault(at=3, kind="unplug", seconds=1.0),))
    sim = Simulation(seed=3, deal_delay=0.3, faults=faults)
    messages: list[tuple[str, bytes]] = []
    frames: list[str] = []
    settings = make_studio_settings(mosquitto.url, tables=[table])
    async with asyncio.TaskGroup() as group, running_studio(settings) as address:
        tasks = [
            group.create_task(_record(mosquitto.host, mosquitto.port, table, messages)),
            group.create_task(
                follow_page_socket(
                    address.url.replace("http", "ws") + f"/ws/tables/{table}/public", frames.append
                )
            ),
        ]
        dealer = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await dealer.goto(f"{address.url}/tables/{table}/dealer")
        overlay = await browser.new_page(viewport={"width": 1920, "height": 1080})
        await overlay.goto(f"{address.url}/tables/{table}/overlay")
        async with running_table(
            mosquitto.url,
            tmp_path / "j.sqlite",
            table_id=table,
            sim=sim,
            round_settings={"device_halt_seconds": 0.3},
        ):
            await wait_for(lambda: dealer.locator("#halted").is_visible(), 30, "HALTED")
            halted = await dealer.locator("#halted").inner_text()
            assert halted.endswith("card reader lost"), halted
            round_id = await dealer.evaluate("document.body.dataset.round")
            await wait_for(lambda: dealer.locator("#device").is_hidden(), 30, "the scanner back")
            host, port = mosquitto.host, mosquitto.port
            await _command(host, port, table, "resume", {"round": round_id, "operator": OPERATOR})
            await wait_for(lambda: dealer.locator("#halted").is_hidden(), 20, "the halt ended")
            void = {"round": round_id, "reason": WORDS, "operator": OPERATOR}
            await _command(host, port, table, "void", void)
            await wait_for(lambda: dealer.locator("#result").is_visible(), 30, "the void")
            assert await dealer.locator("#result").inner_text() == "VOIDED: voided by the pit"
            await wait_for(lambda: overlay.locator("#result").is_visible(), 10, "the void")
            assert (
                await overlay.locator("#result").inner_text()
                == "Round void \u2014 all bets returned (voided by the pit)"
            )
            await dealer.screenshot(path=artifacts_dir() / "dealer-voided.png")
            await overlay.screenshot(
                path=artifacts_dir() / "overlay-voided.png", omit_background=True
            )
            shown = await dealer.content() + await overlay.content()
            await asyncio.sleep(0.5)
        await stop_readers(tasks)

    secret = ("Marguerite", "Okonkwo", "Bartholomew", "flashed")
    public = [(t, p) for t, p in messages if "/secure/" not in t and "/reply/" not in t]
    public = [(t, p) for t, p in public if "/cmd/" not in t]
    assert public and frames
    for topic, payload in public:
        assert not any(word.encode() in payload for word in secret), (topic, payload[:300])
    for text in frames:
        assert not any(word in text for word in secret), text[:300]
    assert not any(word in shown for word in secret)
    secure = [json.loads(p) for t, p in messages if t.endswith("/secure/events")]
    full = {m["kind"]: m["data"] for m in secure}
    assert full["round_voided"]["reason"] == f"voided by the pit boss ({OPERATOR}): {WORDS}"
    assert full["round_resumed"]["by"] == f"pit ({OPERATOR})"
    events = [json.loads(p) for t, p in public if t.endswith(f"{table}/events")]
    by_kind = {m["kind"]: m["data"] for m in events}
    assert by_kind["round_voided"]["reason"] == "voided by the pit"
    assert by_kind["round_resumed"]["by"] == "pit"
    assert by_kind["round_halted"]["reason"] == "card reader lost"
    assert by_kind["pit_alert"]["reason"] == "round halted: pit boss needed"
