"""The journal on a real SQLite file: durability, seq, sessions, migrations, delivery marks."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import JournalError
from controller.journal import (
    BODY_MODELS,
    JOURNAL_ID_TEXT,
    MIGRATIONS,
    SCHEMA_VERSION,
    CardDealtData,
    EntryBody,
    EntryKind,
    Journal,
    JournalEntry,
    RoundVoidedData,
    SettledBet,
    TableInfoData,
    TableStatusData,
    body_text,
    format_time,
)


def _raw(path: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql, args).fetchall()


def test_new_file_gets_schema_wal_and_first_session(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        assert journal.session == 1
        assert journal.last_seq == 0
        assert journal.undelivered() == []
    assert _raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert _raw(path, "PRAGMA journal_mode") == [("wal",)]
    columns = [row[1] for row in _raw(path, "PRAGMA table_info(entries)")]
    assert columns == [
        "seq",
        "session",
        "round_id",
        "kind",
        "happened_at",
        "body",
        "delivered_at",
        "hash",
    ]
    indexes = {row[0] for row in _raw(path, "SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"entries_round", "entries_kind", "entries_undelivered"} <= indexes
    assert [row[1] for row in _raw(path, "PRAGMA table_info(meta)")] == ["key", "value"]


def test_entries_survive_close_and_reopen_and_seq_continues(tmp_path):
    path = tmp_path / "j.sqlite"
    moment = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    with Journal.open(path) as journal:
        first = journal.append(
            "round_opened", {"round_no": 1, "game": "g"}, round_id="r1", happened_at=moment
        )
        second = journal.append("card_dealt", {"slot": "A1", "card": "As"}, round_id="r1")
    assert (first.seq, second.seq) == (1, 2)
    with Journal.open(path) as journal:
        assert journal.session == 2
        stored = list(journal.entries())
        assert stored == [first, second]
        assert stored[0].happened_at == moment
        assert stored[0].session == 1
        third = journal.append("table_status", {"state": "ready", "detail": ""})
        assert third.seq == 3
        assert third.session == 2
        assert third.round_id is None


def test_happened_at_in_other_zone_is_stored_as_utc(tmp_path):
    plus_two = timezone(timedelta(hours=2))
    local = datetime(2026, 5, 1, 12, 0, 0, tzinfo=plus_two)
    with Journal.open(tmp_path / "j.sqlite") as journal:
        entry = journal.append("x", {}, happened_at=local)
        assert entry.happened_at == local
        assert entry.happened_at.tzinfo is UTC
        assert journal.get(entry.seq) == entry
    (text,) = _raw(tmp_path / "j.sqlite", "SELECT happened_at FROM entries")[0]
    assert text == "2026-05-01T10:00:00.000000Z"


def test_naive_time_and_unserializable_body_are_refused_without_using_a_seq(tmp_path):
    with Journal.open(tmp_path / "j.sqlite") as journal:
        with pytest.raises(JournalError, match="no time zone"):
            journal.append("x", {}, happened_at=datetime(2026, 1, 1))
        with pytest.raises(JournalError, match="not JSON-able") as info:
            journal.append("x", {"bad": object()})
        assert info.value.context["seq"] == 1
        assert info.value.context["kind"] == "x"
        assert journal.append("x", {}).seq == 1


def test_session_counter_increments_on_every_open(tmp_path):
    path = tmp_path / "j.sqlite"
    sessions = []
    for _ in range(4):
        with Journal.open(path) as journal:
            sessions.append(journal.session)
            assert journal.get_meta("session") == str(journal.session)
    assert sessions == [1, 2, 3, 4]


def test_second_open_of_the_same_file_is_refused(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal.open(path):
        with pytest.raises(JournalError, match="in use") as info:
            Journal.open(path)
        assert info.value.context["path"] == str(path)
    with Journal.open(path) as again:  # released on close
        assert again.session == 2


def test_migrations_are_applied_once_and_reopening_changes_nothing(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        journal.append("x", {"n": 1})
    schema_before = _raw(path, "SELECT type, name, sql FROM sqlite_master ORDER BY name")
    with Journal.open(path) as journal:
        assert [entry.body for entry in journal.entries()] == [{"n": 1}]
    assert _raw(path, "SELECT type, name, sql FROM sqlite_master ORDER BY name") == schema_before
    assert _raw(path, "PRAGMA user_version") == [(len(MIGRATIONS),)]


def test_an_empty_sqlite_file_is_migrated(tmp_path):
    path = tmp_path / "j.sqlite"
    sqlite3.connect(path).close()  # an existing file at user_version 0
    with Journal.open(path) as journal:
        assert journal.session == 1
        journal.append("x", {})
    assert _raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "j.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(JournalError, match="newer") as info:
        Journal.open(path)
    assert info.value.context["version"] == SCHEMA_VERSION + 1
    # The refused open released the lock.
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 0")
    Journal.open(path).close()


def test_undelivered_in_seq_order_with_limit_and_mark_delivered(tmp_path):
    with Journal.open(tmp_path / "j.sqlite") as journal:
        for n in range(10):
            journal.append("x", {"n": n})
        assert [e.seq for e in journal.undelivered()] == list(range(1, 11))
        assert [e.seq for e in journal.undelivered(limit=3)] == [1, 2, 3]
        journal.mark_delivered(1)
        journal.mark_delivered_many([2, 3, 5])
        assert [e.seq for e in journal.undelivered()] == [4, 6, 7, 8, 9, 10]
        assert journal.undelivered_count() == 6
        delivered = journal.get(2)
        assert delivered is not None
        assert delivered.delivered_at is not None
        assert delivered.delivered_at.tzinfo is UTC
        mark = delivered.delivered_at
        journal.mark_delivered(2)  # idempotent: the first acknowledgement time stays
        again = journal.get(2)
        assert again is not None
        assert again.delivered_at == mark
        with pytest.raises(JournalError, match="no journal entry with seq 99") as info:
            journal.mark_delivered(99)
        assert info.value.context["seq"] == 99
    with Journal.open(tmp_path / "j.sqlite") as journal:
        assert [e.seq for e in journal.undelivered()] == [4, 6, 7, 8, 9, 10]


def test_entries_filters_by_round_and_start_and_pages(tmp_path):
    with Journal.open(tmp_path / "j.sqlite") as journal:
        for n in range(25):
            journal.append("x", {"n": n}, round_id=f"r{n % 3}")
        assert [e.seq for e in journal.entries(from_seq=20)] == [20, 21, 22, 23, 24, 25]
        r1 = [e.body["n"] for e in journal.entries(round_id="r1", page=4)]
        assert r1 == [n for n in range(25) if n % 3 == 1]
        assert len(list(journal.entries(page=7))) == 25
        last = journal.last_of_kind("x", before_seq=10)
        assert last is not None
        assert last.seq == 9


def test_listener_runs_after_the_commit(tmp_path):
    path = tmp_path / "j.sqlite"
    seen: list[tuple[JournalEntry, list[tuple[object, ...]]]] = []

    def listener(entry: JournalEntry) -> None:
        # Another connection sees the row: it was committed before we were called.
        seen.append((entry, _raw(path, "SELECT seq, kind FROM entries WHERE seq = ?", entry.seq)))

    def broken(entry: JournalEntry) -> None:
        raise RuntimeError("listener bug")

    with Journal.open(path) as journal:
        journal.add_listener(broken)
        journal.add_listener(listener)
        entry = journal.append("card_dealt", {"card": "As"})
        journal.remove_listener(listener)
        journal.append("card_dealt", {"card": "Kd"})
    assert seen == [(entry, [(1, "card_dealt")])]


def test_meta_values_persist(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        assert journal.get_meta("round.next_no") is None
        journal.set_meta("round.next_no", "7")
        journal.set_meta("round.next_no", "8")
        with pytest.raises(JournalError, match="managed by the journal"):
            journal.set_meta("session", "100")
    with Journal.open(path) as journal:
        assert journal.get_meta("round.next_no") == "8"


def test_closed_journal_refuses_use(tmp_path):
    journal = Journal.open(tmp_path / "j.sqlite")
    journal.close()
    journal.close()
    assert journal.closed
    with pytest.raises(JournalError, match="closed"):
        journal.append("x", {})


@settings(deadline=None, max_examples=25)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 5)),
            st.tuples(st.just("reopen"), st.just(0)),
            st.tuples(st.just("deliver"), st.integers(0, 40)),
        ),
        max_size=12,
    )
)
def test_seq_is_gap_free_and_never_repeats_across_reopens(tmp_path_factory, operations):
    path = tmp_path_factory.mktemp("seq") / "j.sqlite"
    journal = Journal.open(path)
    appended: list[int] = []
    sessions = [journal.session]
    try:
        for op, n in operations:
            if op == "append":
                appended.extend(journal.append("x", {"i": i}).seq for i in range(n))
            elif op == "reopen":
                journal.close()
                journal = Journal.open(path)
                sessions.append(journal.session)
            elif appended:
                journal.mark_delivered(appended[n % len(appended)])
        assert appended == list(range(1, len(appended) + 1))
        assert [e.seq for e in journal.entries()] == appended
        assert sessions == list(range(1, len(sessions) + 1))
        delivered = {e.seq for e in journal.entries() if e.delivered_at is not None}
        assert [e.seq for e in journal.undelivered(limit=1000)] == [
            s for s in appended if s not in delivered
        ]
    finally:
        journal.close()


@pytest.mark.infra
def test_append_returns_only_after_the_entry_is_on_disk(tmp_path):
    """A writer process killed with SIGKILL loses nothing it reported as appended."""
    path = tmp_path / "j.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        from controller.journal import Journal
        journal = Journal.open({str(path)!r})
        n = 0
        while True:
            n += 1
            entry = journal.append("x", {{"n": n}})
            sys.stdout.write(f"SEQ {{entry.seq}}\\n")
            sys.stdout.flush()
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
        text=True,
    )
    assert process.stdout is not None
    reported = []
    for line in process.stdout:
        if not line.startswith("SEQ "):
            continue  # a log line
        reported.append(int(line.split()[1]))
        if len(reported) == 300:
            break
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    rest = process.stdout.read()
    reported.extend(int(line.split()[1]) for line in rest.splitlines() if line.startswith("SEQ "))
    with Journal.open(path) as journal:
        stored = [e.seq for e in journal.entries()]
        assert journal.session == 2
    assert stored[: len(reported)] == reported
    assert stored == list(range(1, len(stored) + 1))
    assert [json.loads(row[0])["n"] for row in _raw(path, "SELECT body FROM entries")] == stored


# -- schema v2: hash chain, read-only access, verify --------------------------------------

V1_DDL = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE entries (
        seq INTEGER PRIMARY KEY,
        session INTEGER NOT NULL,
        round_id TEXT,
        kind TEXT NOT NULL,
        happened_at TEXT NOT NULL,
        body TEXT NOT NULL,
        delivered_at TEXT
    )""",
    "CREATE INDEX entries_round ON entries (round_id, seq)",
    "CREATE INDEX entries_undelivered ON entries (seq) WHERE delivered_at IS NULL",
    "INSERT INTO meta (key, value) VALUES ('session', '0')",
)
"""The released v1 schema, verbatim (what a journal written by tablectl 0.1 holds)."""

SLOTS = ["A1", "B1", "A2", "B2", "A3", "B3"]


def _round_rows(round_id: str, round_no: int, cards: list[str]) -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = [
        (
            "round_opened",
            {"round_id": round_id, "round_no": round_no, "game": "g", "slots": SLOTS},
        ),
        ("betting_closed", {}),
    ]
    for index, card in enumerate(cards):
        rows.append(
            (
                "card_dealt",
                {
                    "slot": SLOTS[index],
                    "hand": SLOTS[index][0],
                    "index": index,
                    "card": card,
                    "face": "up",
                },
            )
        )
    by_hand: dict[str, list[str]] = {}
    for index, card in enumerate(cards):
        by_hand.setdefault(SLOTS[index][0], []).append(card)
    rows.append(("round_result", {"cards": by_hand, "winner": "A"}))
    return rows


def _write_v1_journal(path: Path, sessions: int = 2) -> int:
    """A v1 file as the v1 code wrote it: DDL, session counter, compact JSON bodies."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("BEGIN IMMEDIATE")
    for statement in V1_DDL:
        db.execute(statement)
    db.execute("PRAGMA user_version = 1")
    db.execute("COMMIT")
    seq = 0
    cards = ["As", "Kd", "2c", "9h", "Td", "3s"]
    for session in range(1, sessions + 1):
        db.execute("UPDATE meta SET value = ? WHERE key = 'session'", (str(session),))
        round_id = f"t-{session:06d}"
        for kind, body in _round_rows(round_id, session, cards):
            seq += 1
            db.execute(
                "INSERT INTO entries (seq, session, round_id, kind, happened_at, body, "
                "delivered_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    seq,
                    session,
                    round_id,
                    kind,
                    f"2026-01-01T00:00:{seq:02d}.000000Z",
                    json.dumps(body, separators=(",", ":"), ensure_ascii=False),
                    f"2026-01-01T00:00:{seq:02d}.500000Z" if session == 1 else None,
                ),
            )
    db.close()
    return seq


def _journal_with_rounds(path: Path, rounds: int = 3) -> None:
    cards = ["As", "Kd", "2c", "9h", "Td", "3s"]
    with Journal.open(path) as journal:
        for n in range(1, rounds + 1):
            for kind, body in _round_rows(f"t-{n:06d}", n, cards):
                journal.append(kind, body, round_id=f"t-{n:06d}")


def test_a_real_v1_file_is_migrated_and_its_chain_computed(tmp_path):
    path = tmp_path / "v1.sqlite"
    written = _write_v1_journal(path)
    before = _raw(
        path,
        "SELECT seq, session, round_id, kind, happened_at, body, delivered_at "
        "FROM entries ORDER BY seq",
    )
    with Journal.open(path) as journal:
        assert journal.schema_version == SCHEMA_VERSION == 3
        assert journal.session == 3
        assert journal.journal_id is not None and JOURNAL_ID_TEXT.match(journal.journal_id)
        stored = list(journal.entries())
        assert [e.seq for e in stored] == list(range(1, written + 1))
        assert all(e.hash is not None and len(e.hash) == 64 for e in stored)
        report = journal.verify()
        assert report.ok, report.problems
        assert (report.entries, report.rounds, report.settled) == (written, 2, 2)
        assert report.undelivered == written // 2
        # The chain continues over new appends from the migrated head.
        new = journal.append("table_status", {"state": "ready"})
        assert new.seq == written + 1
        assert journal.verify().ok
        assert journal.verify().chain_head == new.hash
    # Nothing of the old rows changed but the new column.
    after = _raw(
        path,
        "SELECT seq, session, round_id, kind, happened_at, body, delivered_at "
        "FROM entries WHERE seq <= ? ORDER BY seq",
        written,
    )
    assert after == before
    assert _raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


def test_hash_is_the_documented_chain(tmp_path):
    from controller.journal import GENESIS_HASH, entry_hash

    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        first = journal.append("x", {"a": "é"}, round_id="r")
        second = journal.append("y", {})
    rows = _raw(path, "SELECT seq, session, round_id, kind, happened_at, body, hash FROM entries")
    prev = GENESIS_HASH
    for seq, session, round_id, kind, happened_at, body, chain in rows:
        canonical = json.dumps(
            [seq, session, round_id, kind, happened_at, body],
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        import hashlib

        expected = hashlib.sha256(bytes.fromhex(prev) + canonical).hexdigest()
        assert chain == expected
        assert (
            entry_hash(
                prev,
                seq=seq,
                session=session,
                round_id=round_id,
                kind=kind,
                happened_at=happened_at,
                body=body,
            )
            == expected
        )
        prev = chain
    assert (first.hash, second.hash) == (rows[0][6], rows[1][6])


def test_verify_is_clean_on_a_sound_journal_and_an_unfinished_last_round(tmp_path):
    path = tmp_path / "j.sqlite"
    _journal_with_rounds(path, 3)
    with Journal.open(path) as journal:
        journal.append(
            "round_opened",
            {"round_id": "t-000004", "round_no": 4, "slots": SLOTS},
            round_id="t-000004",
        )
        journal.append(
            "card_refused",
            {"slot": None, "card": "As", "reason": "betting is open"},
            round_id="t-000004",
        )
        journal.append("device_status", {"state": "ready"})
        report = journal.verify()
    assert report.ok, [str(p) for p in report.problems]
    assert (report.rounds, report.settled, report.voided) == (4, 3, 0)
    assert report.unfinished == ["t-000004"]


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (
            "UPDATE entries SET body = replace(body, '\"Kd\"', '\"Kh\"') WHERE seq = 4",
            [(4, "hash chain broken"), (9, "result card Kd of hand B was not dealt")],
        ),
        (
            "DELETE FROM entries WHERE seq = 5",
            [
                (6, "gap: seq 5 missing"),
                (6, "hash chain broken"),
                (9, "result after 5 of 6 cards"),
                (9, "result card 2c of hand A was not dealt"),
            ],
        ),
        (
            "UPDATE entries SET session = 7 WHERE seq = 12",
            [
                (12, "hash chain broken"),
                (12, "beyond the meta counter"),
                (13, "session 1 after session 7"),
            ],
        ),
        (
            "UPDATE entries SET body = '{not json' WHERE seq = 2",
            [(2, "hash chain broken"), (2, "body is not JSON"), (3, "before betting closed")],
        ),
        (
            "UPDATE entries SET delivered_at = '2000-01-01T00:00:00.000000Z' WHERE seq = 3",
            [(3, "is before happened_at")],
        ),
    ],
    ids=["altered-card", "removed-entry", "altered-session", "broken-json", "early-delivery"],
)
def test_verify_names_what_was_tampered_and_where(tmp_path, tamper, expected):
    path = tmp_path / "j.sqlite"
    _journal_with_rounds(path, 2)
    with sqlite3.connect(path) as db:
        db.execute(tamper)
    with Journal.open_readonly(path) as journal:
        report = journal.verify()
    assert not report.ok
    found = [(problem.seq, problem.what) for problem in report.problems]
    for seq, text in expected:
        assert any(s == seq and text in what for s, what in found), (seq, text, found)
    assert report.problems_total == len(report.problems)
    assert all(problem.round_id in (None, "t-000001", "t-000002") for problem in report.problems)


def test_verify_checks_the_round_order(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        add = journal.append
        add("round_opened", {"round_id": "t-1", "round_no": 1, "slots": ["A1"]}, round_id="t-1")
        add("card_dealt", {"hand": "A", "index": 0, "card": "As"}, round_id="t-1")  # 2: early
        add("round_opened", {"round_id": "t-2", "round_no": 2, "slots": ["A1"]}, round_id="t-2")
        add("betting_closed", {}, round_id="t-2")
        add("round_result", {"cards": {}}, round_id="t-2")  # 5: no cards
        add("round_voided", {"bets": {"a": {"outcome": "refund"}}}, round_id="t-1")
        add("round_result", {"cards": {}}, round_id="t-1")  # 7: after the void
        add("card_dealt", {"index": 0, "card": "2c"}, round_id="t-9")  # 8: never opened
        add("round_opened", {"round_id": "t-3", "round_no": 3}, round_id="t-3")
        add("round_voided", {"bets": {"a": {"outcome": "lose"}}}, round_id="t-3")  # 10
        add("round_result", {}, round_id=None)  # 11
        report = journal.verify()
    found = {(p.seq, p.round_id): p.what for p in report.problems}
    assert "card dealt before betting closed" in found[(2, "t-1")]
    assert "round opened while round t-1 is unfinished" in found[(3, "t-2")]
    assert "result after 0 of 1 cards" in found[(5, "t-2")]
    assert "round_result after the round's void" in found[(7, "t-1")]
    assert "never opened" in found[(8, "t-9")]
    assert "void without a refund" in found[(10, "t-3")]
    assert "without a round id" in found[(11, None)]
    assert report.unfinished == []


def test_readonly_open_beside_a_live_writer(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as writer:
        writer.append("x", {"n": 1})
        # No lock taken: it opens while the writer holds the journal.
        with Journal.open_readonly(path) as reader:
            assert reader.readonly
            assert reader.session == writer.session == 1
            assert [e.body for e in reader.entries()] == [{"n": 1}]
            writer.append("x", {"n": 2})  # the writer is not blocked by the reader
            assert [e.body["n"] for e in reader.entries()] == [1, 2]
            assert reader.verify().ok
            for write in (
                lambda: reader.append("x", {}),
                lambda: reader.mark_delivered(1),
                lambda: reader.set_meta("k", "v"),
            ):
                with pytest.raises(JournalError, match="read-only") as info:
                    write()
                assert info.value.context["path"] == str(path)
    with Journal.open(path) as again:
        assert again.session == 2  # the reader started no session


def test_readonly_refuses_what_is_not_a_journal(tmp_path):
    with pytest.raises(JournalError, match="no journal file") as info:
        Journal.open_readonly(tmp_path / "missing.sqlite")
    assert info.value.context["path"] == str(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    with pytest.raises(JournalError, match="not a tablectl journal"):
        Journal.open_readonly(empty)
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(JournalError, match="newer"):
        Journal.open_readonly(newer)


def test_readonly_reads_an_unmigrated_v1_file_without_changing_it(tmp_path):
    path = tmp_path / "v1.sqlite"
    written = _write_v1_journal(path)
    with Journal.open_readonly(path) as journal:
        assert journal.schema_version == 1
        assert journal.last_seq == written
        entries = list(journal.entries(round_id="t-000002"))
        assert len(entries) == 9
        assert all(e.hash is None for e in entries)
        report = journal.verify()
    assert [p.what for p in report.problems] == [
        "schema version 1 is older than 2: no hash chain to check (opening it for writing "
        "migrates it)"
    ]
    assert report.settled == 2
    assert _raw(path, "PRAGMA user_version") == [(1,)]


# -- deferred delivery marks (note_delivered) ----------------------------------------------

MARKED_AT = datetime(2030, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)
MARKED_AT_TEXT = "2030-06-01T12:00:00.123456Z"


def _delivered_in_file(path: Path) -> dict[int, object]:
    """``seq -> delivered_at`` as a second, independent connection reads the file."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return dict(db.execute("SELECT seq, delivered_at FROM entries ORDER BY seq").fetchall())


def _journal_of(path: Path, n: int) -> Journal:
    """A journal holding ``n`` entries (kinds ``a``, ``b``, ``b``...), none delivered."""
    journal = Journal.open(path)
    journal.append("a", {"n": 0})
    for i in range(1, n):
        journal.append("b", {"n": i})
    return journal


def test_a_noted_mark_reaches_the_file_with_the_next_append(tmp_path):
    path = tmp_path / "j.sqlite"
    with _journal_of(path, 2) as journal:
        journal.note_delivered([1], at=MARKED_AT)
        assert journal.unwritten_marks == 1
        # Noted, not written: another connection does not see it yet.
        assert _delivered_in_file(path) == {1: None, 2: None}
        appended = journal.append("c", {"n": 2})
        assert journal.unwritten_marks == 0
        # Written in the append's transaction; the appended row itself is undelivered.
        assert _delivered_in_file(path) == {1: MARKED_AT_TEXT, 2: None, 3: None}
        assert appended.delivered_at is None


def test_flush_delivered_writes_the_noted_marks(tmp_path):
    path = tmp_path / "j.sqlite"
    with _journal_of(path, 3) as journal:
        journal.note_delivered([1, 3], at=MARKED_AT)
        journal.note_delivered([2])
        assert journal.unwritten_marks == 3
        assert set(_delivered_in_file(path).values()) == {None}
        journal.flush_delivered()
        assert journal.unwritten_marks == 0
        in_file = _delivered_in_file(path)
        assert (in_file[1], in_file[3]) == (MARKED_AT_TEXT, MARKED_AT_TEXT)
        assert isinstance(in_file[2], str)
        journal.flush_delivered()  # nothing noted: nothing to do
        assert _delivered_in_file(path) == in_file


@pytest.mark.slow
def test_a_failed_flush_keeps_the_marks_noted(tmp_path):
    path = tmp_path / "j.sqlite"
    with _journal_of(path, 2) as journal:
        journal.note_delivered([1], at=MARKED_AT)
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")  # holds the write lock past the busy timeout
            try:
                with pytest.raises(JournalError, match="cannot mark delivered"):
                    journal.flush_delivered()
            finally:
                other.execute("ROLLBACK")
        assert journal.unwritten_marks == 1
        journal.flush_delivered()
        assert _delivered_in_file(path)[1] == MARKED_AT_TEXT


def _delivery_seen_by(read: str, journal: Journal) -> object:
    """What one of the journal's reads says about entry 1 (noted as delivered at MARKED_AT)."""
    if read == "undelivered":
        return [e.seq for e in journal.undelivered()] == [2, 3]
    if read == "undelivered_from":
        return [e.seq for e in journal.undelivered(from_seq=1)] == [2, 3]
    if read == "undelivered_count":
        return journal.undelivered_count() == 2
    if read == "get":
        entry = journal.get(1)
        return entry is not None and entry.delivered_at == MARKED_AT
    if read == "entries":
        return next(iter(journal.entries())).delivered_at == MARKED_AT
    if read == "last_of_kind":
        entry = journal.last_of_kind("a")
        return entry is not None and entry.seq == 1 and entry.delivered_at == MARKED_AT
    if read == "verify":
        report = journal.verify()
        return report.ok and report.undelivered == 2
    raise AssertionError(read)


@pytest.mark.parametrize(
    "read",
    [
        "undelivered",
        "undelivered_from",
        "undelivered_count",
        "get",
        "entries",
        "last_of_kind",
        "verify",
    ],
)
def test_every_read_of_delivery_state_sees_the_noted_marks(tmp_path, read):
    path = tmp_path / "j.sqlite"
    with _journal_of(path, 3) as journal:
        journal.note_delivered([1], at=MARKED_AT)
        assert _delivery_seen_by(read, journal) is True
        assert journal.unwritten_marks == 0
        assert _delivered_in_file(path)[1] == MARKED_AT_TEXT


def test_verify_judges_noted_marks_too(tmp_path):
    with _journal_of(tmp_path / "j.sqlite", 2) as journal:
        happened = journal.get(2)
        assert happened is not None
        journal.note_delivered([2], at=happened.happened_at - timedelta(hours=1))
        report = journal.verify()
    assert not report.ok
    assert [p.seq for p in report.problems] == [2]
    assert "is before happened_at" in report.problems[0].what


def test_close_writes_the_noted_marks(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = _journal_of(path, 3)
    journal.note_delivered([2, 3], at=MARKED_AT)
    journal.close()
    assert _delivered_in_file(path) == {1: None, 2: MARKED_AT_TEXT, 3: MARKED_AT_TEXT}
    with Journal.open(path) as again:
        assert again.unwritten_marks == 0
        assert [e.seq for e in again.undelivered()] == [1]


def test_a_repeated_mark_keeps_the_first_time_noted_or_written(tmp_path):
    path = tmp_path / "j.sqlite"
    later = MARKED_AT + timedelta(seconds=5)
    with _journal_of(path, 2) as journal:
        journal.note_delivered([1], at=MARKED_AT)
        journal.note_delivered([1], at=later)
        journal.mark_delivered_many([1, 2], at=later)  # writes at once, noted marks first
        assert journal.unwritten_marks == 0
        assert _delivered_in_file(path) == {1: MARKED_AT_TEXT, 2: format_time(later)}


def test_mark_delivered_many_still_writes_at_once(tmp_path):
    path = tmp_path / "j.sqlite"
    with _journal_of(path, 3) as journal:
        journal.mark_delivered_many([3], at=MARKED_AT)
        assert journal.unwritten_marks == 0
        assert _delivered_in_file(path) == {1: None, 2: None, 3: MARKED_AT_TEXT}
        journal.mark_delivered(1)
        assert _delivered_in_file(path)[1] is not None


@pytest.mark.parametrize("bad", [0, -1, 4, 99])
def test_note_delivered_refuses_a_seq_that_is_not_in_the_journal(tmp_path, bad):
    with _journal_of(tmp_path / "j.sqlite", 3) as journal:
        with pytest.raises(JournalError, match=rf"no journal entry with seq {bad} ") as info:
            journal.note_delivered([bad])
        assert info.value.context["seq"] == bad
        assert journal.unwritten_marks == 0


def test_note_delivered_is_all_or_nothing(tmp_path):
    """A batch with one bad seq notes none of its marks, not the good ones before it."""
    with _journal_of(tmp_path / "j.sqlite", 3) as journal:
        with pytest.raises(JournalError, match="seq 99"):
            journal.note_delivered([1, 2, 99])
        assert journal.unwritten_marks == 0
        assert [e.seq for e in journal.undelivered()] == [1, 2, 3]


def test_note_delivered_on_an_empty_closed_or_read_only_journal(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        with pytest.raises(JournalError, match="seq 1"):
            journal.note_delivered([1])
        journal.append("a", {})
        with Journal.open_readonly(path) as reader:
            with pytest.raises(JournalError, match="read-only"):
                reader.note_delivered([1])
            assert reader.unwritten_marks == 0
            reader.flush_delivered()  # nothing to write, nothing refused
        journal.note_delivered([])  # nothing at all is fine
        assert journal.unwritten_marks == 0
    with pytest.raises(JournalError, match="closed"):
        journal.note_delivered([1])


def test_undelivered_from_seq(tmp_path):
    with _journal_of(tmp_path / "j.sqlite", 10) as journal:
        journal.mark_delivered_many([3, 4, 8])
        assert [e.seq for e in journal.undelivered(from_seq=3)] == [5, 6, 7, 9, 10]
        assert [e.seq for e in journal.undelivered(from_seq=5, limit=2)] == [5, 6]
        assert [e.seq for e in journal.undelivered(from_seq=9)] == [9, 10]
        assert journal.undelivered(from_seq=11) == []
        everything = [1, 2, 5, 6, 7, 9, 10]
        assert [e.seq for e in journal.undelivered(from_seq=0)] == everything
        assert [e.seq for e in journal.undelivered()] == everything


def test_the_appended_entry_is_the_one_read_back(tmp_path):
    with Journal.open(tmp_path / "j.sqlite") as journal:
        entry = journal.append("x", {"n": 1}, round_id="r")  # happened_at: now
        assert journal.get(entry.seq) == entry
        assert entry.happened_at.tzinfo is UTC


@settings(deadline=None, max_examples=60)
@given(
    moment=st.datetimes(
        min_value=datetime(1000, 1, 2),  # format_time writes years < 1000 unpadded
        max_value=datetime(9998, 12, 30),
        timezones=st.builds(
            timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
        ),
    )
)
def test_appended_happened_at_equals_the_stored_time(tmp_path_factory, moment):
    path = tmp_path_factory.mktemp("when") / "j.sqlite"
    with Journal.open(path) as journal:
        entry = journal.append("x", {}, happened_at=moment)
        stored = journal.get(entry.seq)
        assert stored is not None
        assert entry.happened_at == stored.happened_at == moment
        assert entry.happened_at.tzinfo is UTC
        assert (entry.happened_at.utcoffset(), entry.happened_at.fold) == (timedelta(0), 0)
        assert str(entry.happened_at) == str(stored.happened_at)
        (text,) = _raw(path, "SELECT happened_at FROM entries")[0]
        assert text == format_time(moment)


def test_set_metas_writes_every_value_in_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        journal.set_metas({"a": "1", "b": "2"})
        journal.set_metas({"b": "3"})
        assert (journal.get_meta("a"), journal.get_meta("b")) == ("1", "3")
    with sqlite3.connect(path) as db:  # durable, as another reader sees the file
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('a', 'b')"))
    assert rows == {"a": "1", "b": "3"}


def test_set_metas_refuses_the_session_counter_and_writes_nothing(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.sqlite") as journal:
        session = journal.get_meta("session")
        with pytest.raises(JournalError, match="session"):
            journal.set_metas({"a": "1", "session": "99"})
        assert journal.get_meta("a") is None
        assert journal.get_meta("session") == session


def test_set_metas_is_all_or_nothing_when_the_write_fails(tmp_path: Path) -> None:
    """Another connection holds the write lock: nothing of the batch is stored."""
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        journal.set_metas({"a": "old"})
        other = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")
            journal._connection().execute("PRAGMA busy_timeout = 50")
            with pytest.raises(JournalError, match="cannot write meta"):
                journal.set_metas({"a": "new", "b": "new"})
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert (journal.get_meta("a"), journal.get_meta("b")) == ("old", None)


# -- typed entries, and a journal written by main's code ----------------------------------------

MAIN_JOURNAL = Path(__file__).parent / "data" / "journal_main.sqlite"
"""Written by main's code (f2eff05, ``append(str, dict)``): every entry kind, 26 entries."""

MAIN_CHAIN_HEAD = "2da4ebfe0a2576a06e4ff9b38ad53ef3cdac46ba38aeabd612a03fe08e015582"


def _typed(kind: str, body: dict[str, Any]) -> EntryBody:
    model = BODY_MODELS[EntryKind(kind)]
    if model is CardDealtData:  # the hot path's way: validated, dumped by pydantic-core
        return CardDealtData.model_validate(body)
    return model.model_construct(**body)


def test_a_journal_written_by_main_is_read_and_verified(tmp_path):
    path = tmp_path / "main.sqlite"
    path.write_bytes(MAIN_JOURNAL.read_bytes())
    with Journal.open_readonly(path) as journal:
        report = journal.verify()
        entries = list(journal.entries())
    assert report.ok, report.problems
    assert (report.entries, report.rounds, report.settled, report.voided) == (26, 2, 1, 1)
    assert report.chain_head == MAIN_CHAIN_HEAD
    # Every kind but those added since (betting_opened: issue 12, Mahjong's bank offers).
    assert {entry.kind for entry in entries} == set(EntryKind) - {EntryKind.BETTING_OPENED}
    for entry in entries:  # every stored body reads as its kind's model
        assert type(entry.typed_body) is BODY_MODELS[EntryKind(entry.kind)]
    card = next(entry for entry in entries if entry.kind == EntryKind.CARD_DEALT)
    assert card.typed_body is card.typed_body  # parsed once
    assert isinstance(card.typed_body, CardDealtData)
    assert (card.typed_body.slot, card.typed_body.card) == ("A1", "As")
    with Journal.open(path) as journal:  # opened for writing: the chain goes on
        journal.record(TableStatusData.model_construct(state="ready", detail="after main"))
        assert journal.verify().ok


def test_typed_bodies_store_what_main_stored_byte_for_byte(tmp_path):
    main = tmp_path / "main.sqlite"
    main.write_bytes(MAIN_JOURNAL.read_bytes())
    with Journal.open_readonly(main) as journal:
        entries = list(journal.entries())
    path = tmp_path / "new.sqlite"
    with Journal.open(path) as journal:
        for entry in entries:
            written = journal.record(
                _typed(entry.kind, entry.body),
                round_id=entry.round_id,
                happened_at=entry.happened_at,
            )
            assert written.hash == entry.hash, entry.kind
    columns = "seq, session, round_id, kind, happened_at, body, hash"
    assert _raw(path, f"SELECT {columns} FROM entries ORDER BY seq") == _raw(
        main, f"SELECT {columns} FROM entries ORDER BY seq"
    )


def test_record_takes_the_kind_from_the_body_model(tmp_path):
    with Journal.open(tmp_path / "j.sqlite") as journal:
        body = CardDealtData(slot="A1", hand="A", index=0, card="Qh", face="hidden")
        entry = journal.record(body, round_id="r1")
        assert entry.kind == EntryKind.CARD_DEALT == "card_dealt"  # type: ignore[comparison-overlap]
        assert entry.typed_body is body  # not parsed again
        assert entry.body == {"slot": "A1", "hand": "A", "index": 0, "card": "Qh", "face": "hidden"}
        stored = journal.get(entry.seq)
        assert stored is not None and stored == entry
        assert stored.typed_body == body
        with pytest.raises(JournalError, match="not the body of an entry kind"):
            journal.record(EntryBody())
        with pytest.raises(JournalError, match="not JSON-able"):
            journal.record(TableStatusData.model_construct(state="x", detail=object()))  # type: ignore[arg-type]
        assert journal.last_seq == 1


def test_a_body_that_does_not_match_its_model_is_a_journal_error(tmp_path):
    with Journal.open(tmp_path / "j.sqlite") as journal:
        entry = journal.append("card_dealt", {"slot": "A1", "index": "first"})
        unknown = journal.append("x", {"n": 1})
    with pytest.raises(JournalError, match="card_dealt body does not match its model"):
        _ = entry.typed_body
    assert type(unknown.typed_body) is EntryBody
    assert unknown.typed_body.model_extra == {"n": 1}


def test_nested_models_and_the_journal_order_of_keys():
    voided = RoundVoidedData.model_construct(
        reason="stopped",
        started=False,
        bets={"a": SettledBet.model_construct(outcome="refund", payout="1")},
    )
    assert body_text(voided) == (
        '{"reason":"stopped","started":false,"bets":{"a":{"outcome":"refund","payout":"1"}}}'
    )
    info = TableInfoData.model_construct(kind="equity", data={"p": 1e-05}, secure=True)
    assert body_text(info) == '{"kind":"equity","data":{"p":1e-05},"secure":true}'


# -- the journal's identity (issue 22) ------------------------------------------------------


def test_every_new_journal_gets_its_own_random_identity_kept_across_opens(tmp_path):
    with Journal.open(tmp_path / "a.sqlite") as first:
        identity = first.identity
        assert JOURNAL_ID_TEXT.match(identity)
    with Journal.open(tmp_path / "a.sqlite") as again:
        assert again.identity == identity and again.session == 2
    with Journal.open_readonly(tmp_path / "a.sqlite") as reader:
        assert reader.journal_id == identity
    # Another file for the same table (a new computer, a dead disk): another identity.
    with Journal.open(tmp_path / "b.sqlite") as other:
        assert other.identity != identity
    assert _raw(tmp_path / "a.sqlite", "SELECT value FROM meta WHERE key = 'journal_id'") == [
        (identity,)
    ]


def test_a_journal_written_before_identities_gets_one_on_migration_and_keeps_its_entries(
    tmp_path,
):
    path = tmp_path / "main.sqlite"
    path.write_bytes(MAIN_JOURNAL.read_bytes())  # schema 2: no identity
    with Journal.open_readonly(path) as old:
        assert old.schema_version == 2 and old.journal_id is None
        with pytest.raises(JournalError, match="no identity yet"):
            _ = old.identity
    with Journal.open(path) as journal:
        assert journal.schema_version == 3 and JOURNAL_ID_TEXT.match(journal.identity)
        identity = journal.identity
        assert journal.verify().chain_head == MAIN_CHAIN_HEAD  # nothing of the chain changed
    with Journal.open(path) as journal:
        assert journal.identity == identity  # made once


def test_the_identity_is_the_journals_own(tmp_path):
    with Journal.open(tmp_path / "j.sqlite") as journal, pytest.raises(JournalError, match="once"):
        journal.set_meta("journal_id", "0" * 32)
