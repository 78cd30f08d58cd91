"""The archive accepts no entry nobody signed (issue 21): the probe, on PostgreSQL and SQLite.

(a) A table without a key: a forged round (seq 30-38, every bet paying 1000) is rejected
unless the config allows the table unsigned; allowed, it is archived and ``archive verify``
and ``recall --archive`` say "unsigned: not verifiable".
(b) A signing table: forged unsigned entries of round 4 (the real session, the real seqs)
arrive first, then the real entries and their signed result. The real ones win (the signed
chain, walked down link by link from the result's chain head, shows which copy is the
table's), the forged ones are not shown by recall, the conflicts are logged, and ``archive
verify --journal`` finds the journal and the archive agree.

The traffic is the project's own: a real journal (``Journal.append``) turned into its MQTT
messages by ``controller.messages.messages_for`` and signed by ``controller.signing.Signer``,
stored through the archive consumer (``store_batch``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.archive.backend import open_store
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.archive.sqlite_store import is_sqlite_url, sqlite_path
from controller.cli import main
from controller.journal import Journal
from controller.messages import Topics, messages_for
from controller.signing import Signer

GAME = "teen-patti-20-20"
SLOTS = [("A1", "A"), ("B1", "B"), ("A2", "A"), ("B2", "B"), ("A3", "A"), ("B3", "B")]
START = datetime(2026, 11, 25, 7, 0, tzinfo=UTC)
Message = tuple[str, bytes]


def _round(rid: str, n: int, cards: list[str], payout: str = "1.98") -> list[tuple[str, Any]]:
    entries: list[tuple[str, Any]] = [
        (
            "round_opened",
            {
                "round_id": rid,
                "round_no": n,
                "game": GAME,
                "betting_seconds": 15.0,
                "betting_closes_at": "2026-11-25T00:00:15.000000Z",
                "table_state": {},
            },
        ),
        ("betting_closed", {}),
    ]
    for index, (card, (slot, hand)) in enumerate(zip(cards, SLOTS, strict=True)):
        entries.append(
            ("card_dealt", {"slot": slot, "hand": hand, "index": index, "card": card, "face": "up"})
        )
    lines = [
        {"bet": "player_a", "outcome": "win", "payout": payout},
        {"bet": "player_b", "outcome": "lose", "payout": "0"},
    ]
    hands = {"category": "high_card", "description": "high card"}
    result = {
        "game": GAME,
        "round_no": n,
        "cards": {"A": cards[0::2], "B": cards[1::2]},
        "winner": "A",
        "hands": {"A": hands, "B": hands},
        "bets": lines,
        "details": {},
    }
    entries.append(("round_result", result))
    return entries


CARDS = [
    ["As", "2c", "Kd", "3h", "Qs", "4d"],
    ["Ah", "5c", "Kc", "6h", "Qd", "7d"],
    ["Ad", "8c", "Kh", "9h", "Qc", "Td"],
    ["Ac", "Jc", "Ks", "Jh", "Qh", "Jd"],
]


def table_traffic(
    path: Path, table: str, signer: Signer | None
) -> tuple[list[list[Message]], Journal]:
    """Four rounds journalled; each entry's public messages (``events``, ``results``)."""
    journal = Journal.open(path)
    count = 0
    for n, cards in enumerate(CARDS, start=1):
        rid = f"{table}-{n:06d}"
        for kind, body in _round(rid, n, cards):
            journal.append(kind, body, round_id=rid, happened_at=START + timedelta(seconds=count))
            count += 1
    topics = Topics(table=table)
    out = []
    for entry in journal.entries():
        sent = messages_for(
            entry,
            topics,
            journal=journal.identity,
            delayed=False,
            snapshot=None,
            with_snapshot=False,
            signer=signer,
        )
        out.append(
            [(m.topic, m.payload) for m in sent if m.topic in {topics.events, topics.results}]
        )
    return out, journal


def forged_round(real: list[list[Message]], *, links: bool = True) -> list[Message]:
    """Round 4's entries but its result, forged: other cards, the real session and seqs,
    unsigned, links the forger made up (it cannot know the real ones in advance)."""
    out = []
    for messages in real:
        body = json.loads(messages[0][1])
        if body["round"].endswith("000004") and body["kind"] != "round_result":
            if body["kind"] == "card_dealt":
                body["data"]["card"] = "2s"
            body["link"] = {"prev": "ab" * 32, "hash": "cd" * 32}
            if not links:
                del body["link"]
            out.append((messages[0][0], json.dumps(body).encode()))
    return out


def _settings(url: str) -> ArchiveSettings:
    return ArchiveSettings.model_validate(
        {"database": {"url": url}, "mqtt": {"urls": ["mqtt://127.0.0.1:1"]}}
    )


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    if is_sqlite_url(url):
        with sqlite3.connect(sqlite_path(url)) as conn:
            return conn.execute(query).fetchall()
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def _flat(batches: list[list[Message]]) -> list[Message]:
    return [message for messages in batches for message in messages]


@pytest.mark.parametrize("links", [True, False])
async def test_signed_table_real_entries_win_over_forged_ones_that_came_first(
    archive_url, tmp_path, capsys, links
):
    signer = Signer(Ed25519PrivateKey.generate(), "sg-key")
    real, journal = table_traffic(tmp_path / "sg.sqlite", "sg", signer)
    journal.close()
    round4 = [m for m in real if json.loads(m[0][1])["round"] == "sg-000004"]
    before = [m for m in real if m not in round4]
    store = await open_store(archive_url)
    consumer = ArchiveConsumer(
        _settings(archive_url), store, TableKeys({"sg": signer.public_key}), wall_clock=lambda: 0.0
    )
    try:
        with structlog.testing.capture_logs() as logs:
            await consumer.store_batch(_flat(before))
            forged = forged_round(real, links=links)
            assert await consumer.store_batch(forged) == ["new"] * len(forged)
            # While no signed head covers them they are provisional (recall says so).
            outcomes = await consumer.store_batch(_flat(round4))
    finally:
        await store.close()
    # The real entries were conflicts on arrival (logged), then the signed result's walk down
    # the chain put them in the forged ones' place.
    assert outcomes.count("conflict") == len(forged)
    reasons = [str(line.get("reason", "")) for line in logs if line.get("code") == "invalid"]
    assert sum(reason.startswith("conflict:") for reason in reasons) == len(forged)
    assert sum(reason.startswith("forged:") for reason in reasons) == len(forged)
    assert any(line["event"].startswith("copies not on the signed chain") for line in logs)
    assert consumer.counts["rejected:forged"] == len(forged)
    assert _rows(archive_url, "SELECT count(*) FROM rejected WHERE category = 'conflict'") == [(0,)]
    assert _rows(archive_url, "SELECT count(*) FROM rejected WHERE category = 'forged'") == [
        (len(forged),)
    ]
    states = _rows(archive_url, "SELECT state, count(*) FROM entry_keys GROUP BY state")
    assert states == [("verified", len(real))]
    cards = _rows(
        archive_url,
        "SELECT envelope FROM events WHERE round_id = 'sg-000004' AND kind = 'card_dealt'",
    )
    bodies = [row[0] if isinstance(row[0], dict) else json.loads(row[0]) for row in cards]
    assert sorted(body["data"]["card"] for body in bodies) == sorted(CARDS[3])

    capsys.readouterr()
    assert (
        await asyncio.to_thread(main, ["recall", "sg-000004", "--archive", archive_url, "--json"])
        == 0
    )
    recalled = json.loads(capsys.readouterr().out)
    assert recalled["verification"] == "verified: every entry is on the table's signed chain"
    assert sorted(card["card"] for card in recalled["cards"]) == sorted(CARDS[3])
    verify = ["archive", "verify", "--database", archive_url, "--table", "sg"]
    assert await asyncio.to_thread(main, [*verify, "--journal", str(tmp_path / "sg.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "the journal and the archive agree" in out and "problem" not in out
    assert f"{len(forged)} copies were not on the table's signed chain" in out


async def test_a_verified_entry_is_never_displaced(archive_url, tmp_path):
    signer = Signer(Ed25519PrivateKey.generate(), "sg-key")
    real, journal = table_traffic(tmp_path / "sg.sqlite", "sg", signer)
    journal.close()
    store = await open_store(archive_url)
    consumer = ArchiveConsumer(
        _settings(archive_url), store, TableKeys({"sg": signer.public_key}), wall_clock=lambda: 0.0
    )
    round4 = [m for m in real if json.loads(m[0][1])["round"] == "sg-000004"]
    try:
        await consumer.store_batch(_flat([m for m in real if m not in round4]))
        # A forged copy of round 3's entries, arriving after round 3 was verified: a conflict,
        # and round 4's signed walk stops at what is verified (never displaces it).
        third = [m for m in real if json.loads(m[0][1])["round"] == "sg-000003"]
        copies = []
        for messages in third[:-1]:
            body = json.loads(messages[0][1])
            body["data"]["forged"] = True
            copies.append((messages[0][0], json.dumps(body).encode()))
        assert await consumer.store_batch(copies) == ["conflict"] * len(copies)
        await consumer.store_batch(_flat(round4))
    finally:
        await store.close()
    assert _rows(archive_url, "SELECT count(*) FROM rejected WHERE category = 'conflict'") == [
        (len(copies),)
    ]
    assert _rows(archive_url, "SELECT count(*) FROM rejected WHERE category = 'forged'") == [(0,)]
    assert _rows(archive_url, "SELECT state, count(*) FROM entry_keys GROUP BY state") == [
        ("verified", len(real))
    ]


def _forged_payouts(table: str) -> list[Message]:
    """A round nobody signed: seq 30-38, every bet paying 1000 (the probe's)."""
    out = []
    for offset, (kind, body) in enumerate(_round(f"{table}-000004", 4, CARDS[3], payout="1000")):
        envelope = {
            "schema_version": "2",
            "table": table,
            "round": f"{table}-000004",
            "seq": 30 + offset,
            "session": 2,
            "kind": kind,
            "at": (START + timedelta(seconds=30 + offset)).isoformat().replace("+00:00", "Z"),
            "delayed": False,
            "data": body,
        }
        if kind == "round_result":
            envelope["data"]["bets"] = [
                {"bet": "player_a", "outcome": "win", "payout": "1000"},
                {"bet": "player_b", "outcome": "win", "payout": "1000"},
            ]
        out.append((f"tables/{table}/events", json.dumps(envelope).encode()))
    return out


async def test_an_unsigned_table_is_refused_unless_the_config_allows_it(
    archive_url, capsys, tmp_path
):
    forged = _forged_payouts("un")
    assert len(forged) == 9  # seq 30-38
    store = await open_store(archive_url)
    try:
        refusing = ArchiveConsumer(
            _settings(archive_url), store, TableKeys({"un": None}, unsigned=frozenset())
        )
        assert await refusing.store_batch(forged) == ["rejected:unsigned"] * 9
        assert _rows(archive_url, "SELECT count(*) FROM events") == [(0,)]
        allowing = ArchiveConsumer(
            _settings(archive_url), store, TableKeys({"un": None}, unsigned=frozenset({"un"}))
        )
        assert await allowing.store_batch(forged) == ["new"] * 9
    finally:
        await store.close()
    reasons = _rows(archive_url, "SELECT DISTINCT reason FROM rejected WHERE category = 'unsigned'")
    assert len(reasons) == 1 and "unsigned = true" in reasons[0][0]
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["recall", "un-000004", "--archive", archive_url]) == 0
    assert "unsigned: not verifiable" in capsys.readouterr().out
    assert (
        await asyncio.to_thread(
            main, ["archive", "verify", "--database", archive_url, "--table", "un"]
        )
        == 1
    )
    assert "problem: unsigned: not verifiable (9 entries" in capsys.readouterr().out
    # The archive config says so per table (a keyless table not allowed is refused).
    config = tmp_path / "archive.toml"
    config.write_text(
        '[database]\nurl = "sqlite:///a.sqlite"\n[tables.a]\nunsigned = true\n[tables.b]\n'
    )
    from controller.archive.config import load_archive_settings

    assert load_archive_settings(config).unsigned_tables() == frozenset({"a"})
