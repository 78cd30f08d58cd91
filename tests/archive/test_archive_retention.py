"""Retention on a real PostgreSQL: months exported to CSV, verified, then deleted or dropped.

Four tables' rounds spread over January to June 2026; two classes (``regulated`` keeps 3
months, ``demo`` 30 days) and a table in no class; the run is at 2026-07-15. What goes, what
stays, the files and their manifests are all derived from the generated entries.
"""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg import sql
from psycopg.types.json import Jsonb

from controller.archive import retention as retention_module
from controller.archive import retention_side
from controller.archive.config import RetentionSettings
from controller.archive.ingest import Entry, TableKeys, classify
from controller.archive.retention import Keep, RetentionError, class_of, format_run, retain
from controller.archive.store import ArchiveStore
from controller.signing import Signer

SIGNER = Signer(Ed25519PrivateKey.generate(), "k1")
TABLES = ("tp-1", "tp-2", "demo-1", "house-1")
KEYS = TableKeys(dict.fromkeys(TABLES, SIGNER.public_key))
NOW = datetime(2026, 7, 15, tzinfo=UTC)
# Which months (2026) each table plays rounds in.
PLAYS = {
    "tp-1": (1, 2, 3, 4, 6),
    "tp-2": (1,),
    "demo-1": (1, 2, 4, 5, 6),
    "house-1": (2,),
}
SETTINGS = RetentionSettings.model_validate(
    {
        "classes": {
            "regulated": {"tables": ["tp-*"], "keep": "3m"},
            "demo": {"tables": ["demo-*"], "keep": "30d"},
        },
        "lock_timeout_seconds": 2,
    }
)


def _envelope(table: str, seq: int, kind: str, at: datetime, data: dict[str, Any], *, rnd: str):
    body = {
        "schema_version": "2",
        "table": table,
        "round": rnd,
        "seq": seq,
        "session": 1,
        "kind": kind,
        "at": at.isoformat().replace("+00:00", "Z"),
        "delayed": False,
        "data": data,
    }
    if kind == "round_result":
        body["chain_head"] = {"seq": seq, "hash": "0" * 64}
        body = SIGNER.sign(body)
    return body


def _round(table: str, seq: int, no: int, opened: datetime) -> list[Entry]:
    rnd = f"{table}-{no:06d}"
    bets = [{"bet": "player_a", "outcome": "win", "payout": "1.98", "reason": 'A "quoted", ok'}]
    bodies = [
        _envelope(table, seq, "round_opened", opened, {"round_no": no, "game": "g"}, rnd=rnd),
        _envelope(table, seq + 1, "betting_closed", opened + timedelta(seconds=10), {}, rnd=rnd),
        _envelope(
            table,
            seq + 2,
            "round_result",
            opened + timedelta(seconds=20),
            {"game": "g", "winner": "A", "cards": {}, "hands": {}, "bets": bets},
            rnd=rnd,
        ),
    ]
    found = [classify(f"tables/{table}/events", json.dumps(b).encode(), KEYS) for b in bodies]
    assert all(isinstance(f, Entry) for f in found), found
    return [f for f in found if isinstance(f, Entry)]


def _generate() -> list[Entry]:
    entries: list[Entry] = []
    for table, months in PLAYS.items():
        seq, no = 1, 1
        for month in months:
            for day in (3, 17):
                entries += _round(table, seq, no, datetime(2026, month, day, 21, tzinfo=UTC))
                seq, no = seq + 3, no + 1
            if table == "tp-1" and month == 3:
                # A round across the end of March: opened in March, its result in April.
                at = datetime(2026, 3, 31, 23, 59, 50, tzinfo=UTC)
                entries += _round(table, seq, no, at)
                seq, no = seq + 3, no + 1
    return entries


async def _load(db: str, entries: list[Entry]) -> None:
    store = await ArchiveStore.open(db)
    try:
        assert set(await store.store_entries(entries)) == {"new"}
    finally:
        await store.close()


async def _rows(db: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(db) as conn:
        cursor = await conn.execute(query.encode(), params)
        return await cursor.fetchall()


def _month(entry: Entry) -> str:
    return f"events_{entry.at.year}_{entry.at.month:02d}"


def _due(entry: Entry) -> bool:
    end = datetime(entry.at.year + entry.at.month // 12, entry.at.month % 12 + 1, 1, tzinfo=UTC)
    keep = {"tp": Keep(3, "m"), "demo": Keep(30, "d")}.get(entry.table.split("-")[0])
    return keep is not None and end <= keep.cutoff(NOW)


def test_periods_and_classes():
    assert Keep.parse("3m").cutoff(datetime(2026, 5, 31, tzinfo=UTC)) == datetime(
        2026, 2, 28, tzinfo=UTC
    )
    assert Keep.parse("1y").cutoff(datetime(2028, 2, 29, tzinfo=UTC)) == datetime(
        2027, 2, 28, tzinfo=UTC
    )
    assert Keep.parse("2w").cutoff(NOW) == NOW - timedelta(days=14)
    with pytest.raises(RetentionError, match="'5 years' is not a retention period"):
        Keep.parse("5 years")
    both = RetentionSettings.model_validate(
        {
            "classes": {
                "short": {"tables": ["tp-*"], "keep": "30d"},
                "long": {"tables": ["tp-1"], "keep": "2y"},
            }
        }
    )
    # A table in two classes is kept for the longer period; a table in none is kept.
    found = class_of("tp-1", both, NOW)
    assert found is not None and found.name == "long"
    other = class_of("tp-2", both, NOW)
    assert other is not None and other.name == "short"
    assert class_of("bj-1", both, NOW) is None


def test_a_bad_period_in_the_config_names_the_field(tmp_path):
    from controller.archive.config import load_archive_settings
    from controller.errors import ConfigError

    config = tmp_path / "archive.toml"
    config.write_text(
        '[database]\nurl = "postgresql://x@y/z"\n'
        '[retention.classes.regulated]\ntables = ["tp-*"]\nkeep = "5 years"\n'
    )
    with pytest.raises(ConfigError, match=r"retention\.classes\.regulated\.keep.*'5 years'"):
        load_archive_settings(config)


async def test_dry_run_changes_nothing(archive_db, tmp_path):
    entries = _generate()
    await _load(archive_db, entries)
    partitions = await retain(archive_db, SETTINGS, tmp_path / "export", now=NOW, dry_run=True)
    assert (await _rows(archive_db, "SELECT count(*) FROM events"))[0][0] == len(entries)
    assert not (tmp_path / "export").exists()
    shown = {(p.name, i.table): i.outcome for p in partitions for i in p.items}
    expected: dict[tuple[str, str], str] = {}
    months = {_month(e) for e in entries if _due(e)}
    for e in entries:
        if _month(e) not in months:
            continue
        all_due = all(_due(o) for o in entries if _month(o) == _month(e))
        expected[(_month(e), e.table)] = (
            "kept"
            if not _due(e)
            else "would export, then drop the partition"
            if all_due
            else "would export, then delete the rows"
        )
    assert shown == expected
    assert shown[("events_2026_01", "tp-2")] == "would export, then drop the partition"
    assert shown[("events_2026_02", "house-1")] == "kept"


async def test_due_months_are_exported_verified_and_only_then_deleted(archive_db, tmp_path):
    entries = _generate()
    await _load(archive_db, entries)
    export = tmp_path / "export"
    partitions = await retain(archive_db, SETTINGS, export, now=NOW)
    outcomes = {(p.name, i.table): i.outcome for p in partitions for i in p.items}
    assert not [o for o in outcomes.values() if o.startswith("failed")], outcomes

    # What remains is exactly what was not due.
    kept = [e for e in entries if not _due(e)]
    rows = await _rows(archive_db, "SELECT table_id, seq FROM events ORDER BY table_id, seq")
    assert rows == sorted((e.table, e.seq) for e in kept)
    # A month every table of which was due is dropped whole; the others are not.
    parts = {
        r[0]
        for r in await _rows(
            archive_db,
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'events'::regclass",
        )
    }
    months = {_month(e) for e in entries}
    whole = {m for m in months if all(_due(e) for e in entries if _month(e) == m)}
    assert whole == {"events_2026_01", "events_2026_03", "events_2026_05"}
    assert parts == months - whole

    # Every due (table, month) has one CSV file holding its rows, listed with its sha256.
    due: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        if _due(e):
            due.setdefault((_month(e), e.table), []).append(e)
    for (month, table), mine in due.items():
        folder = export / month
        manifest = json.loads((folder / "manifest.json").read_text())
        (listed,) = [f for f in manifest["files"] if f["table"] == table]
        path = folder / listed["file"]
        assert listed["file"] == f"{table}.csv"
        assert listed["rows"] == len(mine)
        assert listed["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert listed["deleted"] == ("partition dropped" if month in whole else "rows deleted")
        assert (listed["first_seq"], listed["last_seq"]) == (mine[0].seq, mine[-1].seq)
        with path.open(newline="") as handle:
            lines = list(csv.DictReader(handle))
        assert [int(r["seq"]) for r in lines] == [e.seq for e in mine]
        assert [json.loads(r["envelope"]) for r in lines] == [e.envelope for e in mine]
        assert all(r["table_id"] == table for r in lines)
        # sha256sum -c accepts the folder as written.
        assert _sha256sum_check(folder) == 0

    # Rounds whose entries are all gone lose their row; the round across March's end stays.
    rounds = {r[0] for r in await _rows(archive_db, "SELECT round_id FROM rounds")}
    assert rounds == {e.round_id for e in kept}
    assert "tp-1-000007" in rounds  # opened 31 March (deleted), result in April (kept)
    # The idempotency keys stay: a late copy of a deleted entry is a duplicate, not new.
    keys = (await _rows(archive_db, "SELECT count(*) FROM entry_keys"))[0][0]
    assert keys == len(entries)
    store = await ArchiveStore.open(archive_db)
    try:
        first = next(e for e in entries if _due(e))
        assert await store.store_entry(first) == "duplicate"
    finally:
        await store.close()

    # A second run finds nothing due.
    again = await retain(archive_db, SETTINGS, export, now=NOW)
    assert again == []


def _sha256sum_check(folder: Path) -> int:
    done = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True, check=False
    )
    return done.returncode


async def test_late_rows_of_a_pruned_month_go_to_a_new_file(archive_db, tmp_path):
    entries = _generate()
    await _load(archive_db, entries)
    export = tmp_path / "export"
    await retain(archive_db, SETTINGS, export, now=NOW)
    # A replayed round of tp-1 from February arrives after February was pruned.
    late = _round("tp-1", 1000, 500, datetime(2026, 2, 20, tzinfo=UTC))
    await _load(archive_db, late)
    await retain(archive_db, SETTINGS, export, now=NOW)
    manifest = json.loads((export / "events_2026_02" / "manifest.json").read_text())
    files = [f["file"] for f in manifest["files"] if f["table"] == "tp-1"]
    assert files == ["tp-1.csv", "tp-1.2.csv"]
    with (export / "events_2026_02" / "tp-1.2.csv").open(newline="") as handle:
        assert [int(r["seq"]) for r in csv.DictReader(handle)] == [e.seq for e in late]
    assert (await _rows(archive_db, "SELECT count(*) FROM events_2026_02 WHERE table_id = 'tp-1'"))[
        0
    ][0] == 0


async def test_a_file_that_does_not_verify_deletes_nothing(archive_db, tmp_path, monkeypatch):
    entries = _generate()
    await _load(archive_db, entries)
    # Fault injection: the disk loses the last line of every file written.
    digest = retention_module._file_digest

    def truncated(path: Path) -> Any:
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))
        return digest(path)

    monkeypatch.setattr(retention_module, "_file_digest", truncated)
    partitions = await retain(archive_db, SETTINGS, tmp_path / "export", now=NOW)
    outcomes = [i.outcome for p in partitions for i in p.items if i.due]
    assert outcomes and all(o.startswith("failed, nothing deleted") for o in outcomes)
    assert "does not hold the database's rows" in outcomes[0]
    assert (await _rows(archive_db, "SELECT count(*) FROM events"))[0][0] == len(entries)
    assert list((tmp_path / "export").glob("*/manifest.json")) == []


def _retain_command(
    archive_db: str, tmp_path: Path, retention: str
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """``tablectl archive retain`` on a config keeping ``demo-*`` 30 days (exports in ``out``,
    ``retention``: more ``[retention]`` lines), and its ``--dry-run``, which must succeed."""
    config = tmp_path / "archive.toml"
    config.write_text(
        f'[database]\nurl = "{archive_db}"\n\n'
        f'[retention]\nexport_dir = "out"\n{retention}\n'
        '[retention.classes.demo]\ntables = ["demo-*"]\nkeep = "30d"\n'
    )
    command = [sys.executable, "-m", "controller.cli", "archive", "retain", "--config", str(config)]
    dry = subprocess.run(
        [*command, "--dry-run"], capture_output=True, text=True, timeout=60, check=False
    )
    assert dry.returncode == 0, dry.stderr
    return command, dry


def test_archive_retain_command(archive_db, tmp_path):
    import asyncio

    entries = [e for e in _generate() if e.table == "demo-1"]
    asyncio.run(_load(archive_db, entries))
    command, dry = _retain_command(archive_db, tmp_path, "")
    # Every month of 2026 up to June is older than 30 days now (the clock is after 2026-07).
    months = sorted({_month(e) for e in entries})
    for month in months:
        assert f"{month}  demo-1" in dry.stdout
    assert "would export, then drop the partition" in dry.stdout
    assert not (tmp_path / "out").exists()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == months
    assert "exported, partition dropped" in done.stdout
    with psycopg.connect(archive_db) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)


async def test_a_running_archive_stores_a_late_entry_of_a_dropped_month(archive_db, tmp_path):
    from controller.archive.config import ArchiveSettings
    from controller.archive.consumer import ArchiveConsumer

    entries = [e for e in _generate() if e.table == "demo-1"]
    await _load(archive_db, entries[:-3])
    settings = ArchiveSettings.model_validate({"database": {"url": archive_db}})
    store = await ArchiveStore.open(archive_db)
    try:
        consumer = ArchiveConsumer(settings, store, KEYS)
        # The running archive has written into January (and remembers its partition).
        january = _round("demo-1", 900, 900, datetime(2026, 1, 25, tzinfo=UTC))
        first = [(e.topic, json.dumps(e.envelope).encode()) for e in january[:1]]
        assert await consumer.handle_batch(first) == ["new"]
        partitions = await retain(archive_db, SETTINGS, tmp_path / "export", now=NOW)
        assert "events_2026_01" in [p.name for p in partitions]
        assert (await _rows(archive_db, "SELECT to_regclass('events_2026_01')"))[0][0] is None
        # A late January entry: the partition is made again and the entry stored, not lost.
        late = [(e.topic, json.dumps(e.envelope).encode()) for e in january[1:]]
        assert await consumer.handle_batch(late) == ["new", "new"]
    finally:
        await store.close()
    assert (await _rows(archive_db, "SELECT count(*) FROM events_2026_01"))[0][0] == 2


async def test_a_busy_partition_is_not_dropped_but_its_rows_deleted(archive_db, tmp_path):
    entries = [e for e in _generate() if e.table == "demo-1"]
    await _load(archive_db, entries)
    busy = RetentionSettings.model_validate({**SETTINGS.model_dump(), "lock_timeout_seconds": 0.3})
    # Another session holds a read of `events` open (as an ingest transaction would).
    async with await psycopg.AsyncConnection.connect(archive_db) as reader:
        await reader.execute("SELECT count(*) FROM events")
        partitions = await retain(archive_db, busy, tmp_path / "export", now=NOW)
        await reader.rollback()
    outcomes = {p.name: {i.outcome for i in p.items} for p in partitions}
    assert outcomes == {_month(e): {"exported, rows deleted"} for e in entries if _due(e)}
    assert (await _rows(archive_db, "SELECT count(*) FROM events"))[0][0] == len(
        [e for e in entries if not _due(e)]
    )
    # The partitions stay (empty): nothing was dropped while the ingest held the table.
    assert (await _rows(archive_db, "SELECT to_regclass('events_2026_01')"))[0][0] is not None
    manifest = json.loads((tmp_path / "export" / "events_2026_01" / "manifest.json").read_text())
    assert [f["deleted"] for f in manifest["files"]] == ["rows deleted"]


async def test_one_run_at_a_time_and_a_database_never_migrated(
    archive_db, postgres_cluster, tmp_path
):
    from controller.archive.errors import ArchiveError
    from controller.archive.retention import RETENTION_LOCK

    await _load(archive_db, [e for e in _generate() if e.table == "demo-1"])
    async with await psycopg.AsyncConnection.connect(archive_db, autocommit=True) as other:
        await other.execute("SELECT pg_advisory_lock(%s)", (RETENTION_LOCK,))
        with pytest.raises(RetentionError, match="another retention run is in progress"):
            await retain(archive_db, SETTINGS, tmp_path / "export", now=NOW)
    empty = postgres_cluster.create_database("never_migrated")
    with pytest.raises(ArchiveError, match='retention stopped: relation "events" does not exist'):
        await retain(empty, SETTINGS, tmp_path / "export", now=NOW)


async def test_an_export_folder_that_cannot_be_written_deletes_nothing(archive_db, tmp_path):
    entries = [e for e in _generate() if e.table == "demo-1"]
    await _load(archive_db, entries)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the export folder should be")
    partitions = await retain(archive_db, SETTINGS, blocker / "export", now=NOW)
    outcomes = [i.outcome for p in partitions for i in p.items]
    assert outcomes and all(o.startswith("failed, nothing deleted: cannot write") for o in outcomes)
    assert (await _rows(archive_db, "SELECT count(*) FROM events"))[0][0] == len(entries)


# -- the side tables: rejected, table_status, gaps, alerts -------------------------------------

SIDE_SETTINGS = RetentionSettings.model_validate(
    {**SETTINGS.model_dump(), "unattributed_keep": "60d"}
)
UNATTRIBUTED_KEEP = Keep(60, "d")  # rows with no table, rejected rows of tables in no class
TIME_COLUMN = {
    "rejected": "received_at",
    "table_status": "received_at",
    "gaps": "detected_at",
    "alerts": "raised_at",
}
# Which table ids each side table has rows of (None: no table id). "house-1" is in no class;
# "stranger 1" and "_no_table" are unknown tables (their file names must not collide).
SIDE_TABLE_IDS: dict[str, tuple[str | None, ...]] = {
    "rejected": ("tp-1", "demo-1", "house-1", "stranger 1", "_no_table", None),
    "table_status": ("tp-1", "tp-2", "demo-1", "house-1"),
    "gaps": ("tp-1", "demo-1", "house-1"),
    "alerts": ("tp-1", "demo-1", "house-1", None),
}


@dataclass
class SideRow:
    side: str
    table: str | None
    at: datetime
    values: dict[str, Any]
    id: int = 0


def _next_month(at: datetime) -> datetime:
    return datetime(at.year + at.month // 12, at.month % 12 + 1, 1, tzinfo=UTC)


def _side_values(side: str, table: str | None, at: datetime, n: int) -> dict[str, Any]:
    """A row's columns (but id, table_id and the time), with text a CSV must quote."""
    if side == "rejected":
        return {
            "topic": f"tables/{table}/events" if table else "junk",
            "seq": n if n % 3 else None,
            "reason": f'row {n}: a "quoted", odd\nreason',
            "category": "unknown_table" if table else "malformed",
            "payload": bytes([0, 255, 10, 44, 34, 92]) + str(n).encode(),
        }
    if side == "table_status":
        return {
            "state": "online",
            "session": n,
            "chain_head_seq": n * 10,
            "chain_head_hash": None if n % 2 else "ab" * 32,
            "envelope": {"state": "online", "note": f'n={n}, "x"\n', "seq": n},
        }
    if side == "alerts":
        return {"kind": "gap", "detail": f'gap {n}, "missing"\nsee log'}
    closed = n % 3  # 0: open, 1: filled, 2: alerted (given up)
    return {
        "from_seq": n * 10,
        "to_seq": n * 10 + 2,
        "replay_requested_at": at + timedelta(seconds=1),
        "filled_at": at + timedelta(seconds=5) if closed == 1 else None,
        "alerted_at": at + timedelta(seconds=30) if closed == 2 else None,
        "missing": [n * 10, n * 10 + 2] if closed == 2 else None,
    }


def _side_rows() -> list[SideRow]:
    """Every side table's rows, January to June 2026: at each month's first and last moment."""
    rows: list[SideRow] = []
    n = 0
    for month in range(1, 7):
        start = datetime(2026, month, 1, tzinfo=UTC)
        for at in (start, _next_month(start) - timedelta(microseconds=1)):  # its first, last
            for side, tables in SIDE_TABLE_IDS.items():
                for table in tables:
                    n += 1
                    rows.append(SideRow(side, table, at, _side_values(side, table, at, n)))
    return rows


def _side_keep(row: SideRow) -> Keep | None:
    if row.table is None:
        return UNATTRIBUTED_KEEP
    keep = {"tp": Keep(3, "m"), "demo": Keep(30, "d")}.get(row.table.split("-")[0])
    if keep is None and row.side == "rejected":
        return UNATTRIBUTED_KEEP
    return keep


def _side_open(row: SideRow) -> bool:
    return row.side == "gaps" and row.values["filled_at"] is None and not row.values["alerted_at"]


def _month_due(row: SideRow) -> bool:
    """The row's whole month is older than its period (whether the row is closed or not)."""
    keep = _side_keep(row)
    return keep is not None and _next_month(row.at) <= keep.cutoff(NOW)


def _side_due(row: SideRow) -> bool:
    return _month_due(row) and not _side_open(row)


def _side_folder(row: SideRow) -> str:
    return f"{row.side}_{row.at.year}_{row.at.month:02d}"


async def _load_side(db: str, rows: list[SideRow]) -> dict[str, int]:
    """Insert the rows (their ids filled in) and gap watermarks; the watermarks."""
    marks = {"tp-1": 500, "demo-1": 600, "house-1": 700}
    await (await ArchiveStore.open(db)).close()  # the schema
    await _insert_side(db, rows)
    async with await psycopg.AsyncConnection.connect(db) as conn:
        for table, mark in marks.items():
            await conn.execute(
                "INSERT INTO gap_watermarks (table_id, scanned_to) VALUES (%s, %s)", (table, mark)
            )
    return marks


async def _insert_side(db: str, rows: list[SideRow]) -> None:
    async with await psycopg.AsyncConnection.connect(db) as conn:
        for row in rows:
            values = {"table_id": row.table, TIME_COLUMN[row.side]: row.at, **row.values}
            if row.side == "table_status":
                values["envelope"] = Jsonb(values["envelope"])
            query = sql.SQL("INSERT INTO {} ({}) VALUES ({}) RETURNING id").format(
                sql.Identifier(row.side),
                sql.SQL(", ").join(map(sql.Identifier, values)),
                sql.SQL(", ").join(sql.Placeholder() * len(values)),
            )
            cursor = await conn.execute(query, list(values.values()))
            found = await cursor.fetchone()
            assert found is not None
            row.id = found[0]


async def _side_ids(db: str) -> dict[str, set[int]]:
    return {side: {r[0] for r in await _rows(db, f"SELECT id FROM {side}")} for side in TIME_COLUMN}


def _parsed(side: str, line: dict[str, str]) -> tuple[str | None, datetime, dict[str, Any]]:
    """An exported CSV row back as (table id, time, the other columns), typed as inserted."""
    values: dict[str, Any] = {k: (v if v != "" else None) for k, v in line.items()}
    table, at = values.pop("table_id"), datetime.fromisoformat(values.pop(TIME_COLUMN[side]))
    del values["id"]
    for column in ("seq", "session", "chain_head_seq", "from_seq", "to_seq"):
        if values.get(column) is not None:
            values[column] = int(values[column])
    for column in ("replay_requested_at", "filled_at", "alerted_at"):
        if values.get(column) is not None:
            values[column] = datetime.fromisoformat(values[column])
    if side == "rejected":
        assert values["payload"].startswith("\\x")  # bytea as COPY writes it: hex
        values["payload"] = bytes.fromhex(values["payload"][2:])
    if side == "table_status":
        values["envelope"] = json.loads(values["envelope"])
    if values.get("missing") is not None:
        values["missing"] = [int(s) for s in values["missing"].strip("{}").split(",")]
    return table, at, values


SIDE_FILE_NAMES = {
    "stranger 1": "stranger%201.csv",
    "_no_table": "%5Fno_table.csv",
    None: "_no_table.csv",
}


def _check_side_folder(export: Path, folder: str, due: list[SideRow]) -> list[SideRow]:
    """Check one side table's month folder against the due rows; the rows its files hold."""
    side = folder.rsplit("_", 2)[0]
    groups: dict[str | None, list[SideRow]] = {}
    for r in sorted(due, key=lambda r: r.id):
        if _side_folder(r) == folder:
            groups.setdefault(r.table, []).append(r)
    manifest = json.loads((export / folder / "manifest.json").read_text())
    assert (manifest["table"], manifest["month"]) == (side, f"{folder[-7:-3]}-{folder[-2:]}")
    assert manifest["columns"][0] == "id" and "content_sha256" in manifest
    assert sorted(map(str, (f["table"] for f in manifest["files"]))) == sorted(map(str, groups))
    found: list[SideRow] = []
    for listed in manifest["files"]:
        mine = groups[listed["table"]]
        path = export / folder / listed["file"]
        assert listed["file"] == SIDE_FILE_NAMES.get(listed["table"], f"{listed['table']}.csv")
        assert listed["rows"] == len(mine) and listed["deleted"] == "rows deleted"
        assert listed["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert (listed["first_id"], listed["last_id"]) == (mine[0].id, mine[-1].id)
        assert (listed["first_at"], listed["last_at"]) == (
            mine[0].at.isoformat(),
            mine[-1].at.isoformat(),
        )
        with path.open(newline="") as handle:
            lines = list(csv.DictReader(handle))
        assert list(lines[0]) == manifest["columns"]
        assert [int(line["id"]) for line in lines] == [r.id for r in mine]
        assert [_parsed(side, line) for line in lines] == [(r.table, r.at, r.values) for r in mine]
        found += mine
    assert _sha256sum_check(export / folder) == 0
    return found


async def test_side_tables_are_exported_verified_and_only_then_deleted(archive_db, tmp_path):
    rows = _side_rows()
    marks = await _load_side(archive_db, rows)
    entries = [e for e in _generate() if e.table == "demo-1"]  # events go in the same run
    await _load(archive_db, entries)
    export = tmp_path / "export"
    partitions = await retain(archive_db, SIDE_SETTINGS, export, now=NOW)
    outcomes = {(p.name, i.table, i.outcome) for p in partitions for i in p.items}
    assert not [o for o in outcomes if o[2].startswith("failed")], outcomes

    # Exactly the due rows are gone, exactly the rest stay (the open gaps among them).
    due = [r for r in rows if _side_due(r)]
    assert {r.side for r in due} == set(TIME_COLUMN)
    assert {r.table for r in due if r.side == "rejected"} == set(SIDE_TABLE_IDS["rejected"])
    assert await _side_ids(archive_db) == {
        side: {r.id for r in rows if r.side == side and not _side_due(r)} for side in TIME_COLUMN
    }
    open_gaps = {r.id for r in rows if _side_open(r) and _month_due(r)}
    assert open_gaps and open_gaps <= (await _side_ids(archive_db))["gaps"]
    watermarks = await _rows(archive_db, "SELECT table_id, scanned_to FROM gap_watermarks")
    assert dict(watermarks) == marks
    assert (await _rows(archive_db, "SELECT count(*) FROM entry_keys"))[0][0] == len(entries)
    assert (await _rows(archive_db, "SELECT count(*) FROM events"))[0][0] == len(
        [e for e in entries if not _due(e)]
    )

    # Every due (side table, table id, month) is one verified file holding exactly its rows.
    folders = {_side_folder(r) for r in due}
    assert {p.name for p in export.iterdir()} == folders | {_month(e) for e in entries if _due(e)}
    exported = [r for folder in sorted(folders) for r in _check_side_folder(export, folder, due)]
    assert sorted((r.side, r.id) for r in exported) == sorted((r.side, r.id) for r in due)
    # The events' manifests keep their format.
    events = json.loads((export / "events_2026_01" / "manifest.json").read_text())
    assert list(events) == ["partition", "columns", "content_sha256", "files"]
    assert events["content_sha256"] == (
        "sha256 over each row's 'session\\tseq\\tenvelope\\n', in file order"
    )
    assert list(events["files"][0])[:9] == [
        "file",
        "table",
        "rows",
        "sha256",
        "content_sha256",
        "first_seq",
        "first_at",
        "last_seq",
        "last_at",
    ]

    # A second run finds nothing more; a late row of a pruned month goes to a second file.
    assert await retain(archive_db, SIDE_SETTINGS, export, now=NOW) == []
    at = datetime(2026, 2, 20, tzinfo=UTC)
    late = SideRow("rejected", None, at, _side_values("rejected", None, at, 999))
    await _insert_side(archive_db, [late])
    await retain(archive_db, SIDE_SETTINGS, export, now=NOW)
    manifest = json.loads((export / "rejected_2026_02" / "manifest.json").read_text())
    files = [f["file"] for f in manifest["files"] if f["table"] is None]
    assert files == ["_no_table.csv", "_no_table.2.csv"]
    with (export / "rejected_2026_02" / "_no_table.2.csv").open(newline="") as handle:
        assert [int(line["id"]) for line in csv.DictReader(handle)] == [late.id]
    assert _sha256sum_check(export / "rejected_2026_02") == 0
    assert late.id not in (await _side_ids(archive_db))["rejected"]


def _side_plan(rows: list[SideRow]) -> list[tuple[str, str, int, str]]:
    """The side tables' plan the rows call for: (folder, table, rows, what a dry run says)."""
    due_folders = {_side_folder(r) for r in rows if _side_due(r)}
    counts: dict[tuple[str, str, str], int] = {}
    for r in rows:
        if _side_folder(r) not in due_folders:
            continue
        outcome = (
            "kept (open)"
            if _side_open(r)
            else "would export, then delete the rows"
            if _side_due(r)
            else "kept"
        )
        key = (_side_folder(r), r.table or "(no table)", outcome)
        counts[key] = counts.get(key, 0) + 1
    return sorted((folder, table, n, outcome) for (folder, table, outcome), n in counts.items())


async def test_a_side_dry_run_shows_the_plan_and_changes_nothing(archive_db, tmp_path):
    rows = _side_rows()
    marks = await _load_side(archive_db, rows)
    before = await _side_ids(archive_db)
    partitions = await retain(archive_db, SIDE_SETTINGS, tmp_path / "export", now=NOW, dry_run=True)
    assert await _side_ids(archive_db) == before
    assert not (tmp_path / "export").exists()
    shown = sorted((p.name, i.table, i.rows, i.outcome) for p in partitions for i in p.items)
    assert shown == _side_plan(rows)
    # An open gap of a class's table, in a month whose closed gaps go, stays.
    (gap, *_) = [r for r in rows if _side_open(r) and _month_due(r)]
    assert (_side_folder(gap), gap.table, 1, "kept (open)") in shown
    assert ("alerts_2026_01", "house-1", 2, "kept") in shown  # a table in no class
    lines = list(format_run(partitions, NOW, tmp_path / "export"))
    assert any(
        line.startswith("rejected_2026_04  (no table)")
        and "unattributed (keep 60d)" in line
        and line.endswith("would export, then delete the rows")
        for line in lines
    ), lines
    assert any(
        line.startswith(f"{_side_folder(gap)}  {gap.table}") and line.endswith("kept (open)")
        for line in lines
    )
    watermarks = await _rows(archive_db, "SELECT table_id, scanned_to FROM gap_watermarks")
    assert dict(watermarks) == marks


async def test_a_side_file_that_does_not_verify_deletes_nothing(archive_db, tmp_path, monkeypatch):
    rows = _side_rows()
    await _load_side(archive_db, rows)
    before = await _side_ids(archive_db)
    # Fault injection: the disk loses the last line of every side table's file written.
    digest = retention_side.file_digest

    def truncated(path: Path, columns: Any) -> Any:
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))
        return digest(path, columns)

    monkeypatch.setattr(retention_side, "file_digest", truncated)
    partitions = await retain(archive_db, SIDE_SETTINGS, tmp_path / "export", now=NOW)
    outcomes = [i.outcome for p in partitions for i in p.items if i.due]
    assert len(outcomes) == len({(_side_folder(r), r.table) for r in rows if _side_due(r)})
    assert all(o.startswith("failed, nothing deleted") for o in outcomes), outcomes
    # A half record (text with a line break, cut): not parsed; a whole record lost: counted.
    reasons = ("does not hold the database's rows", "back: line")
    assert all(any(reason in o for reason in reasons) for o in outcomes)
    assert any(reasons[0] in o for o in outcomes) and any(reasons[1] in o for o in outcomes)
    assert await _side_ids(archive_db) == before
    assert list((tmp_path / "export").glob("*/manifest.json")) == []
    assert list((tmp_path / "export").glob("*/SHA256SUMS")) == []


def test_a_bad_unattributed_period_in_the_config_names_the_field(tmp_path):
    from controller.archive.config import load_archive_settings
    from controller.errors import ConfigError

    config = tmp_path / "archive.toml"
    config.write_text(
        '[database]\nurl = "postgresql://x@y/z"\n[retention]\nunattributed_keep = "90"\n'
    )
    with pytest.raises(ConfigError, match=r"retention\.unattributed_keep.*'90' is not a period"):
        load_archive_settings(config)
    config.write_text(
        '[database]\nurl = "postgresql://x@y/z"\n[retention]\nunattributed_keep = "90d"\n'
    )
    assert load_archive_settings(config).retention.unattributed_keep == "90d"
    assert RetentionSettings().unattributed_keep is None  # unset: such rows are kept for ever


def test_archive_retain_command_prunes_the_side_tables(archive_db, tmp_path):
    import asyncio

    rows = [r for r in _side_rows() if r.side in {"rejected", "gaps"}]
    asyncio.run(_load_side(archive_db, rows))
    command, dry = _retain_command(archive_db, tmp_path, 'unattributed_keep = "60d"\n')
    # The clock is after 2026-07: every month up to June is older than 30 and 60 days.
    assert "rejected_2026_06  (no table)" in dry.stdout
    assert any(
        line.startswith("gaps_2026_06  tp-1") and "no class (kept for ever)" in line
        for line in dry.stdout.splitlines()
    ), dry.stdout
    assert not (tmp_path / "out").exists()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "exported, rows deleted" in done.stdout
    remaining = asyncio.run(_side_ids(archive_db))
    # Rejected rows of tables in no class (tp-1 here) and of no table go after 60 days.
    assert remaining["rejected"] == set()
    assert remaining["gaps"] == {
        r.id for r in rows if r.side == "gaps" and (r.table != "demo-1" or _side_open(r))
    }
