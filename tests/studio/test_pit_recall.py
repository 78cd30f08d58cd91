"""Recall of a round from the pit console: as the console saw it, and from the studio archive.

A signed Teen Patti table (``run_table``, scanner simulator on a real pty) plays one round on a
real Mosquitto while the console (no table list: every table seen) follows it. Then the round
is recalled from what the console saw (signatures checked with the table's public key), and,
once the published messages are in the archive (a real PostgreSQL cluster the test starts),
from the archive. Both must match ``tablectl recall --journal``'s record of the round.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from controller.app import run_table
from controller.archive.ingest import Entry, TableKeys, classify
from controller.archive.store import ArchiveStore
from controller.journal import Journal
from controller.recall import recall_round
from controller.settings import load_settings
from controller.signing import generate_keypair, load_public_key
from controller.studio.pit import build_pit_app
from controller.studio.pit.console import ActionRequest
from controller.studio.pit.errors import RecallError
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.runner import serving
from controller.studio.pit.settings import pit_settings
from simulators.table import Simulation, simulated_scanner

pytestmark = pytest.mark.hil

TABLE = "rc-1"


def console(broker_url: str, public_key: Path, archive: str | None = None) -> Any:
    settings = pit_settings(
        {
            "users": [
                {"name": "alice", "role": "pitboss", "password_hash": hash_password("x", n=1024)}
            ],
            "session_secret": "s" * 40,
            "mqtt": {"urls": [broker_url], "reconnect_min_seconds": 0.05},
            "public_keys": {TABLE: str(public_key)},
            **({"archive_url": archive} if archive else {}),
        }
    )
    return build_pit_app(settings)


def _without_delivery(record: dict[str, Any]) -> dict[str, Any]:
    for entry in record["entries"]:
        entry.pop("delivered_at")
    return record


async def _play_one_round(mosquitto, tmp_path: Path, private: Path) -> list[tuple[str, bytes]]:
    """The round, with every message published under the table recorded."""
    recorded: list[tuple[str, bytes]] = []
    ready = asyncio.Event()

    async def record() -> None:
        async with aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="rc-rec") as client:
            await client.subscribe(f"tables/{TABLE}/#", qos=1)
            ready.set()
            async for message in client.messages:
                recorded.append((str(message.topic), bytes(message.payload)))

    recorder = asyncio.create_task(record(), name="recorder")
    await ready.wait()
    async with simulated_scanner("teen-patti-20-20", Simulation(seed=5, deal_delay=0.0)) as url:
        settings = load_settings(
            None,
            table_id=TABLE,
            device={"url": url},
            mqtt={"urls": [mosquitto.url]},
            journal={"path": tmp_path / "rc.sqlite"},
            rounds={"betting_seconds": 0.1, "pause_seconds": 0.1},
            signing={"key_file": private, "key_id": "rc-key"},
        )
        async with asyncio.timeout(60):
            await run_table(settings, rounds=1)
    await asyncio.sleep(0)
    recorder.cancel()
    return recorded


async def test_recall_from_what_the_console_saw_and_from_the_archive(
    mosquitto, archive_db, tmp_path
):
    private, public = generate_keypair(tmp_path / "keys", "rc-key")
    app = console(mosquitto.url, public)
    handlers = app.state.pit_handlers
    async with serving(app):
        async with asyncio.timeout(10):
            await app.state.pit_console.connected.wait()
        recorded = await _play_one_round(mosquitto, tmp_path, private)
        with Journal.open_readonly(tmp_path / "rc.sqlite") as journal:
            round_id = next(e.round_id for e in journal.entries() if e.kind == "round_result")
            assert round_id is not None
            expected = _without_delivery(recall_round(journal, round_id).to_dict())
        async with asyncio.timeout(10):
            while app.state.pit_console.floor.tables[TABLE].state != "settled":
                await asyncio.sleep(0.05)
        seen = await handlers.recall(round_id)
        seen_span = app.state.pit_console.round_span(TABLE, round_id)
        with pytest.raises(RecallError, match="needs the studio archive"):
            await handlers.recall(f"{TABLE}-999999")

    assert seen.source == "console"
    assert _without_delivery(seen.record) == expected
    assert [(s["kind"], s["verified"]) for s in seen.signatures] == [("round_result", True)]
    assert "result" in seen.text
    # A replay asked by round: the range of the round's entries the console saw.
    seqs = [entry["seq"] for entry in expected["entries"]]
    assert seen_span == (min(seqs), max(seqs))

    # The same messages in the archive (classified and stored as the archive does).
    keys = TableKeys({TABLE: load_public_key(public)})
    store = await ArchiveStore.open(archive_db)
    try:
        entries = [
            found
            for topic, payload in recorded
            if isinstance(found := classify(topic, payload, keys), Entry)
        ]
        await store.store_entries(entries)
    finally:
        await store.close()
    archived_app = console(mosquitto.url, public, archive=archive_db)
    archived = await archived_app.state.pit_handlers.recall(round_id)
    # A replay asked by round, with the console's archive: the range from the archive.
    by_round = ActionRequest(TABLE, "replay", "replay-by-round", round_id=round_id)
    mapped = await archived_app.state.pit_handlers.replay_span(by_round)
    assert (mapped.from_seq, mapped.to_seq, mapped.round_id) == (min(seqs), max(seqs), round_id)
    unknown = ActionRequest(TABLE, "replay", "replay-by-round", round_id=f"{TABLE}-000404")
    assert (await archived_app.state.pit_handlers.replay_span(unknown)).from_seq is None
    assert archived.source == "archive"
    from_archive = _without_delivery(archived.record)
    # The archive also says what its entries are worth: this table signs, its chain covers all.
    verified = "verified: every entry is on the table's signed chain"
    assert from_archive.pop("verification") == verified
    assert from_archive == expected
    assert [(s["kind"], s["verified"]) for s in archived.signatures] == [("round_result", True)]
    assert archived.signatures[0]["text"] == "signature verified by the archive"
    with pytest.raises(RecallError, match="no such round in the archive"):
        await archived_app.state.pit_handlers.recall("rc-1-000404")
    assert json.dumps(archived.to_json())  # what the page receives is JSON
