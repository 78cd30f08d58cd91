"""The journal on a real SQLite file: durability, seq, sessions, migrations, delivery marks."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import JournalError
from controller.journal import MIGRATIONS, SCHEMA_VERSION, Journal, JournalEntry


def _raw(path: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
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
    assert columns == ["seq", "session", "round_id", "kind", "happened_at", "body", "delivered_at"]
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
