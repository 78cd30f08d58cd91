"""The message contract (pure): topics, envelope, hidden cards, round snapshot; watch lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import TablectlError
from controller.journal import JournalEntry
from controller.messages import (
    RoundSnapshot,
    Topics,
    birth_message,
    messages_for,
    offline_message,
)
from controller.watch import describe

T0 = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
TOPICS = Topics(prefix="tables", table="tp-1")
JOURNAL_ID = "5eed0000000000000000000000000001"
"""The journal id these tests publish under."""
RANKS = "23456789TJQKA"
SUITS = "cdhs"
DECK = [rank + suit for rank in RANKS for suit in SUITS]


class Book:
    """Builds journal entries the way the journal would number them."""

    def __init__(self, session: int = 3) -> None:
        self.seq = 0
        self.session = session

    def entry(self, kind: str, body: dict[str, Any], round_id: str | None = "r-1") -> JournalEntry:
        self.seq += 1
        return JournalEntry(
            seq=self.seq,
            session=self.session,
            round_id=round_id,
            kind=kind,
            happened_at=T0 + timedelta(milliseconds=self.seq),
            body=body,
        )


def publish_all(entries: list[JournalEntry], *, delayed: bool = False) -> list[tuple[str, Any]]:
    """Every message the entries produce, decoded, folding the snapshot as the outbox does."""
    snapshot = RoundSnapshot()
    out = []
    for entry in entries:
        snapshot = snapshot.apply(entry)
        for message in messages_for(
            entry, TOPICS, journal=JOURNAL_ID, delayed=delayed, snapshot=snapshot
        ):
            assert message.qos == 1
            assert message.retain == (message.topic == TOPICS.round)
            out.append((message.topic, json.loads(message.payload)))
    return out


def strings_in(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(strings_in(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(strings_in(v) for v in value)) if value else set()
    return set()


def test_topics():
    assert TOPICS.status == "tables/tp-1/status"
    assert TOPICS.round == "tables/tp-1/round"
    assert TOPICS.events == "tables/tp-1/events"
    assert TOPICS.results == "tables/tp-1/results"
    assert TOPICS.secure_events == "tables/tp-1/secure/events"
    assert TOPICS.cmd("decision") == "tables/tp-1/cmd/decision"
    assert Topics(prefix="studio/a", table="t").events == "studio/a/t/events"
    assert Topics(prefix="", table="t").status == "t/status"
    for bad in ("a/b", "a+", "#", ""):
        with pytest.raises(TablectlError, match="one MQTT topic level"):
            Topics(table=bad)
    with pytest.raises(TablectlError, match="wildcards"):
        Topics(prefix="tables/+", table="t")


def test_envelope_fields_and_compact_json():
    book = Book()
    entry = book.entry(
        "card_dealt", {"slot": "A1", "hand": "A", "index": 0, "card": "As", "face": "up"}
    )
    snapshot = RoundSnapshot().apply(entry)
    (events, rnd) = messages_for(entry, TOPICS, journal=JOURNAL_ID, delayed=True, snapshot=snapshot)
    assert events.topic == TOPICS.events
    assert b", " not in events.payload
    assert b": " not in events.payload
    envelope = json.loads(events.payload.decode("utf-8"))
    assert envelope == {
        "schema_version": "3",
        "journal": JOURNAL_ID,
        "table": "tp-1",
        "round": "r-1",
        "seq": 1,
        "session": 3,
        "kind": "card_dealt",
        "at": "2026-03-04T05:06:07.891123Z",
        "delayed": True,
        "data": {"slot": "A1", "hand": "A", "index": 0, "card": "As", "face": "up"},
    }
    snap = json.loads(rnd.payload)
    assert rnd.topic == TOPICS.round
    assert rnd.retain
    assert snap["kind"] == "round_snapshot"
    assert snap["seq"] == 1
    assert snap["data"]["cards"] == [
        {"slot": "A1", "hand": "A", "index": 0, "face": "up", "card": "As"}
    ]


def test_table_level_entries_go_to_events_only():
    book = Book()
    entry = book.entry("device_status", {"device": "shoe", "state": "ok", "detail": ""}, None)
    messages = messages_for(
        entry, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot().apply(entry)
    )
    assert [m.topic for m in messages] == [TOPICS.events]
    assert json.loads(messages[0].payload)["round"] is None


def test_results_and_voids_also_go_to_results():
    book = Book()
    result = book.entry(
        "round_result",
        {"game": "g", "winner": "A", "cards": {}, "hands": {}, "bets": {}, "details": {}},
    )
    void = book.entry("round_voided", {"reason": "table fault", "bets": {}}, "r-2")
    for entry in (result, void):
        messages = messages_for(
            entry, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot().apply(entry)
        )
        assert [m.topic for m in messages] == [TOPICS.events, TOPICS.results, TOPICS.round]
        assert messages[0].payload == messages[1].payload
    # A void whose reason is more than its public phrase: the full entry on secure/events.
    void = book.entry("round_voided", {"reason": "stopped", "bets": {}}, "r-3")
    messages = messages_for(
        void, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot().apply(void)
    )
    topics = [TOPICS.events, TOPICS.secure_events, TOPICS.results, TOPICS.round]
    assert [m.topic for m in messages] == topics
    assert messages[0].payload == messages[2].payload


def test_status_birth_and_will():
    birth = birth_message(
        TOPICS,
        journal=JOURNAL_ID,
        session=4,
        game="teen-patti-20-20",
        version="0.1.0",
        at=T0,
        chain_head=(17, "ab" * 32),
    )
    assert (birth.topic, birth.retain, birth.qos) == ("tables/tp-1/status", True, 1)
    assert json.loads(birth.payload) == {
        "schema_version": "3",
        "journal": JOURNAL_ID,
        "state": "online",
        "table": "tp-1",
        "session": 4,
        "game": "teen-patti-20-20",
        "version": "0.1.0",
        "at": "2026-03-04T05:06:07.890123Z",
        "chain_head": {"seq": 17, "hash": "ab" * 32},
    }
    will = offline_message(
        TOPICS,
        journal=JOURNAL_ID,
        session=4,
        game="g",
        version="v",
        at=None,
        reason="connection lost",
    )
    body = json.loads(will.payload)
    assert will.retain
    assert (body["state"], body["at"], body["reason"]) == ("offline", None, "connection lost")


def _round_entries(data: st.DataObject) -> tuple[list[JournalEntry], set[str]]:
    """A random round: cards, some face down, misreads and refusals (incl. hidden dupes)."""
    book = Book()
    cards = data.draw(st.permutations(DECK))[: data.draw(st.integers(1, 9))]
    faces = data.draw(st.lists(st.booleans(), min_size=len(cards), max_size=len(cards)))
    entries = [
        book.entry(
            "round_opened",
            {
                "round_no": 1,
                "game": "g",
                "betting_seconds": 10,
                "betting_closes_at": "2026-03-04T05:06:17Z",
            },
        ),
        book.entry("betting_closed", {}),
    ]
    hidden: set[str] = set()
    for index, (card, face_down) in enumerate(zip(cards, faces, strict=True)):
        slot = f"{'AB'[index % 2]}{index // 2 + 1}"
        face = "hidden" if face_down else "up"
        if data.draw(st.booleans()):
            entries.append(
                book.entry(
                    "rescan_requested",
                    {"slot": slot, "cause": "crc", "detail": "bad frame", "attempt": 1},
                )
            )
        if bool(hidden) and data.draw(st.booleans()):
            dupe = data.draw(st.sampled_from(sorted(hidden)))
            entries.append(
                book.entry(
                    "card_refused", {"slot": slot, "card": dupe, "reason": f"duplicate {dupe}"}
                )
            )
        entries.append(
            book.entry(
                "card_dealt",
                {"slot": slot, "hand": slot[0], "index": index, "card": card, "face": face},
            )
        )
        if face_down:
            hidden.add(card)
    return entries, hidden


@settings(deadline=None, max_examples=150)
@given(st.data())
def test_hidden_cards_never_reach_a_public_topic(data):
    entries, hidden = _round_entries(data)
    published = publish_all(entries)
    public = [(topic, body) for topic, body in published if "/secure/" not in topic]
    for topic, body in public:
        leaked = strings_in(body) & hidden
        assert not leaked, f"{topic} leaks {leaked}: {body}"
    # Each hidden card reaches stream production on the secure topic.
    secure_cards = {
        body["data"].get("card")
        for topic, body in published
        if topic == TOPICS.secure_events and body["kind"] == "card_dealt"
    }
    assert secure_cards == hidden
    # The public events stream stays gap-free: one events message per entry.
    assert [body["seq"] for topic, body in public if topic == TOPICS.events] == [
        entry.seq for entry in entries
    ]


@settings(deadline=None, max_examples=100)
@given(st.data())
def test_snapshot_folds_the_public_round(data):
    entries, hidden = _round_entries(data)
    snapshot = RoundSnapshot.replay(entries)
    dealt = [e.body for e in entries if e.kind == "card_dealt"]
    assert snapshot.round_id == "r-1"
    assert snapshot.state == "dealing"
    assert snapshot.last_seq == entries[-1].seq
    assert [c.slot for c in snapshot.cards] == [b["slot"] for b in dealt]
    assert [c.card for c in snapshot.cards] == [
        None if b["face"] == "hidden" else b["card"] for b in dealt
    ]
    assert snapshot.hidden_cards == hidden
    wire = snapshot.to_wire()
    assert not strings_in(wire) & hidden
    assert "hidden_cards" not in wire
    # Folding one entry at a time gives the same snapshot as a replay.
    step = RoundSnapshot()
    for entry in entries:
        step = step.apply(entry)
    assert step == snapshot


def test_snapshot_states_through_a_round_and_the_next():
    book = Book()
    opened = book.entry(
        "round_opened",
        {
            "round_no": 7,
            "game": "g",
            "betting_seconds": 5,
            "betting_closes_at": "2026-03-04T05:06:12Z",
        },
    )
    snap = RoundSnapshot().apply(opened)
    assert (snap.state, snap.round_no, snap.betting_closes_at) == (
        "betting_open",
        7,
        "2026-03-04T05:06:12Z",
    )
    snap = snap.apply(book.entry("betting_closed", {}))
    assert (snap.state, snap.betting_closes_at) == ("dealing", None)
    snap = snap.apply(
        book.entry("rescan_requested", {"slot": "A1", "cause": "crc", "detail": "", "attempt": 1})
    )
    assert snap.awaiting_rescan == "A1"
    snap = snap.apply(
        book.entry(
            "card_dealt", {"slot": "A1", "hand": "A", "index": 0, "card": "Qh", "face": "up"}
        )
    )
    assert snap.awaiting_rescan is None
    status = book.entry("device_status", {"device": "shoe", "state": "ok"}, None)
    after_status = snap.apply(status)
    assert after_status.cards == snap.cards
    assert after_status.last_seq == status.seq
    snap = after_status.apply(
        book.entry(
            "round_result",
            {
                "game": "g",
                "winner": "A",
                "cards": {"A": ["Qh"]},
                "hands": {"A": {"category": "high", "description": "queen high"}},
                "bets": {},
            },
        )
    )
    assert snap.state == "settled"
    assert snap.result == {
        "winner": "A",
        "cards": {"A": ["Qh"]},
        "hands": {"A": {"category": "high", "description": "queen high"}},
    }
    nxt = snap.apply(book.entry("round_opened", {"round_no": 8, "game": "g"}, round_id="r-2"))
    assert (nxt.round_id, nxt.round_no, nxt.state, nxt.cards, nxt.result) == (
        "r-2",
        8,
        "betting_open",
        (),
        None,
    )
    void = nxt.apply(book.entry("round_voided", {"reason": "controller stopped"}, "r-2"))
    assert void.state == "voided"
    assert void.result == {"voided": True, "reason": "controller stopped"}


# -- watch lines ----------------------------------------------------------------------------


def _envelope(
    kind: str, data: dict[str, Any], *, seq: int = 5, delayed: bool = False
) -> dict[str, Any]:
    return {
        "schema_version": "3",
        "journal": JOURNAL_ID,
        "table": "tp-1",
        "round": "r-1",
        "seq": seq,
        "session": 1,
        "kind": kind,
        "at": "2026-03-04T05:06:07.890123Z",
        "delayed": delayed,
        "data": data,
    }


def test_watch_describes_a_round():
    opened = describe(
        TOPICS.events,
        _envelope(
            "round_opened",
            {
                "round_no": 3,
                "game": "teen-patti-20-20",
                "betting_seconds": 15,
                "betting_closes_at": "2026-03-04T05:06:22.890123Z",
            },
        ),
        now=datetime(2026, 3, 4, 5, 6, 10, 890123, tzinfo=UTC),
    )
    assert opened == (
        "05:06:07.890 #5 round 3 (r-1, teen-patti-20-20): betting open for 15 s, "
        "closes 2026-03-04T05:06:22.890123Z (in 12.0 s)"
    )
    card = describe(
        TOPICS.events, _envelope("card_dealt", {"slot": "A1", "card": "As", "face": "up"})
    )
    assert card == "05:06:07.890 #5   A1 As"
    hidden = describe(
        TOPICS.events, _envelope("card_dealt", {"slot": "B2", "card": None, "face": "hidden"})
    )
    assert hidden is not None
    assert hidden.endswith("B2 [hidden]")
    rescan = describe(
        TOPICS.events,
        _envelope(
            "rescan_requested",
            {"slot": "B1", "cause": "crc", "detail": "checksum mismatch", "attempt": 2},
        ),
    )
    assert rescan is not None
    assert "B1 misread (crc: checksum mismatch), rescan requested (attempt 2)" in rescan
    refused = describe(
        TOPICS.events,
        _envelope("card_refused", {"slot": "A2", "card": "JK", "reason": "no joker in this game"}),
    )
    assert refused is not None
    assert refused.endswith("A2 refused JK: no joker in this game")
    result = describe(
        TOPICS.events,
        _envelope(
            "round_result",
            {
                "round_no": 3,
                "winner": "B",
                "cards": {"A": ["2c", "7d", "9h"], "B": ["Kd", "Kc", "4s"]},
                "hands": {
                    "A": {"category": "high_card", "description": "nine high"},
                    "B": {"category": "pair", "description": "pair of kings"},
                },
            },
        ),
    )
    assert result is not None
    assert result.endswith(
        "round 3 result: B wins; A [2c 7d 9h] nine high; B [Kd Kc 4s] pair of kings"
    )
    settlement = describe(
        TOPICS.results,
        _envelope(
            "round_result",
            {
                "round_no": 3,
                "bets": [
                    {"bet": "player_a", "outcome": "lose", "payout": "0"},
                    {"bet": "player_b", "outcome": "win", "payout": "1.95"},
                    {"bet": "pair_plus_b", "outcome": "win", "payout": "2", "reason": "pair"},
                    {"bet": "ante", "path": "mulliganed", "outcome": "push", "payout": "1"},
                    {"bet": "main", "setting": "Ks-Qd", "default": True, **LOSE},
                ],
            },
            delayed=True,
        ),
    )
    assert settlement is not None
    lines = settlement.splitlines()
    assert lines[0] == "05:06:07.890 #5 [delayed] round 3 settlement:"
    assert lines[1].split() == ["Ks-Qd", "main", "(default)", "lose", "returns", "nothing"]
    assert lines[2].split() == ["player_a", "lose", "returns", "nothing"]
    assert lines[3].split() == ["player_b", "win", "returns", "1.95", "per", "1", "staked"]
    assert lines[4].split() == [
        "pair_plus_b",
        "win",
        "returns",
        "2",
        "per",
        "1",
        "staked",
        "(pair)",
    ]
    assert lines[5].split() == ["mulliganed", "ante", "push", "returns", "1", "per", "1", "staked"]
    unknown = describe(TOPICS.events, _envelope("some_new_kind", {"slot": "B2", "attempts": 2}))
    assert unknown is not None
    assert unknown.endswith("some new kind: slot=B2, attempts=2")


def test_watch_status_lines_and_ignored_topics():
    online = describe(
        TOPICS.status,
        {
            "state": "online",
            "table": "tp-1",
            "session": 2,
            "game": "g",
            "version": "0.1.0",
            "at": "2026-03-04T05:06:07.890123Z",
        },
    )
    assert online == "05:06:07.890 table tp-1 ONLINE: g (controller 0.1.0, session 2)"
    will = describe(
        TOPICS.status,
        {"state": "offline", "table": "tp-1", "at": None, "reason": "connection lost"},
    )
    assert will is not None
    assert will.endswith("table tp-1 OFFLINE: connection lost (last will)")
    card = _envelope("card_dealt", {"slot": "A1", "card": "As", "face": "hidden"})
    assert describe(TOPICS.secure_events, card) is None
    assert describe(TOPICS.round, _envelope("round_snapshot", {})) is None
    assert describe(TOPICS.cmd("decision"), {}) is None


# --- new kinds: reveal, halts, decisions, table info, commands, signatures ---------------------


def test_cards_revealed_shows_hidden_slots_in_the_snapshot():
    book = Book()
    entries = [
        book.entry("round_opened", {"round_no": 1, "game": "texas-holdem"}),
        book.entry(
            "card_dealt", {"slot": "P1", "hand": "P", "index": 0, "card": "As", "face": "hidden"}
        ),
        book.entry(
            "card_dealt", {"slot": "P2", "hand": "P", "index": 1, "card": "Kd", "face": "hidden"}
        ),
        book.entry(
            "card_dealt", {"slot": "Q1", "hand": "Q", "index": 2, "card": "2c", "face": "hidden"}
        ),
    ]
    before = RoundSnapshot.replay(entries)
    assert [c["card"] for c in before.to_wire()["cards"]] == [None, None, None]
    reveal = book.entry("cards_revealed", {"hand": "P", "cards": ["As", "Kd"]})
    after = before.apply(reveal)
    wire = after.to_wire()
    assert [(c["slot"], c["face"], c["card"]) for c in wire["cards"]] == [
        ("P1", "up", "As"),
        ("P2", "up", "Kd"),
        ("Q1", "hidden", None),
    ]
    assert after.hidden_cards == frozenset({"2c"})
    # The reveal itself is public, and a refusal naming a revealed card is no longer withheld.
    published = publish_all([*entries, reveal])
    events = [data for topic, data in published if topic == TOPICS.events]
    assert events[-1]["data"] == {"hand": "P", "cards": ["As", "Kd"]}
    refused = book.entry("card_refused", {"slot": "B1", "card": "As", "reason": "duplicate"})
    (event, *_rest) = messages_for(
        refused, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=after.apply(refused)
    )
    assert json.loads(event.payload)["data"]["card"] == "As"


def test_halts_and_decision_windows_in_the_snapshot():
    book = Book()
    opened = book.entry("round_opened", {"round_no": 1, "game": "texas-holdem"})
    window = {
        "window": "w1",
        "kind": "action",
        "seat": "1",
        "seconds": 5.0,
        "options": ["fold"],
        "info": {},
        "closes_at": "2026-01-01T00:00:00.000000Z",
    }
    steps = [
        (book.entry("round_halted", {"reason": "table fault"}), True, None),
        (book.entry("round_resumed", {"by": "pit"}), False, None),
        (book.entry("decision_open", window), False, "w1"),
        (
            book.entry(
                "decision_applied",
                {"window": "other", "decision": {}, "default": True, "command_id": None},
            ),
            False,
            "w1",
        ),
        (
            book.entry(
                "decision_applied",
                {
                    "window": "w1",
                    "decision": {"action": "fold"},
                    "default": False,
                    "command_id": "c1",
                },
            ),
            False,
            None,
        ),
    ]
    snapshot = RoundSnapshot().apply(opened)
    for entry, halted, open_window in steps:
        snapshot = snapshot.apply(entry)
        wire = snapshot.to_wire()
        assert wire["halted"] is halted, entry.kind
        assert (wire["decision"] or {}).get("window") == open_window, entry.kind
        assert wire["state"] == "betting_open"
        # All of these are public, unchanged, on events.
        (event, *_rest) = messages_for(
            entry, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=snapshot
        )
        assert json.loads(event.payload)["data"] == entry.body


def test_secure_table_info_keeps_its_data_off_public_topics():
    book = Book()
    info = book.entry("table_info", {"kind": "equity", "data": {"P": "0.7"}, "secure": True})
    out = publish_all([info])
    assert [topic for topic, _ in out] == [TOPICS.events, TOPICS.secure_events, TOPICS.round]
    assert out[0][1]["data"] == {"kind": "equity", "secure": True}
    assert out[1][1]["data"]["data"] == {"P": "0.7"}
    public = book.entry("table_info", {"kind": "odds", "data": {"P": "2"}, "secure": False})
    out = publish_all([public])
    assert [topic for topic, _ in out] == [TOPICS.events, TOPICS.round]
    assert out[0][1]["data"]["data"] == {"P": "2"}


def _answered(**extra: Any) -> dict[str, Any]:
    return {
        "command_id": "c-1",
        "role": "pit",
        "name": "void",
        "accepted": False,
        "reason": "no round",
        "data": {"n": 1},
        "response_topic": None,
        "correlation_data": None,
        **extra,
    }


def test_commands_show_only_who_and_what_on_events():
    book = Book()
    received = book.entry(
        "command_received",
        {
            "command_id": "c-1",
            "role": "pit",
            "name": "void",
            "round": "r-1",
            "data": {"reason": "dealer error"},
        },
        round_id=None,
    )
    out = publish_all([received])
    assert [topic for topic, _ in out] == [TOPICS.events, TOPICS.secure_events]
    assert out[0][1]["data"] == {"command_id": "c-1", "role": "pit", "name": "void"}
    assert out[1][1]["data"]["data"] == {"reason": "dealer error"}

    answered = book.entry(
        "command_answered",
        _answered(response_topic="tables/tp-1/reply/pit/cli-1", correlation_data="AAE="),
        round_id=None,
    )
    messages = messages_for(
        answered, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot()
    )
    assert [m.topic for m in messages] == [TOPICS.events, "tables/tp-1/reply/pit/cli-1"]
    assert json.loads(messages[0].payload)["data"] == {
        "command_id": "c-1",
        "role": "pit",
        "name": "void",
        "accepted": False,
        "reason": "no round",
    }
    reply = messages[1]
    assert reply.correlation_data == b"\x00\x01"
    assert not reply.essential
    assert json.loads(reply.payload)["data"]["data"] == {"n": 1}
    # No response topic, or one outside the role's tree: the role's reply topic.
    for topic in (None, "tables/tp-1/events", "tables/tp-1/reply/betting/x", "elsewhere"):
        entry = book.entry("command_answered", _answered(response_topic=topic), round_id=None)
        messages = messages_for(
            entry, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot()
        )
        assert messages[-1].topic == TOPICS.reply("pit") == "tables/tp-1/reply/pit"
        assert messages[-1].correlation_data is None


def test_results_are_signed_on_events_and_results_only():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from controller.signing import Signer, verify_envelope

    signer = Signer(Ed25519PrivateKey.generate(), "k1")
    book = Book()
    voided = book.entry(
        "round_voided",
        {"reason": "voided by the pit", "bets": {"A": {"outcome": "refund", "payout": "1"}}},
    )
    card = book.entry(
        "card_dealt", {"slot": "A1", "hand": "A", "index": 0, "card": "As", "face": "up"}
    )
    out = messages_for(
        voided, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot(), signer=signer
    )
    events, results, snapshot = (json.loads(m.payload) for m in out)
    assert events == results
    assert verify_envelope(results, signer.public_key)
    assert "signature" not in snapshot
    out = messages_for(
        card, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot(), signer=signer
    )
    assert all("signature" not in json.loads(m.payload) for m in out)


def _line(topic: str, envelope: dict[str, Any]) -> str:
    text = describe(topic, envelope)
    assert text is not None, envelope
    return text


def test_watch_describes_the_new_kinds():
    lines = {
        "decision_open": _line(
            TOPICS.events,
            _envelope(
                "decision_open",
                {
                    "window": "w1",
                    "kind": "action",
                    "seat": "2",
                    "seconds": 8,
                    "options": ["fold", "call"],
                },
            ),
        ),
        "decision_applied": _line(
            TOPICS.events,
            _envelope(
                "decision_applied",
                {"window": "w1", "decision": {"action": "fold"}, "default": True},
            ),
        ),
        "cards_revealed": _line(
            TOPICS.events, _envelope("cards_revealed", {"hand": "P", "cards": ["As", "Kd"]})
        ),
        "round_halted": _line(TOPICS.events, _envelope("round_halted", {"reason": "pit"})),
        "command_answered": _line(
            TOPICS.events,
            _envelope(
                "command_answered",
                {"command_id": "c1", "name": "void", "accepted": False, "reason": "no round"},
            ),
        ),
    }
    assert lines["decision_open"].endswith("decision w1 seat 2: action [fold/call] within 8 s")
    assert lines["decision_applied"].endswith("decision w1: action=fold (default at the deadline)")
    assert lines["cards_revealed"].endswith("P revealed: As Kd")
    assert lines["round_halted"].endswith("HALTED: pit")
    assert lines["command_answered"].endswith("command void (c1) refused: no round")
    assert describe("tables/tp-1/reply/pit/events", _envelope("command_answered", {})) is None


LOSE = {"outcome": "lose", "payout": "0"}


def test_settlement_for_settles_every_wager_without_game_code() -> None:
    from controller.games.registry import make_live_game
    from controller.messages import settlement_for
    from tests.unit.test_live_helpers import drive, pieces

    lose = {"outcome": "lose", "payout": "0"}
    win = {"outcome": "win", "payout": "2"}
    bets: list[dict[str, object]] = [
        {"bet": "ante", "path": "stayed", "default": True, **lose},
        {"bet": "ante", "path": "mulliganed", **win},
        {"bet": "player", "position": "P2", **win},
        {"bet": "player", "position": "P3", **lose},
        {"bet": "bonus", **win},
    ]
    assert settlement_for(bets, "ante")["payout"] == "0"  # no mulligan asked: stayed
    assert settlement_for(bets, "ante", path="mulliganed")["payout"] == "2"
    assert settlement_for(bets, "player", position="P3")["outcome"] == "lose"
    assert settlement_for(bets, "bonus", position="P3")["outcome"] == "win"  # unqualified
    with pytest.raises(TablectlError, match="0 settlement lines match bet 'player'"):
        settlement_for(bets, "player")  # a position is not optional
    with pytest.raises(TablectlError, match="unknown settlement qualifier 'seat'"):
        settlement_for(bets, "ante", seat="1")
    # Every game's real result: each bet id settles a wager that made no choice, or names one.
    for game, script, position in (
        ("teen-patti-20-20", "As Kd 2c 3h 9s Td", None),
        ("mahjong-pai-gow", "1p 2p 3p 4p 5p 6p 7p 8p", "P2"),
    ):
        live = make_live_game(game, {}, {})
        rnd = live.new_round({})
        drive(rnd, pieces(script), lambda step: {"choice": "accept"})
        result = rnd.result()
        for bet in live.bet_ids:
            settlement_for(result["bets"], bet, position=position)


def test_legacy_flat_bets_are_published_as_lines() -> None:
    from controller.messages import legacy_bets

    flat = {"A": {"outcome": "win", "payout": "1.95"}, "B": {"outcome": "lose", "payout": "0"}}
    assert legacy_bets(flat) == [
        {"bet": "A", "outcome": "win", "payout": "1.95"},
        {"bet": "B", "outcome": "lose", "payout": "0"},
    ]
    nested = {"stayed": flat}
    assert legacy_bets(nested) is nested
