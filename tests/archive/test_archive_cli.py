"""``tablectl archive run`` as a process, and ``tablectl recall --archive`` beside ``--journal``."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys

import aiomqtt
import psycopg
import pytest

from controller.app import run_table
from controller.cli import main
from controller.journal import Journal
from controller.settings import load_settings
from controller.signing import generate_keypair
from simulators.table import Simulation, simulated_scanner

pytestmark = pytest.mark.hil


def _count(db: str, query: str) -> int:
    with psycopg.connect(db) as conn:
        row = conn.execute(query.encode()).fetchone()
    return int(row[0]) if row else 0


def test_archive_run_then_recall_from_the_archive_matches_the_journal(
    mosquitto, archive_db, tmp_path, capsys
):
    private, _ = generate_keypair(tmp_path / "keys", "cli-1-key")
    config = tmp_path / "archive.toml"
    config.write_text(
        f'[database]\nurl = "{archive_db}"\n\n'
        f'[mqtt]\nurls = ["{mosquitto.url}"]\nclient_id = "archive-cli"\n\n'
        '[tables.cli-1]\npublic_key = "keys/cli-1-key.pub"\n'
    )
    journal_path = tmp_path / "cli-1.sqlite"
    process = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "archive", "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    async def scenario() -> int:
        # Subscribed once a probe on an unknown table is stored as rejected.
        async with asyncio.timeout(30), aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
            while not (
                _has_tables(archive_db) and _count(archive_db, "SELECT count(*) FROM rejected")
            ):
                await client.publish("tables/probe/events", b'{"schema_version":"2"}', qos=1)
                await asyncio.sleep(0.2)
        async with simulated_scanner("teen-patti-20-20", Simulation(seed=3, deal_delay=0.0)) as url:
            settings = load_settings(
                None,
                table_id="cli-1",
                device={"url": url},
                mqtt={"urls": [mosquitto.url]},
                journal={"path": journal_path},
                rounds={"betting_seconds": 0.1, "pause_seconds": 0.1},
                signing={"key_file": private, "key_id": "cli-1-key"},
            )
            async with asyncio.timeout(60):
                await run_table(settings, rounds=2)
        with Journal.open_readonly(journal_path) as journal:
            total = journal.last_seq
        async with asyncio.timeout(15):
            while _count(archive_db, "SELECT count(*) FROM events") < total:
                await asyncio.sleep(0.05)
        return total

    try:
        total = asyncio.run(scenario())
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    assert process.returncode == 0, err.decode()
    assert "archive stopped:" in out.decode()
    assert f"new {total}" in out.decode()
    with Journal.open_readonly(journal_path) as journal:
        entries = list(journal.entries())

    round_id = next(e.round_id for e in entries if e.kind == "round_result")
    assert round_id is not None
    capsys.readouterr()
    assert main(["recall", round_id, "--journal", str(journal_path), "--json"]) == 0
    from_journal = json.loads(capsys.readouterr().out)
    assert main(["recall", round_id, "--archive", archive_db, "--json"]) == 0
    from_archive = json.loads(capsys.readouterr().out)
    # A signing table's round, every entry covered by its signed result's chain head.
    assert (
        from_archive.pop("verification") == "verified: every entry is on the table's signed chain"
    )
    for document in (from_journal, from_archive):
        for entry in document["entries"]:
            entry.pop("delivered_at")
    assert from_archive == from_journal
    assert from_archive["status"] == "settled"

    delivered = re.compile(r"  \[delivered [^\]]*\]")
    assert main(["recall", round_id, "--journal", str(journal_path)]) == 0
    text_journal = delivered.sub("", capsys.readouterr().out)
    assert main(["recall", round_id, "--archive", archive_db]) == 0
    text_archive = delivered.sub("", capsys.readouterr().out).splitlines(keepends=True)
    assert text_archive.pop(1).startswith("verified: every entry")
    assert "".join(text_archive) == text_journal

    assert main(["recall", "no-such-round", "--archive", archive_db]) == 2
    assert "no such round in the archive" in capsys.readouterr().err


def _probes(db: str) -> int:
    return _count(db, "SELECT count(*) FROM rejected WHERE payload <> '{}'::bytea")


def _has_tables(db: str) -> bool:
    with psycopg.connect(db) as conn:
        row = conn.execute("SELECT to_regclass('rejected') IS NOT NULL").fetchone()
    return bool(row and row[0])


def test_archive_run_reconnects_when_the_database_drops_it_and_loses_nothing(
    mosquitto, archive_db, tmp_path
):
    config = tmp_path / "archive.toml"
    config.write_text(
        f'[database]\nurl = "{archive_db}"\nreconnect_min_seconds = 0.05\n'
        "reconnect_max_seconds = 0.5\ntimeout_seconds = 5\n\n"
        f'[mqtt]\nurls = ["{mosquitto.url}"]\nclient_id = "archive-lost"\n\n[tables.t1]\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "archive", "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    sent: list[bytes] = []

    async def scenario() -> None:
        async with asyncio.timeout(30), aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
            while not (
                _has_tables(archive_db) and _count(archive_db, "SELECT count(*) FROM rejected")
            ):
                await client.publish("tables/probe/events", b"{}", qos=1)
                await asyncio.sleep(0.2)
            # Every connection of the archive is cut, twice; what arrives meanwhile waits.
            for _ in range(2):
                with psycopg.connect(archive_db, autocommit=True) as conn:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                for _ in range(5):
                    sent.append(f'{{"probe":{len(sent)}}}'.encode())
                    await client.publish("tables/probe/events", sent[-1], qos=1)
                    await asyncio.sleep(0.05)
            while _probes(archive_db) < len(sent):
                assert process.poll() is None
                await asyncio.sleep(0.1)

    try:
        asyncio.run(scenario())
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    assert process.returncode == 0, err.decode()
    # Every probe sent after the cuts stored once (rejected: an unknown table), none twice.
    with psycopg.connect(archive_db) as conn:
        rows = conn.execute(
            "SELECT payload FROM rejected WHERE payload <> '{}'::bytea ORDER BY id"
        ).fetchall()
    assert sorted(bytes(row[0]) for row in rows) == sorted(sent)
    log = out.decode() + err.decode()  # structlog writes to standard output
    assert "archive database connection lost" in log
    assert "archive database reachable again" in log
    assert "Traceback" not in log
