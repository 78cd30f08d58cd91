"""The pit console in a real headless Chromium, against a simulated table on a real Mosquitto.

The broker runs the committed ACL (``config/mosquitto/acl``): the console connects with the
``pitboss`` credential, as in production. The table (``run_table`` in-process, the scanner
simulator on a real pty) has its scanner cable pulled at the 4th card, so the round halts
after ``device_halt_seconds``; the pit boss voids it from the page. The betting system's
credential watches the table's public topics and the stream credential its ``secure/`` ones.

Screenshots go to ``$TABLECTL_ARTIFACTS`` or ``tests/artifacts/``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from controller.journal import Journal
from controller.recall import recall_round
from controller.studio.pit import build_pit_app
from controller.studio.pit.console import ActionRequest
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.runner import serving
from controller.studio.pit.settings import PitSettings, pit_settings
from simulators.scanner import CardFault, FaultPlan
from simulators.table import Simulation
from tests.integration._live_helpers import TABLE, Live, Peer, acl_broker, live_table
from tests.integration._secure_broker import ROLE_PASSWORDS, SecureBroker
from tests.support.browser import artifacts_dir
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto

pytestmark = [
    pytest.mark.hil,
    pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING),
]

CARDS = ["As", "Kd", "Ah", "Kc", "Ad", "Kh"]
FAST = {"n": 2**10, "r": 8, "p": 1}
REASON = "scanner cable pulled at B2"
BROWSER_SECONDS = 20_000
"""Milliseconds a page expectation may wait (a halt takes a few seconds on a loaded box)."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SecureBroker]:
    with acl_broker(tmp_path / "broker") as running:
        yield running


def console_settings(broker: SecureBroker, **overrides: Any) -> PitSettings:
    return pit_settings(
        {
            "users": [
                {
                    "name": "alice",
                    "role": "pitboss",
                    "password_hash": hash_password("pw-a", **FAST),
                },
                {"name": "sam", "role": "observer", "password_hash": hash_password("pw-s", **FAST)},
            ],
            "session_secret": "s" * 40,
            "mqtt": {
                "urls": [f"mqtt://127.0.0.1:{broker.port}"],
                "username": "pitboss",
                "password": ROLE_PASSWORDS["pitboss"],
                "reconnect_min_seconds": 0.05,
                "reconnect_max_seconds": 0.5,
            },
            "tables": [TABLE],
            "command_timeout": 10,
            "login": {"failure_delay_seconds": 0.2},
            **overrides,
        }
    )


async def sign_in(page: Page, url: str, user: str, password: str) -> None:
    await page.goto(url + "/")
    await page.fill("#username", user)
    await page.fill("#password", password)
    await page.click("#sign-in")


async def shot(page: Page, name: str) -> None:
    await page.screenshot(path=str(artifacts_dir() / f"pit-{name}.png"), full_page=True)


def _frames(page: Page) -> list[str]:
    """Every WebSocket frame the page receives, as text."""
    frames: list[str] = []

    def socket(ws: Any) -> None:
        ws.on("framereceived", lambda payload: frames.append(str(payload)))

    page.on("websocket", socket)
    return frames


@asynccontextmanager
async def _stream_peer(broker: SecureBroker) -> AsyncIterator[Peer]:
    peer = Peer(broker, "stream")
    task = asyncio.create_task(peer.run(), name="peer-stream")
    try:
        async with asyncio.timeout(10):
            await peer.ready.wait()
        yield peer
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def _table(broker: SecureBroker, tmp_path: Path, users: tuple[str, ...] = ("betting",)) -> Any:
    # The scanner's cable is out 6 s: long enough for the page to show it lost, and for the
    # test to open its detail and read "state: lost", under a full suite's load (2.5 s was
    # not: the scanner was back before the detail was read).
    faults = FaultPlan(script=(CardFault(at=3, kind="unplug", seconds=6.0),))
    sim = Simulation(cards=tuple(CARDS), deal_delay=0.0, faults=faults)
    return live_table(
        broker,
        "teen-patti-20-20",
        sim,
        tmp_path / "j.sqlite",
        rounds=1,
        users=users,
        round_settings={"device_halt_seconds": 0.5, "pause_seconds": 8.0},
        driver={"backoff_min": 0.05, "backoff_max": 0.25},
    )


WIRE = "table-tp-01"
"""A credential that reads the table's whole tree, cmd/ included: it watches what is sent."""


def _sent(live: Live, action: str) -> list[dict[str, Any]]:
    """The pit commands ``action`` published on the broker (as the table's own user reads)."""
    return [m.body for m in live[WIRE].on(f"cmd/pit/{action}") if isinstance(m.body, dict)]


async def _device_in_words(page: Page) -> None:
    """The scanner's state in words, its raw detail behind a click, the halt acknowledged."""
    card = page.locator(f"#card-{TABLE}")
    device = card.locator("[data-role=device]").first
    await expect(device.locator("summary")).to_contain_text(
        "card scanner disconnected", timeout=BROWSER_SECONDS
    )
    words = (await device.locator("summary").text_content()) or ""
    assert "serial" not in words and "(" not in words and "lost" not in words, words
    detail = device.locator("[data-role=device-detail]")
    await expect(detail).to_be_hidden()
    await device.locator("summary").click()
    await expect(detail).to_be_visible()
    await expect(detail).to_contain_text("state: lost")


async def _acknowledge_the_halt(page: Page, live: Live) -> int:
    halt = page.locator("#alerts [data-role=alert][data-kind=round_halted]")
    await expect(halt).to_contain_text("Round halted", timeout=BROWSER_SECONDS)
    seq = int((await halt.get_attribute("data-seq")) or 0)
    await halt.locator("[data-role=ack]").click()
    await expect(halt.locator("[data-role=ack-by]")).to_contain_text(
        "acknowledged by alice at", timeout=BROWSER_SECONDS
    )
    await expect(page.locator(f"#card-{TABLE} [data-role=answer]")).to_contain_text(
        "recorded that you acknowledged the alert"
    )
    assert [b.get("alert_seq") for b in _sent(live, "ack")] == [seq]
    return seq


async def _void_from_the_page(page: Page, live: Live) -> dict[str, Any]:
    """Halted on the page → Void asks first (nothing sent) → confirmed with a reason."""
    card = page.locator(f"#card-{TABLE}")
    await expect(card.locator(".halted-badge")).to_be_visible(timeout=BROWSER_SECONDS)
    await shot(page, "halted")
    await page.set_viewport_size({"width": 1366, "height": 768})
    await shot(page, "halted-1366")
    await page.set_viewport_size({"width": 1920, "height": 1080})
    round_id = (await card.locator(".round").text_content()) or ""
    dialog = page.locator("#confirm")
    await card.locator("button.void").click()
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text(f"Table {TABLE}, round {round_id}")
    await expect(dialog.locator("[data-role=confirm-go]")).to_be_disabled()  # no reason yet
    await shot(page, "void-confirm")
    await dialog.locator("[data-role=confirm-cancel]").click()
    await expect(dialog).to_be_hidden()
    await asyncio.sleep(1.0)  # anything sent would have reached the broker by now
    assert _sent(live, "void") == [], "Void published before the confirmation"
    await card.locator("button.void").click()
    await dialog.locator("[data-role=confirm-reason]").fill(REASON)
    assert _sent(live, "void") == []
    await dialog.locator("[data-role=confirm-go]").dblclick()
    answer = card.locator(".answer")
    await expect(answer).to_have_class("answer accepted", timeout=BROWSER_SECONDS)
    await expect(answer.locator("[data-role=answer-words]")).to_have_text(
        f"Round {round_id} at table {TABLE} voided: every bet is refunded."
    )
    # The second click of the double click reached nothing under the closed dialog.
    assert await page.evaluate("String(getSelection())") == ""
    await expect(card.locator("[data-role=headline]")).to_have_text(
        "Round 1: voided by the pit", timeout=BROWSER_SECONDS
    )
    await expect(card.locator(".state")).to_have_text("voided", timeout=BROWSER_SECONDS)
    await shot(page, "voided")
    _, voided = await live["betting"].wait_event("round_voided")
    return {"round": round_id, "voided": voided}


async def _replay_the_round(page: Page, live: Live, round_id: str) -> None:
    card = page.locator(f"#card-{TABLE}")
    await card.locator("[data-role=replay-round]").fill(round_id)
    await page.wait_for_timeout(600)  # a person's next click (the page ignores 0.5 s of clicks
    # after a confirmation: the second click of a double click)
    await card.locator("[data-role=replay]").click()
    dialog = page.locator("#confirm")
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text(f"round {round_id}")
    await dialog.locator("[data-role=confirm-go]").click()
    answer = card.locator("[data-role=answer-words]")
    await expect(answer).to_contain_text(
        f"Table {TABLE} re-sent 1 result message of round {round_id}.", timeout=BROWSER_SECONDS
    )
    (sent,) = _sent(live, "replay")
    seqs = [
        m.seq
        for m in live["betting"].events()
        if m.seq is not None and m.body and m.body.get("round") == round_id
    ]
    assert (sent["round"], sent["from_seq"], sent["to_seq"]) == (round_id, min(seqs), max(seqs))


def _secure_void_reasons(messages: list[Any]) -> list[str]:
    """The reasons of the ``round_voided`` entries on ``secure/events``."""
    full = [json.loads(m.raw) for m in messages if m.topic.endswith("/secure/events")]
    return [b["data"]["reason"] for b in full if b.get("kind") == "round_voided"]


async def _recall_drawn(page: Page, round_id: str) -> None:
    """Recall from what the console saw (no archive here): drawn, with the pit's actions."""
    await page.fill("#recall-round", round_id)
    await page.click("#recall-go")
    recalled = page.locator("[data-role=recalled]")
    await expect(recalled.locator("[data-role=recall-outcome]")).to_contain_text(
        "voided: voided by the pit"
    )
    dealt = recalled.locator("[data-role=recall-hand] [data-role=card]")
    await expect(dealt).to_have_count(3)  # A1 B1 A2: the scanner went at the 4th
    # by hand: A has the 1st and 3rd card, B the 2nd
    assert await dealt.evaluate_all("cs => cs.map(c => c.dataset.card)") == ["As", "Ah", "Kd"]
    actions = recalled.locator("[data-role=pit-action]")
    await expect(actions).to_have_count(4)
    await expect(actions.nth(0)).to_contain_text("alice acknowledged the alert (entry ")
    await expect(actions.nth(1)).to_contain_text(f"alice voided the round ({REASON})")
    await expect(actions.nth(3)).to_contain_text("alice asked to resume the round: refused (")
    assert await actions.evaluate_all("xs => xs.map(x => x.dataset.action)") == [
        "ack",
        "void",
        "replay",
        "resume",
    ]
    await expect(page.locator("#recall-text")).to_contain_text("voided by the pit")
    await expect(page.locator("[data-role=signature]")).to_have_text(
        re.compile(r"^the void \(entry \d+\): not signed$")
    )
    await shot(page, "recall")
    await page.set_viewport_size({"width": 1366, "height": 768})
    await shot(page, "recall-1366")


def _journalled(journal_path: Path, round_id: str, acked: int) -> None:
    """Every pit action journalled by the table with the user's name; recall lists them."""
    with Journal.open_readonly(journal_path) as journal:
        received = [e.body for e in journal.entries() if e.kind == "command_received"]
        record = recall_round(journal, round_id)
    void_bodies = [b for b in received if b["name"] == "void"]
    assert len(void_bodies) == 1
    assert void_bodies[0]["role"] == "pit"
    assert void_bodies[0]["data"] == {"reason": REASON, "operator": "alice"}
    assert void_bodies[0]["command_id"].startswith("void-alice-")
    resumes = [b for b in received if b["name"] == "resume"]
    assert [b["data"] for b in resumes] == [{"operator": "alice"}]
    acks = [b for b in received if b["name"] == "ack"]
    assert [(b["round"], b["data"]) for b in acks] == [
        (round_id, {"alert_seq": acked, "operator": "alice"})
    ]
    assert [(a.name, a.operator, a.accepted) for a in record.pit_actions] == [
        ("ack", "alice", True),
        ("void", "alice", True),
        ("replay", "alice", True),
        ("resume", "alice", False),
    ]
    assert "pit actions" in record.to_text() and "void by alice" in record.to_text()


async def _resume_refused(page: Page, round_id: str) -> None:
    """A pit action on the finished round: confirmed, then the table's refusal in words."""
    card = page.locator(f"#card-{TABLE}")
    await page.wait_for_timeout(600)
    await card.locator("button.resume").click()
    await expect(page.locator("#confirm")).to_be_visible()
    await expect(page.locator("#confirm")).to_contain_text(round_id)
    await page.locator("#confirm [data-role=confirm-go]").click()
    answer = card.locator(".answer")
    await expect(answer).to_have_class("answer refused", timeout=BROWSER_SECONDS)
    await expect(answer.locator("[data-role=answer-words]")).to_contain_text(
        f"Table {TABLE} refused to resume round {round_id}: "
    )
    await expect(answer.locator("[data-role=answer-detail]")).to_contain_text(
        "REFUSED resume resume-alice-"
    )
    await shot(page, "refused")


async def test_the_pit_boss_voids_a_halted_round_from_the_page(broker, tmp_path, browser):
    async with (
        serving(build_pit_app(console_settings(broker))) as url,
        _table(broker, tmp_path, users=("betting", WIRE)) as live,
    ):
        page = await browser.new_page(viewport={"width": 1920, "height": 1080})
        frames = _frames(page)
        async with _stream_peer(broker) as stream:
            await sign_in(page, url, "alice", "not her password")
            await expect(page.locator("#login-error")).to_have_text("wrong user name or password")
            await shot(page, "wrong-login")
            await sign_in(page, url, "alice", "pw-a")
            card = page.locator(f"#card-{TABLE}")
            await expect(card.locator(".online")).to_have_text("ONLINE", timeout=BROWSER_SECONDS)
            await expect(page.locator("#broker")).to_have_text("connected")
            await _device_in_words(page)
            acked = await _acknowledge_the_halt(page, live)
            # The scanner comes back: its alert is resolved (listed under "Resolved").
            await expect(card.locator("[data-role=device] summary").first).to_contain_text(
                "reconnected after", timeout=BROWSER_SECONDS
            )
            resolved = page.locator("#resolved [data-kind=device_status]")
            await expect(resolved).to_contain_text("resolved: card scanner reconnected")
            await expect(page.locator("#alerts [data-kind=device_status]")).to_have_count(0)
            voided = await _void_from_the_page(page, live)
            # The void ends the halt: its alert leaves the open list, acknowledged and resolved.
            await expect(page.locator("#alerts [data-kind=round_halted]")).to_have_count(0)
            await expect(page.locator("#resolved [data-kind=round_halted]")).to_contain_text(
                "round voided"
            )
            await _replay_the_round(page, live, voided["round"])

            await _resume_refused(page, voided["round"])

            # The table stops after its one round: offline on the page.
            await expect(card.locator(".online")).to_contain_text(
                "OFFLINE", timeout=BROWSER_SECONDS
            )
            await shot(page, "offline")

            await _recall_drawn(page, voided["round"])
            await live.finished()
            secure = list(stream.messages)

    # The table published the void once: the public phrase on events, the pit boss named on
    # secure/events only (docs/mqtt.md, "Public reasons").
    body = voided["voided"].body
    assert body["round"] == voided["round"]
    assert body["data"]["reason"] == "voided by the pit"
    assert _secure_void_reasons(secure) == [f"voided by the pit boss (alice): {REASON}"]
    voids = [m for m in live["betting"].events("command_received") if m.data["name"] == "void"]
    assert len(voids) == 1, "two clicks, one command"
    _journalled(tmp_path / "j.sqlite", voided["round"], acked)

    # On the wire: the page never received anything from a secure/ topic.
    assert frames, "the page's WebSocket received frames"
    assert not [f for f in frames if "/secure/" in f]
    secure_payloads = [m.raw.decode() for m in secure if "/secure/" in m.topic]
    assert secure_payloads, "the stream credential did see secure messages (the check is real)"
    for payload in secure_payloads:
        secure_body = json.loads(payload)
        assert not [f for f in frames if payload in f]
        if secure_body.get("kind") == "command_received":
            # The full command (its data) is secure; the page has its public view only.
            assert not [f for f in frames if '"data": {"reason"' in f]


async def test_a_click_twice_is_one_command_even_at_the_server(broker, tmp_path):
    settings = console_settings(broker)
    app = build_pit_app(settings)
    console = app.state.pit_console
    alice = settings.user("alice")
    assert alice is not None
    async with serving(app), _table(broker, tmp_path) as live:
        async with asyncio.timeout(10):
            await console.connected.wait()
        await live["betting"].wait_event("round_opened")
        request = ActionRequest(table=TABLE, name="resume", nonce="same-click-1")
        first, second = await asyncio.gather(
            console.act(alice, request), console.act(alice, request)
        )
        third = await console.act(alice, request)
        # A different action after them: once it is answered, any repeat sent before it (on
        # the same connection, in order) would have been received by the table too.
        sentinel = ActionRequest(table=TABLE, name="resume", nonce="sentinel-2")
        assert (await console.act(alice, sentinel)).status == "refused"
        await live["betting"].wait_event(
            "command_answered", where=lambda d: d["command_id"] == "resume-alice-sentinel-2"
        )
        # Replay from a seq, as the page sends it: table-wide, answered with the count.
        replay = ActionRequest(table=TABLE, name="replay", nonce="replay-one-1", from_seq=1)
        replayed = await console.act(alice, replay)
        assert (replayed.status, replayed.command_id) == ("accepted", "replay-alice-replay-one-1")
        assert replayed.text.startswith("ACCEPTED replay replay-alice-replay-one-1")
        assert '"resent": 0' in replayed.text, "no result in the journal yet"
    assert (
        first.command_id == second.command_id == third.command_id == ("resume-alice-same-click-1")
    )
    assert {first.status, second.status, third.status} == {"refused"}
    assert first.text == second.text == third.text
    assert [first.repeated, second.repeated, third.repeated].count(False) == 1
    received = [m.data["command_id"] for m in live["betting"].events("command_received")]
    assert received[:2] == ["resume-alice-same-click-1", "resume-alice-sentinel-2"]


async def test_the_page_shows_a_lost_connection_and_recovers_by_itself(broker, tmp_path, browser):
    settings = console_settings(broker)
    app = build_pit_app(settings)
    async with serving(app) as url:
        page = await browser.new_page()
        await sign_in(page, url, "sam", "pw-s")
        await expect(page.locator("#broker")).to_have_text("connected", timeout=BROWSER_SECONDS)
        assert await page.locator("button.void").count() == 0, "an observer has no actions"
        # The broker restarts: the page says so, then the console reconnects and re-reads.
        await asyncio.to_thread(broker.stop)
        await expect(page.locator("#broker")).to_contain_text(
            "DISCONNECTED", timeout=BROWSER_SECONDS
        )
        await shot(page, "broker-lost")
        await asyncio.to_thread(broker.start)
        await expect(page.locator("#broker")).to_have_text("connected", timeout=BROWSER_SECONDS)
    # The console's server went away: the page shows the lost connection...
    await expect(page.locator("#lost")).to_be_visible(timeout=BROWSER_SECONDS)
    await shot(page, "console-lost")
    port = int(url.rsplit(":", 1)[1])
    # ... and, once a console answers on the same address, reconnects and reads the floor.
    async with serving(build_pit_app(settings), port=port):
        await expect(page.locator("#lost")).to_be_hidden(timeout=BROWSER_SECONDS)
        await expect(page.locator(f"#card-{TABLE}")).to_be_visible()
