"""A multi-reader RFID table end to end, and the rescan after a line device comes back.

Readers speaking ``rfid-ntag`` byte for byte, each on its own real pty, bound to the hands of
Teen Patti (``[[devices]]``), read through ``profile+serial://`` under one supervisor each;
the orchestrator, the journal and a real Mosquitto. Then the line shoe with its cable pulled
as a card is read: the record is lost, and after ``recovered`` the table asks for the card
again (``rescan_requested``, cause ``away``) instead of waiting for ever.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from controller.app import run_table
from controller.errors import ConfigError
from controller.settings import load_settings
from drivers.profile import load_profile
from simulators.faults import FaultPlan
from simulators.line_device import LineDeviceSimulator
from simulators.multi_reader import MultiReaderSimulator
from simulators.table import Simulation, simulated_devices
from tests.integration.test_table_hil import Recorder, settings_for

READERS = {"seat-A": ("A1", "A2", "A3"), "seat-B": ("B1", "B2", "B3")}


def multi_settings(
    broker_url: str, table: str, journal: Path, devices: list[dict[str, Any]]
) -> Any:
    return load_settings(
        None,
        table_id=table,
        game="teen-patti-20-20",
        devices=devices,
        mqtt={"urls": [broker_url]},
        journal={"path": journal},
        rounds={"betting_seconds": 0.2, "pause_seconds": 0},
    )


async def test_a_card_on_the_wrong_reader_is_refused_journalled_and_rescanned_right(
    mosquitto, tmp_path
):
    script = ["As", "Kd", "Ah", "Kc", "Ad", "Kh"]
    # The 3rd card (Ah, for A2) is first put on seat B's reader.
    sim = MultiReaderSimulator(
        load_profile("rfid-ntag"), READERS, wrong_reader_at=frozenset({2}), cards=script,
        deal_delay=0.0,
    )  # fmt: skip
    recorder = Recorder(mosquitto.url, "rf-1")
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with sim.serve_ptys() as links:
            devices = [
                {"name": name, "url": f"profile+serial://{links[name]}?profile=rfid-ntag",
                 "positions": [name.removeprefix("seat-")]}
                for name in READERS
            ]  # fmt: skip
            settings = multi_settings(mosquitto.url, "rf-1", tmp_path / "j.sqlite", devices)
            summaries = await run_table(settings, rounds=1)
        result = await recorder.results.get()
        await asyncio.sleep(0.2)
        task.cancel()

    assert len(summaries) == 1
    assert result["data"]["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}
    events = recorder.on("events")
    rescans = [e["data"] for e in events if e["kind"] == "rescan_requested"]
    assert [(r["slot"], r["cause"]) for r in rescans] == [("A2", "position")]
    detail = rescans[0]["detail"]
    assert "Ah read from the wrong position" in detail
    assert "reader 'seat-B' (B1, B2, B3) read it" in detail
    assert "waits for A2 at reader 'seat-A'" in detail
    assert [e for e in events if e["kind"] == "card_refused"] == []
    # The dealer was cued to rescan at the right reader; seat B heard only its own cues.
    assert "RESCAN A2" in sim.reader_commands["seat-A"]
    assert sim.reader_commands["seat-B"] == ["CUE B1", "CUE B2", "CUE B3"]
    assert sim.placements[2:4] == [("Ah", "seat-B"), ("Ah", "seat-A")]
    devices_seen = {e["data"]["device"] for e in events if e["kind"] == "device_status"}
    assert devices_seen == {d["url"] for d in devices}


async def test_run_simulate_with_the_rfid_profile_plays_a_multi_reader_round(mosquitto, tmp_path):
    """``run --simulate --profile rfid-ntag --wrong-reader-at 2``'s devices: one reader a
    hand, the second card first put on the wrong reader."""
    sim = Simulation(seed=7, deal_delay=0.0, profile="rfid-ntag", wrong_reader_at=(1,))
    recorder = Recorder(mosquitto.url, "rf-2")
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with simulated_devices("teen-patti-20-20", sim) as devices:
            readers = devices.settings["devices"]
            assert [d["positions"] for d in readers] == [["A"], ["B"]]
            settings = multi_settings(mosquitto.url, "rf-2", tmp_path / "j.sqlite", readers)
            summaries = await run_table(settings, rounds=1)
        await recorder.results.get()
        await asyncio.sleep(0.2)
        task.cancel()
    assert len(summaries) == 1
    events = recorder.on("events")
    assert len([e for e in events if e["kind"] == "card_dealt"]) == 6
    causes = [e["data"]["cause"] for e in events if e["kind"] == "rescan_requested"]
    assert causes == ["position"]


async def test_a_read_lost_while_the_shoe_was_unplugged_is_asked_for_again(mosquitto, tmp_path):
    """The cable is pulled as the 3rd and the 6th card are read: their records are lost.

    After ``recovered`` the table journals ``rescan_requested`` (cause ``away``) and cues the
    shoe to rescan, and the round completes (before, it waited for a card that would never
    come).
    """
    script = ["As", "Kd", "Ah", "Kc", "Ad", "Kh"]
    sim = LineDeviceSimulator(
        load_profile("line-shoe"), cards=script,
        faults=FaultPlan(unplug_every=3, unplug_seconds=0.3), deal_delay=0.0,
    )  # fmt: skip
    recorder = Recorder(mosquitto.url, "rf-3")
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with sim.serve_pty() as path:
            url = f"profile+serial://{path}?profile=line-shoe"
            settings = settings_for(mosquitto.url, "rf-3", tmp_path / "j.sqlite", url)
            settings.device.driver = settings.device.driver.model_copy(
                update={"backoff_min": 0.05, "backoff_max": 0.2}
            )
            summaries = await run_table(settings, rounds=1)
        result = await recorder.results.get()
        await asyncio.sleep(0.2)
        task.cancel()

    assert len(summaries) == 1
    assert result["data"]["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}
    assert sim.stats.unplugs >= 1 and sim.stats.dropped_bytes > 0
    events = recorder.on("events")
    states = [e["data"]["state"] for e in events if e["kind"] == "device_status"]
    assert states[:3] == ["connected", "lost", "recovered"]
    away = [e["data"] for e in events if e["kind"] == "rescan_requested"]
    # Pulled as the 3rd (A2) and the 6th (B3) card were read: each asked for again.
    assert sim.stats.unplugs == 2
    assert [(r["slot"], r["cause"]) for r in away] == [("A2", "away"), ("B3", "away")]
    assert "lost with it" in away[0]["detail"]
    assert b"RA2\r" in sim.host_bytes and b"RB3\r" in sim.host_bytes  # the shoe's rescans
    dealt = [e["data"]["card"] for e in events if e["kind"] == "card_dealt"]
    assert dealt == ["As", "Kd", "Ah", "Kc", "Ad", "Kh"]


@pytest.mark.parametrize(
    ("devices", "field", "reason"),
    [
        (
            [
                {"url": "/dev/null", "positions": ["A"]},
                {"url": "/dev/zero", "positions": ["B", "A2"]},
            ],
            "devices",
            "devices[1] (reader-2).positions: 'A2' claims slot A2, already read by devices[0] "
            "(reader-1): two readers cannot claim one position",
        ),
        (
            [{"url": "/dev/null", "positions": ["A", "B", "Z9"]}],
            "devices",
            "devices[0] (reader-1).positions: 'Z9' is no slot or hand of teen-patti-20-20",
        ),
        (
            [{"url": "/dev/null", "positions": ["A", "B1", "B2"]}],
            "devices",
            "no reader reads slot(s) B3 of teen-patti-20-20",
        ),
        (
            [
                {
                    "url": "profile+serial:///dev/null?profile=rfid-ntag&codes=/nonexistent.toml",
                    "positions": ["A", "B"],
                }
            ],
            "devices.0.url",
            "cannot read the file",
        ),
    ],
)
def test_a_bad_multi_reader_config_stops_at_start_with_file_field_and_reason(
    tmp_path, devices, field, reason
):
    config = tmp_path / "table.toml"
    lines = ['table_id = "t"', 'game = "teen-patti-20-20"']
    for device in devices:
        positions = ", ".join(f'"{p}"' for p in device["positions"])
        lines += ["[[devices]]", f'url = "{device["url"]}"', f"positions = [{positions}]"]
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    error = caught.value
    assert error.context["file"] == str(config)
    assert error.context["field"] == field
    assert reason in str(error)


def test_one_card_source_form_only(tmp_path):
    both = tmp_path / "both.toml"
    both.write_text(
        'table_id = "t"\n[device]\nurl = "/dev/null"\n'
        '[[devices]]\nurl = "/dev/null"\npositions = ["A", "B"]\n'
    )
    with pytest.raises(ConfigError, match=r"give the card source once"):
        load_settings(both)
    single = tmp_path / "single.toml"
    single.write_text('table_id = "t"\n[device]\nurl = "/dev/null"\n')
    assert load_settings(single).device is not None  # the single [device] form still works


async def _when_round_opens(journal: Path) -> None:
    """Return once the table has journalled ``round_opened`` (its device is open by then)."""
    while True:
        try:
            with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
                opened = db.execute(
                    "SELECT count(*) FROM entries WHERE kind = 'round_opened'"
                ).fetchone()[0]
        except sqlite3.OperationalError:  # not created yet
            opened = 0
        if opened:
            return
        await asyncio.sleep(0.02)


async def test_a_tile_read_again_after_the_away_rescan_is_not_taken_for_its_copy(tmp_path):
    """Mahjong tiles on an RFID reader whose cable is out when the first tile is cued: the cue
    goes again after ``recovered``, the dealer places the tile, and the ``away`` rescan reads
    it a second time. The set holds each tile twice, so a second 7p read after the next cue
    would pass for the other 7p: after an ``away`` rescan it is a bounce, and the next slot
    gets the next tile."""
    script = ["7p", "2p", "wd", "5p"]
    sim = LineDeviceSimulator(
        load_profile("rfid-ntag", "codes/rfid-demo-tiles.toml"), cards=script, deal_delay=0.05
    )
    journal = tmp_path / "j.sqlite"
    async with asyncio.timeout(60), sim.serve_pty() as path:
        settings = load_settings(
            None,
            table_id="mj-away",
            game="mahjong-pai-gow",
            game_options={"positions": 2, "bank_seconds": 0.1},
            device={
                "url": f"profile+serial://{path}?profile=rfid-ntag&codes=codes/rfid-demo-tiles.toml",
                "driver": {"backoff_min": 0.05, "backoff_max": 0.2},
            },
            journal={"path": journal},
            rounds={"betting_seconds": 0.3, "pause_seconds": 0, "wait_for_broker": False},
        )
        table = asyncio.create_task(run_table(settings, rounds=1, broker_urls_given=False))
        await _when_round_opens(journal)
        sim._pull_cable(1.0)  # out before the first cue, back after it
        summaries = await table

    assert len(summaries) == 1
    with sqlite3.connect(journal) as db:
        rows = [(kind, json.loads(body)) for kind, body in db.execute(
            "SELECT kind, body FROM entries ORDER BY seq")]  # fmt: skip
    dealt = [body["card"] for kind, body in rows if kind == "card_dealt"]
    assert dealt == script  # the 7p read twice is one 7p; 2p went to the next slot
    causes = [body["cause"] for kind, body in rows if kind == "rescan_requested"]
    assert causes == ["away"]
    assert sim.drawn == script and sim.stats.unplugs == 1
    reads_of_7p = sim.line_stats.records - len(script)  # one record a card, plus the rescan
    assert reads_of_7p == 1


def test_readers_bind_to_the_slots_the_game_options_make():
    """Hold'em's slots follow its options: eight seats and burns give seat7, seat8 and the
    burn slots, which a six-seat table has not; Mahjong's positions likewise."""
    seats = [{"url": "/dev/null", "positions": [f"seat{n}"]} for n in range(1, 9)]
    board = [{"url": "/dev/null", "positions": ["board", "burn"]}]
    settings = load_settings(
        None, table_id="h", game="texas-holdem", game_options={"seats": 8, "burns": True},
        devices=seats + board,
    )  # fmt: skip
    assert settings.devices is not None and len(settings.devices) == 9
    with pytest.raises(ConfigError, match=r"'seat7' is no slot or hand of texas-holdem"):
        load_settings(None, table_id="h", game="texas-holdem", devices=seats + board)
    with pytest.raises(ConfigError, match=r"no reader reads slot\(s\) B1, B2, B3"):
        load_settings(
            None, table_id="h", game="texas-holdem", game_options={"seats": 8, "burns": True},
            devices=[*seats, {"url": "/dev/null", "positions": ["board"]}],
        )  # fmt: skip
    five = [{"url": "/dev/null", "positions": [f"P{n}"]} for n in range(1, 6)]
    mahjong = load_settings(
        None, table_id="m", game="mahjong-pai-gow", game_options={"positions": 5},
        devices=[*five, {"url": "/dev/null", "positions": ["B"]}],
    )  # fmt: skip
    assert mahjong.devices is not None and len(mahjong.devices) == 6
