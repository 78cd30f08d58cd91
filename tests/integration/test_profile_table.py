"""A whole table on a device profile: the orchestrator, the journal and MQTT, end to end.

The line-oriented shoe (``line-shoe``) and the plain barcode reader (``barcode-crlf``) are
simulated byte for byte on a real pty and read through ``profile+serial://``; the events
come off a real Mosquitto.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from controller.app import run_table
from drivers.profile import load_profile
from simulators.faults import FaultPlan
from simulators.line_device import LineDeviceSimulator, LineFaults
from simulators.table import Simulation, simulated_devices, simulated_scanner
from tests.integration.test_table_hil import Recorder, settings_for


async def test_line_shoe_round_refuses_bad_records_with_the_reason(mosquitto, tmp_path):
    script = ["As", "Kd", "As", "JK", "Ah", "Kc", "Ad", "Kh"]
    sim = LineDeviceSimulator(
        load_profile("line-shoe"),
        cards=script,
        faults=FaultPlan(misreads_at={1: 1}),
        line_faults=LineFaults(bad_checksum_rate=0.3, unknown_code_rate=0.3, seed=5),
        deal_delay=0.0,
    )
    recorder = Recorder(mosquitto.url, "prof-1")
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with sim.serve_pty() as path:
            url = f"profile+serial://{path}?profile=line-shoe"
            settings = settings_for(mosquitto.url, "prof-1", tmp_path / "j.sqlite", url)
            summaries = await run_table(settings, rounds=1)
        result = await recorder.results.get()
        await asyncio.sleep(0.2)
        task.cancel()

    assert len(summaries) == 1
    assert result["data"]["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}
    events = recorder.on("events")
    rescans = [e["data"] for e in events if e["kind"] == "rescan_requested"]
    causes = [r["cause"] for r in rescans]
    # Every bad record was refused and journalled with its cause; nothing was guessed.
    assert causes.count("device") == sim.stats.misreads_sent == 1
    # One refusal a faulty record (a record with an unknown code and a bad checksum is
    # refused once, for the checksum, checked first).
    assert sim.line_stats.bad_checksums > 0 and sim.line_stats.unknown_codes > 0
    assert causes.count("checksum") == sim.line_stats.bad_checksums
    assert 0 < causes.count("unknown_code") <= sim.line_stats.unknown_codes
    refusals = causes.count("checksum") + causes.count("unknown_code")
    assert refusals == sim.line_stats.faulty_records
    assert all(r["detail"] for r in rescans)
    refused = [
        (e["data"]["slot"], e["data"]["card"]) for e in events if e["kind"] == "card_refused"
    ]
    assert refused == [("A2", "As"), ("A2", "JK")]
    assert sim.rejected == ["As", "JK"]  # the shoe took the reject command
    with sqlite3.connect(tmp_path / "j.sqlite") as db:
        kinds = [row[0] for row in db.execute("SELECT kind FROM entries ORDER BY seq")]
    assert kinds == [event["kind"] for event in events]


async def test_run_simulate_with_the_barcode_profile_deals_a_round(mosquitto, tmp_path):
    """``run --simulate --profile barcode-crlf``'s scanner: a reader without cues, dealing
    on its own; the round completes through the profile driver."""
    sim = Simulation(seed=4, deal_delay=0.05, profile="barcode-crlf")
    recorder = Recorder(mosquitto.url, "prof-2")
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with simulated_scanner("teen-patti-20-20", sim) as url:
            assert url.startswith("profile+serial://") and url.endswith("?profile=barcode-crlf")
            settings = settings_for(mosquitto.url, "prof-2", tmp_path / "j.sqlite", url)
            summaries = await run_table(settings, rounds=1)
        result = await recorder.results.get()
        await asyncio.sleep(0.2)
        task.cancel()
    assert len(summaries) == 1
    dealt = [e for e in recorder.on("events") if e["kind"] == "card_dealt"]
    assert len(dealt) == 6
    assert sum(len(cards) for cards in result["data"]["cards"].values()) == 6


@pytest.mark.parametrize("mode", ["pos", "kbd"])
async def test_run_simulate_with_a_hid_scanner_deals_a_round(mosquitto, tmp_path, mode):
    """``run --simulate --profile barcode-crlf --hid pos|kbd``'s device: a USB HID scanner on
    the simulated pyusb backend (the real pyusb code path), read through ``hidpos://`` or
    ``hidkbd://``, dealing on its own; a whole round through the orchestrator."""
    sim = Simulation(seed=3, deal_delay=0.05, profile="barcode-crlf", hid=mode)
    table = f"hid-{mode}"
    recorder = Recorder(mosquitto.url, table)
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with simulated_devices("teen-patti-20-20", sim) as devices:
            url = devices.settings["device"]["url"]
            assert url.startswith(f"hid{mode}://") and url.endswith("?profile=barcode-crlf")
            settings = settings_for(mosquitto.url, table, tmp_path / "j.sqlite", url)
            summaries = await run_table(settings, rounds=1, usb_backend=devices.usb_backend)
        result = await recorder.results.get()
        await asyncio.sleep(0.2)
        task.cancel()
    assert len(summaries) == 1
    dealt = [e["data"]["card"] for e in recorder.on("events") if e["kind"] == "card_dealt"]
    assert len(dealt) == 6
    assert set(dealt) <= set(devices.simulator.drawn)
    assert sum(len(cards) for cards in result["data"]["cards"].values()) == 6
