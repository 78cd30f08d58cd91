"""MQTT-attached tag readers at a table, a real Mosquitto under them.

``run --simulate --profile mqtt-json``'s devices play a Teen Patti round on one simulated ESP32
reader a hand (``mqtt-reader://`` under ``[[devices]]``); hostile payloads on a reader topic
are journalled as statuses while the round goes on; the broker lost and back: the reader's
source says ``lost`` and ``recovered``, the card lying on the antenna through the outage is
not removed, and the next card is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from pathlib import Path

import aiomqtt
import pytest

from controller.app import run_table
from controller.checkconfig import check_device
from controller.errors import ConfigError
from controller.settings import load_settings
from drivers.json_readers import MqttReaderSpec
from drivers.reader_json import load_reader_codes
from drivers.source import (
    CardRead,
    CardRemoved,
    DeviceStatus,
    DriverSettings,
    Misread,
    Read,
    parse_url,
)
from drivers.supervisor import SupervisedCardSource
from simulators.json_reader import HOSTILE_PAYLOADS, JsonReaderSimulator
from simulators.table import Simulation, simulated_devices

SETTINGS = DriverSettings(
    open_timeout=2.0, read_timeout=0.05, heartbeat_timeout=0.5, backoff_min=0.05, backoff_max=0.2
)


def journal_rows(path: Path, kind: str) -> list[dict[str, object]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("select body from entries where kind = ? order by seq", (kind,))
        return [json.loads(body) for (body,) in rows]


async def test_run_simulate_mqtt_json_plays_a_round_on_a_reader_a_hand(mosquitto, tmp_path):
    """Two readers (Teen Patti's hands A and B), each its own topic and cue topic; the round
    deals every card once, each latched from the reader's repeats; hostile payloads published
    on a reader's topic meanwhile are refused, journalled as statuses, and change nothing."""
    sim = Simulation(seed=3, deal_delay=0.0, profile="mqtt-json", broker_urls=(mosquitto.url,))
    journal = tmp_path / "tp.sqlite"
    async with asyncio.timeout(60), simulated_devices("teen-patti-20-20", sim) as devices:
        readers = devices.settings["devices"]
        assert "mqtt" not in devices.settings  # the broker given is the table's
        assert [d["positions"] for d in readers] == [["A"], ["B"]]
        assert all(d["url"].startswith(f"mqtt-reader://{mosquitto.host}:") for d in readers)
        settings = load_settings(
            None,
            table_id="mj-1",
            game="teen-patti-20-20",
            devices=readers,
            mqtt={"urls": [mosquitto.url]},
            journal={"path": journal},
            rounds={"betting_seconds": 0.2, "pause_seconds": 0},
        )
        seat1_topic = readers[0]["url"].split("/", 3)[3].split("?")[0]

        async def hostile() -> None:
            async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
                for payload in HOSTILE_PAYLOADS:
                    await client.publish(seat1_topic, payload, qos=1)

        table = asyncio.create_task(run_table(settings, rounds=1))
        await asyncio.sleep(0.3)  # betting; then the cards
        await hostile()
        summaries = await table
    assert len(summaries) == 1
    dealt = journal_rows(journal, "card_dealt")
    cards = [row["card"] for row in dealt]
    assert len(cards) == len(set(cards)) == 6  # three cards a hand
    statuses = journal_rows(journal, "device_status")
    rejected = [s for s in statuses if s["state"] == "reader_rejected"]
    assert rejected, statuses
    assert all(seat1_topic in str(s["device"]) for s in rejected)
    codes = ("too_large", "too_deep", "not_utf8", "not_json", "not_object", "invalid")
    for status in rejected:
        assert str(status["detail"]).startswith("reader 'hand-A' (A1, A2, A3): ")
        assert any(f": {code}: " in str(status["detail"]) for code in codes)


async def _until(source: SupervisedCardSource, want: type, seen: list[Read]) -> Read:
    while True:
        read = await source.next_read()
        seen.append(read)
        if isinstance(read, Misread):
            await source.request_rescan("S0", "again")
        if isinstance(read, want):
            return read


REMOVE_AFTER = 1.0
"""The broker-outage test's latch removal time (seconds)."""


async def test_the_broker_lost_and_back_removes_nothing_and_loses_nothing(mosquitto):
    """A reader pad on a real Mosquitto that is stopped for longer than the latch's removal
    time and started again: ``lost`` then ``recovered`` (with the ``away`` rescan), the card
    lying on the pad all along is not removed by the outage, and the next card is read."""
    sim = JsonReaderSimulator(load_reader_codes(None), cards=["As", "Kd"], repeat=0.02)
    async with asyncio.timeout(30), sim.serve_mqtt(mosquitto.host, mosquitto.port, "t") as topics:
        topic, cmd = topics["reader-1"]
        url = f"mqtt-reader://{mosquitto.host}:{mosquitto.port}/{topic}?cmd={cmd}"
        # A removal time that outlasts the simulated reader's own reconnection after the
        # broker's (it retries every 0.1 s; on a loaded machine it came back more than 300 ms
        # after the source, whose latch then removed the As, silent meanwhile, and read it
        # again): what is tested is that the outage itself removes nothing.
        url += f"&place_after_ms=30&remove_after_ms={int(REMOVE_AFTER * 1000)}&keepalive=1"
        source = SupervisedCardSource(url, SETTINGS)
        await source.open()
        seen: list[Read] = []
        try:
            await source.expect(1, 0, "S0")
            first = await _until(source, CardRead, seen)
            assert isinstance(first, CardRead) and first.value == "As"
            await asyncio.to_thread(mosquitto.stop)
            lost = await _until(source, DeviceStatus, seen)
            assert isinstance(lost, DeviceStatus) and lost.state == "lost"
            await asyncio.sleep(2 * REMOVE_AFTER)  # twice the removal time without the broker
            await asyncio.to_thread(mosquitto.start)
            back = await _until(source, DeviceStatus, seen)
            assert isinstance(back, DeviceStatus) and back.state == "recovered"
            await asyncio.sleep(0.2)  # the reader is back too, repeating the As
            await source.expect(1, 1, "S1")
            second = await _until(source, CardRead, seen)
            assert isinstance(second, CardRead) and second.value == "Kd"
            removed = await _until(source, CardRemoved, seen)  # the As, lifted for the Kd
        finally:
            await source.close()
    assert isinstance(removed, CardRemoved) and removed.value == "As"
    assert removed.at > second.at  # not during the outage
    assert [r.cause for r in seen if isinstance(r, Misread)] == ["away"]
    assert [r.value for r in seen if isinstance(r, CardRead)] == ["As", "Kd"]
    assert sim.reader_stats.reconnects >= 1


async def test_check_config_checks_a_json_reader(mosquitto, tmp_path):
    """check-config: the broker connected and the topic subscribed (the deck named), a broker
    that is not there a FAIL, a code table that does not load a FAIL naming the file."""
    url = f"mqtt-reader://{mosquitto.host}:{mosquitto.port}/studio/readers/%23"
    ok = await check_device(url, DriverSettings(), 5.0)
    assert ok.verdict == "OK", ok.detail
    assert "reader topic subscribed" in ok.detail and "rfid-demo-deck" in ok.detail
    mosquitto.stop()
    down = await check_device(url, DriverSettings(open_timeout=1.0), 5.0)
    assert down.verdict == "FAIL" and "broker" in down.detail
    missing = await check_device(f"{url}?codes={tmp_path}/nope.toml", DriverSettings(), 5.0)
    assert missing.verdict == "FAIL" and "nope.toml" in missing.detail
    bad = await check_device("jsonl+serial:///dev/null?cues=2", DriverSettings(), 5.0)
    assert bad.verdict == "FAIL" and "cues is 0 or 1" in bad.detail


def test_a_table_config_with_a_bad_reader_deck_stops_at_start(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_settings(
            None,
            table_id="t",
            game="teen-patti-20-20",
            device={"url": f"mqtt-reader://broker/readers/+?codes={tmp_path}/missing.toml"},
        )
    assert "missing.toml" in str(caught.value) and "cannot read the file" in str(caught.value)


async def test_devices_lists_the_mqtt_readers_heard(mosquitto, capsys):
    """``tablectl devices --mqtt-readers``: each reader heard on the topic filter with the URL
    that reads it alone; a message that is no reader's counted, not listed; retained skipped."""
    import argparse

    from controller.cli.devices import run

    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish("studio/readers/old", msg_bytes("ghost", 1), qos=1, retain=True)
        args = argparse.Namespace(
            known_only=True,
            usb_only=True,
            mqtt_readers=f"mqtt-reader://{mosquitto.host}:{mosquitto.port}/studio/readers/%23",
            listen=1.5,
        )
        listing = asyncio.create_task(asyncio.to_thread(run, args))
        for seq in range(12):
            await asyncio.sleep(0.1)
            await client.publish("studio/readers/a", msg_bytes("seat 1", seq), qos=1)
            await client.publish("studio/readers/a", msg_bytes("seat-2", seq), qos=1)
            await client.publish("studio/readers/b", b"not a reader", qos=1)
        status = await listing
    out = capsys.readouterr().out
    assert status == 0
    port = f"{mosquitto.host}:{mosquitto.port}"
    assert f"reader   mqtt-reader://{port}/studio/readers/a?device=seat%201 " in out
    assert f"mqtt-reader://{port}/studio/readers/a?device=seat-2 " in out
    assert "1 tag(s) in" in out and "ghost" not in out
    assert "message(s) on" in out and "were no reader's" in out
    listed = parse_url(f"mqtt-reader://{port}/studio/readers/a?device=seat%201")
    assert isinstance(listed, MqttReaderSpec) and listed.device_id == "seat 1"


def msg_bytes(device: str, seq: int) -> bytes:
    return json.dumps({"device_id": device, "seq": seq, "card_uid": "04A2B3C4D5E6F7"}).encode()


async def test_the_readers_broker_lost_mid_round_the_round_waits_and_resumes(
    mosquitto, mosquitto_session, tmp_path
):
    """The readers publish on a broker of their own, stopped mid-round for longer than the
    removal time: both readers' ``lost`` and ``recovered`` are journalled, the round waits and
    then deals every card once."""
    sim = Simulation(seed=11, deal_delay=0.25, profile="mqtt-json", broker_urls=(mosquitto.url,))
    journal = tmp_path / "outage.sqlite"
    async with asyncio.timeout(60), simulated_devices("teen-patti-20-20", sim) as devices:
        settings = load_settings(
            None,
            table_id="mo-1",
            game="teen-patti-20-20",
            devices=devices.settings["devices"],
            mqtt={"urls": [mosquitto_session.url]},
            journal={"path": journal},
            rounds={"betting_seconds": 0.2, "pause_seconds": 0},
        )
        table = asyncio.create_task(run_table(settings, rounds=1))
        while not journal.exists() or not journal_rows(journal, "card_dealt"):
            await asyncio.sleep(0.05)
        await asyncio.to_thread(mosquitto.stop)
        await asyncio.sleep(1.5)
        await asyncio.to_thread(mosquitto.start)
        summaries = await table
    assert len(summaries) == 1
    cards = [row["card"] for row in journal_rows(journal, "card_dealt")]
    assert len(cards) == len(set(cards)) == 6
    states = [(str(s["device"]), s["state"]) for s in journal_rows(journal, "device_status")]
    for reader in devices.settings["devices"]:
        mine = [state for device, state in states if device == reader["url"]]
        assert mine[0] == "connected" and "lost" in mine, states
        assert mine.index("recovered") > mine.index("lost"), states
    with sqlite3.connect(journal) as db:
        rows = db.execute("select seq, kind, body from entries order by seq").fetchall()
    first_lost = min(seq for seq, kind, body in rows if '"lost"' in body)
    last_card = max(seq for seq, kind, body in rows if kind == "card_dealt")
    assert first_lost < last_card  # the outage came mid-round: cards were dealt after it


async def test_enrol_reads_a_deck_from_a_json_lines_reader(tmp_path, capsys):
    """``tablectl enrol --device jsonl+serial://...``: each card put on the reader when asked
    (cued as a JSON line), its UID latched once however often it is repeated, the card lifted
    as the next goes down (its removal ignored); the table written reads back as the deck."""
    from controller.cli.enrol import deck_cards, enrol_deck
    from drivers.profile import load_code_table

    deck = load_reader_codes(None)
    cards = deck_cards("standard")
    sim = JsonReaderSimulator(deck, cards=cards, deal_delay=0.0, repeat=0.01)
    out = tmp_path / "red-01.toml"
    async with asyncio.timeout(60), sim.serve_pty() as path:
        url = f"jsonl+serial://{path}?cues=1&place_after_ms=20&remove_after_ms=100"
        assert await enrol_deck(url, "standard", out, tag_timeout=None) == 0
    written = load_code_table(out)
    assert written.codes == {code: card for code, card in deck.codes.items() if card in cards}
    assert "[52/52] scan" in capsys.readouterr().out


async def test_a_readers_wifi_lost_is_a_lost_reader_and_removes_nothing(mosquitto):
    """``status=TOPIC``: the reader's ``offline`` (its Last Will) is ``lost`` for the table and
    stops the latch's time: the card on it, silent for three times the removal time, is not
    removed; ``online`` again is ``recovered`` (and the ``away`` rescan); the next card reads."""
    sim = JsonReaderSimulator(load_reader_codes(None), cards=["As", "Kd"], repeat=0.02)
    async with asyncio.timeout(30), sim.serve_mqtt(mosquitto.host, mosquitto.port, "w") as topics:
        topic, cmd = topics["reader-1"]
        url = f"mqtt-reader://{mosquitto.host}:{mosquitto.port}/{topic}?cmd={cmd}"
        url += f"&status={topic}/status&place_after_ms=30&remove_after_ms=300"
        source = SupervisedCardSource(url, SETTINGS)
        await source.open()
        seen: list[Read] = []
        try:
            await source.expect(1, 0, "S0")
            first = await _until(source, CardRead, seen)
            assert isinstance(first, CardRead) and first.value == "As"
            drop = asyncio.create_task(sim.wifi_down("reader-1", 1.0))
            lost = await _until(source, DeviceStatus, seen)
            assert isinstance(lost, DeviceStatus) and lost.state == "lost"
            assert "offline" in lost.detail
            back = await _until(source, DeviceStatus, seen)
            assert isinstance(back, DeviceStatus) and back.state == "recovered"
            await drop
            await source.expect(1, 1, "S1")
            second = await _until(source, CardRead, seen)
            assert isinstance(second, CardRead) and second.value == "Kd"
            removed = await _until(source, CardRemoved, seen)
        finally:
            await source.close()
    assert isinstance(removed, CardRemoved) and removed.value == "As"
    assert removed.at > second.at  # lifted for the Kd, not removed by the reader's silence
    assert [r.cause for r in seen if isinstance(r, Misread)] == ["away"]
    assert source.losses == 0  # the broker link never failed: the reader did


async def test_a_stall_of_the_table_process_removes_nothing():
    """The table's event loop held up for three removal times (``time.sleep``: nothing can be
    heard meanwhile) with a card lying on a JSON-lines reader: the stall counts as the link's
    outage, not the card's absence, so nothing is removed; the next card is read."""
    sim = JsonReaderSimulator(load_reader_codes(None), cards=["As", "Kd"], repeat=0.02)
    async with asyncio.timeout(30), sim.serve_pty() as path:
        url = f"jsonl+serial://{path}?cues=1&place_after_ms=30&remove_after_ms=300"
        source = SupervisedCardSource(url, SETTINGS)
        await source.open()
        seen: list[Read] = []
        try:
            await source.expect(1, 0, "S0")
            first = await _until(source, CardRead, seen)
            assert isinstance(first, CardRead) and first.value == "As"
            time.sleep(1.0)  # noqa: ASYNC251 (on purpose: the whole process held up)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.6):
                    await _until(source, CardRemoved, seen)
            assert not [r for r in seen if isinstance(r, CardRemoved)], seen
            await source.expect(1, 1, "S1")
            second = await _until(source, CardRead, seen)
            assert isinstance(second, CardRead) and second.value == "Kd"
        finally:
            await source.close()
