"""A whole table run as a studio runs it: signed results, /metrics, systemd notifications.

Each test starts the real ``tablectl run`` (as a subprocess where the process boundary is the
point: systemd talks to a process) against a real Mosquitto, with the scanner simulator on a
real pty.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.app import run_table
from controller.settings import load_settings
from controller.signing import generate_keypair, load_public_key, verify_envelope
from simulators.table import Simulation, simulated_scanner
from tests.support.mosquitto import free_port

pytestmark = pytest.mark.hil


async def test_results_are_signed_and_metrics_count_the_rounds(mosquitto, tmp_path):
    private, public = generate_keypair(tmp_path / "keys", "table-key-1")
    port = free_port()
    results: list[dict[str, Any]] = []
    ready = asyncio.Event()

    async def subscriber() -> None:
        async with aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="sig-sub") as c:
            await c.subscribe("tables/sig-1/results", qos=1)
            ready.set()
            async for message in c.messages:
                results.append(json.loads(message.payload))
                if len(results) == 1:  # the command router is subscribed: a hostile command
                    await c.publish("tables/sig-1/cmd/pit/void", b"[" * 3000 + b"]" * 3000, qos=1)

    scraped: dict[str, float] = {}

    async def scrape_when_done(task: asyncio.Task[object]) -> None:
        # Scrape while the table still runs (the endpoint closes with it).
        while len(results) < 2 and not task.done():
            await asyncio.sleep(0.05)
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        )
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                key = sample.name + json.dumps(sample.labels, sort_keys=True)
                scraped[key] = sample.value

    sim = Simulation(seed=4, deal_delay=0.0)
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        sub = group.create_task(subscriber())
        await ready.wait()
        async with simulated_scanner("teen-patti-20-20", sim) as url:
            settings = load_settings(
                None,
                table_id="sig-1",
                device={"url": url},
                mqtt={"urls": [mosquitto.url]},
                journal={"path": tmp_path / "j.sqlite"},
                rounds={"betting_seconds": 0.1, "pause_seconds": 0.3},
                signing={"key_file": private, "key_id": "table-key-1"},
                metrics={"port": port},
            )
            table = asyncio.create_task(run_table(settings, rounds=2))
            await scrape_when_done(table)
            await table
        while len(results) < 2:
            await asyncio.sleep(0.02)
        sub.cancel()

    key = load_public_key(public)
    for envelope in results:
        assert envelope["signature"]["key_id"] == "table-key-1"
        assert verify_envelope(envelope, key)
    tampered = json.loads(json.dumps(results[0]))
    tampered["data"]["bets"][0]["payout"] = "100"
    assert not verify_envelope(tampered, key)

    label = json.dumps({"outcome": "settled", "table": "sig-1"}, sort_keys=True)
    assert scraped[f"tablectl_rounds_total{label}"] >= 1
    count = scraped['tablectl_scan_to_publish_seconds_count{"table": "sig-1"}']
    assert count >= 6, "every card dealt is timed from its scan to its broker acknowledgement"
    assert scraped['tablectl_journal_bytes{"table": "sig-1"}'] > 0
    rejected = json.dumps(
        {"code": "too_deep", "reader": "commands", "table": "sig-1"}, sort_keys=True
    )
    assert scraped[f"tablectl_messages_rejected_total{rejected}"] == 1


def _notify_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(0.2)
    return sock


async def test_systemd_ready_watchdog_and_stopping(mosquitto, tmp_path):
    sock = _notify_socket(tmp_path / "notify.sock")
    env = dict(os.environ, NOTIFY_SOCKET=str(tmp_path / "notify.sock"), WATCHDOG_USEC="400000")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "run",
        "--simulate",
        "--rounds",
        "2",
        "--broker",
        mosquitto.url,
        "--table-id",
        "sd-1",
        "--journal",
        str(tmp_path / "j.sqlite"),
        "--betting-seconds",
        "0.5",
        "--pause-seconds",
        "0.3",
        "--deal-delay",
        "0.05",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    received: list[str] = []
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                received.append(sock.recv(4096).decode())
            except TimeoutError:
                continue

    thread = threading.Thread(target=drain, name="fake-systemd", daemon=True)
    thread.start()
    try:
        _, err = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:
            process.kill()
        stop.set()
        thread.join(5)
        sock.close()
    assert process.returncode == 0, err.decode()
    text = "\n".join(received)
    assert "READY=1" in text
    assert text.count("WATCHDOG=1") >= 2, "the watchdog is fed while the table runs"
    assert "STOPPING=1" in text
    assert text.index("READY=1") < text.index("STOPPING=1")
