"""A table's journals in the archive (issue 22), on both stores: PostgreSQL and SQLite.

The consumer's own path (``ArchiveConsumer.handle_batch``) with what tables publish: a new
journal under a known table id is kept as its own chain (same ``seq``, no conflict), raises
one alert, and ``recall``, ``report`` and ``verify`` tell the journals apart; a table whose
version 2 entries the archive holds and that comes back upgraded (its journal given an id)
goes on in its chain, unless its birth shows it cannot be the same journal.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.archive.backend import open_store
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.archive.recall import recall_from_archive
from controller.archive.report import table_report
from controller.archive.verify import verify_archive
from tests.archive.test_archive_store_contract import one, rows

KEYS = TableKeys({"t1": None})
AT = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)
J1, J2 = "a1" * 16, "b2" * 16


def _at(seq: int, journal: str) -> str:
    later = timedelta(hours=1) if journal == J2 else timedelta()
    return (AT + later + timedelta(seconds=seq)).isoformat().replace("+00:00", "Z")


def envelope(seq: int, kind: str, data: dict[str, Any], journal: str | None) -> bytes:
    body: dict[str, Any] = {"schema_version": "2" if journal is None else "3", "table": "t1"}
    if journal is not None:
        body["journal"] = journal
    round_id = f"t1-{journal[:8]}-000001" if journal else "t1-000001"
    body |= {"round": round_id, "seq": seq, "session": 1, "kind": kind,
             "at": _at(seq, journal or ""), "delayed": False, "data": data}  # fmt: skip
    return json.dumps(body).encode()


def status(journal: str, head: int) -> bytes:
    return json.dumps(
        {"schema_version": "3", "state": "online", "table": "t1", "journal": journal,
         "session": 1, "game": "g", "version": "1", "at": _at(0, journal),
         "chain_head": {"seq": head, "hash": "0" * 64}}
    ).encode()  # fmt: skip


def round_of(game: str, journal: str | None) -> list[tuple[str, bytes]]:
    """A settled round of ``game``: opened, betting closed, a card, the result."""
    bets = [{"bet": "main", "outcome": "win", "payout": "2"}]
    return [
        ("tables/t1/events", envelope(1, "round_opened", {"round_no": 1, "game": game}, journal)),
        ("tables/t1/events", envelope(2, "betting_closed", {}, journal)),
        ("tables/t1/events", envelope(3, "card_dealt", {"slot": "A1", "card": "As"}, journal)),
        (
            "tables/t1/results",
            envelope(
                4,
                "round_result",
                {"game": game, "winner": "A", "cards": {"A": ["As"]}, "hands": {}, "bets": bets},
                journal,
            ),
        ),
    ]


async def _consume(url: str, *batches: list[tuple[str, bytes]]) -> list[list[str]]:
    store = await open_store(url)
    consumer = ArchiveConsumer(
        ArchiveSettings.model_validate({"database": {"url": url}}), store, KEYS
    )
    try:
        await consumer.load_state()
        return [await consumer.handle_batch(batch) for batch in batches]
    finally:
        await store.close()


async def test_a_new_journal_is_kept_apart_with_one_alert_on_both_stores(archive_url):
    first = [("tables/t1/status", status(J1, 0)), *round_of("teen-patti-20-20", J1)]
    second = [("tables/t1/status", status(J2, 0)), *round_of("texas-holdem", J2)]
    outcomes = await _consume(archive_url, first, second, second)
    assert outcomes[0] == outcomes[1] == ["status", "new", "new", "new", "new"]
    assert outcomes[2] == ["status", "duplicate", "duplicate", "duplicate", "duplicate"]
    assert rows(archive_url, "SELECT count(*) FROM rejected") == [(0,)]
    chains = rows(
        archive_url, "SELECT table_id, count(*) FROM entry_keys GROUP BY table_id ORDER BY 1"
    )
    assert chains == [("t1", 4), (f"t1/{J2}", 4)]
    assert rows(archive_url, "SELECT kind, table_id FROM alerts") == [("new_journal", "t1")]
    assert one(archive_url, "SELECT detail FROM alerts") == (
        "t1 started a new journal at 2026-11-27T08:00:00.000000Z; the previous one ended at seq 4"
    )
    assert rows(archive_url, "SELECT table_id FROM table_status ORDER BY id") == [
        ("t1",), (f"t1/{J2}",), (f"t1/{J2}",)
    ]  # fmt: skip

    old = await recall_from_archive(archive_url, f"t1-{J1[:8]}-000001")
    new = await recall_from_archive(archive_url, f"t1-{J2[:8]}-000001", "t1")
    assert (old.fold.game, new.fold.game) == ("teen-patti-20-20", "texas-holdem")

    report = await table_report(archive_url, "t1", AT, AT + timedelta(days=1))
    assert report.rounds == report.results == 2
    assert report.journals == [("t1", 1, "teen-patti-20-20"), (f"t1/{J2}", 1, "texas-holdem")]

    records, checks = await verify_archive(archive_url, "t1")
    assert sorted((r.journal, r.chain, r.previous_chain) for r in records) == [
        (J1, "t1", None),
        (J2, f"t1/{J2}", "t1"),
    ]
    assert [c.check.table for c in checks] == ["t1", f"t1/{J2}"]
    for chain in checks:
        assert chain.check.last_seq == chain.check.entries == 4
        problems = [p for p in chain.check.problems if not p.startswith("unsigned")]
        assert problems == [], chain.check.problems


async def test_an_upgraded_journal_goes_on_in_its_chain_unless_its_birth_says_otherwise(
    archive_url,
):
    legacy = round_of("teen-patti-20-20", None)  # version 2: no journal id
    upgraded = [
        ("tables/t1/status", status(J1, 4)),
        ("tables/t1/events", envelope(5, "table_status", {"state": "idle"}, J1)),
    ]
    outcomes = await _consume(archive_url, legacy, upgraded)
    assert outcomes == [["new"] * 4, ["status", "new"]]
    assert rows(archive_url, "SELECT DISTINCT table_id FROM entry_keys") == [("t1",)]
    assert rows(archive_url, "SELECT count(*) FROM alerts") == [(0,)]
    # A journal whose birth is below what the archive holds of the table is a new one.
    replaced = [("tables/t1/status", status(J2, 0)), *round_of("texas-holdem", J2)]
    assert (await _consume(archive_url, replaced)) == [["status", "new", "new", "new", "new"]]
    assert rows(archive_url, "SELECT count(*) FROM rejected") == [(0,)]
    assert one(archive_url, "SELECT detail FROM alerts").endswith("ended at seq 5")
