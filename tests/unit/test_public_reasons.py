"""The public view of voids, halts, resumes and pit alerts: a fixed phrase per cause.

What a pit boss typed and the operator's name never reach ``events``, ``results``, the
retained ``round`` snapshot or a replay; the full entry goes to ``secure/events`` (and stays
in the journal). Each published message validates against the committed schemas.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.messages import (
    PUBLIC_ALERT,
    PUBLIC_ALERT_REASONS,
    PUBLIC_FAULT,
    PUBLIC_HALT_REASONS,
    PUBLIC_MISREADS_ALERT,
    PUBLIC_VOID_REASONS,
    RoundSnapshot,
    public_alert_reason,
    public_halt_reason,
    public_view,
    public_void_reason,
    replay_message,
)
from tests.unit.test_messages import JOURNAL_ID, TOPICS, Book, publish_all

REFUNDS = {"A": {"outcome": "refund", "payout": "1"}}
PIT_VOID = "voided by the pit boss (Marguerite Okonkwo): dealer Bob flashed a card"

VOIDS = {phrase for _, phrase in PUBLIC_VOID_REASONS} | {PUBLIC_FAULT}
HALTS = {phrase for _, phrase in PUBLIC_HALT_REASONS} | {PUBLIC_FAULT}
ALERTS = {phrase for _, phrase in PUBLIC_ALERT_REASONS} | {PUBLIC_ALERT, PUBLIC_MISREADS_ALERT}


@pytest.mark.parametrize(
    ("reason", "public"),
    [
        (PIT_VOID, "voided by the pit"),
        ("voided by the pit boss: no name given", "voided by the pit"),
        ("controller stopped before betting closed", "table stopped before betting closed"),
        ("controller restarted before betting closed", "table restarted before betting closed"),
        ("anything else, e.g. a future cause with a name in it", "table fault"),
        ("voided by the pit", "voided by the pit"),
    ],
)
def test_each_void_cause_has_its_phrase(reason, public):
    assert public_void_reason(reason) == public


@pytest.mark.parametrize(
    ("reason", "public"),
    [
        ("round halted: device lost for 30 s: pit boss", "round halted: pit boss needed"),
        ("3 misreads in a row at B2: pit boss needed", PUBLIC_MISREADS_ALERT),
        ("MQTT session taken over at mqtts://broker-a:8883: another client", PUBLIC_ALERT),
    ],
)
def test_each_alert_cause_has_its_phrase(reason, public):
    assert public_alert_reason(reason) == public


@given(st.text(max_size=200) | st.none() | st.integers())
def test_any_reason_becomes_one_of_the_fixed_phrases_and_stays_one(reason):
    for phrase, allowed in (
        (public_void_reason, VOIDS),
        (public_halt_reason, HALTS),
        (public_alert_reason, ALERTS),
    ):
        public = phrase(reason)
        assert public in allowed
        assert phrase(public) == public  # a public phrase is its own public phrase


def test_a_pit_void_publishes_the_phrase_and_keeps_the_words_on_secure_events():
    book = Book()
    opened = book.entry("round_opened", {"round_no": 1, "game": "teen-patti-20-20"})
    void = book.entry("round_voided", {"reason": PIT_VOID, "started": True, "bets": REFUNDS})
    out = publish_all([opened, void])
    topics = [topic for topic, _ in out[2:]]
    assert topics == [TOPICS.events, TOPICS.secure_events, TOPICS.results, TOPICS.round]
    events, secure, results, snapshot = (body for _, body in out[2:])
    assert events == results and events["data"]["reason"] == "voided by the pit"
    assert events["data"]["bets"] == REFUNDS  # the refunds are public as before
    assert secure["data"]["reason"] == PIT_VOID
    assert snapshot["data"]["result"] == {"voided": True, "reason": "voided by the pit"}
    for _, body in (out[2], out[4], out[5]):
        assert "Okonkwo" not in json.dumps(body) and "Bob" not in json.dumps(body)
    assert void.body["reason"] == PIT_VOID  # the journal keeps it
    replayed = replay_message(
        void, TOPICS, journal=JOURNAL_ID, snapshot=RoundSnapshot().apply(void)
    )
    assert json.loads(replayed.payload)["data"]["reason"] == "voided by the pit"


def test_halts_resumes_and_alerts_show_no_name_or_words():
    book = Book()
    halted = book.entry("round_halted", {"reason": "device lost for 30 s"})
    alert = book.entry(
        "pit_alert", {"slot": "B2", "reason": "3 misreads in a row at B2: pit boss needed"}
    )
    resumed = book.entry("round_resumed", {"by": "pit (Marguerite Okonkwo)"})
    for entry, key, public in (
        (halted, "reason", "card reader lost"),
        (alert, "reason", PUBLIC_MISREADS_ALERT),
        (resumed, "by", "pit"),
    ):
        body, withheld = public_view(entry, None)
        assert (body[key], withheld) == (public, True)
        assert body.keys() == entry.body.keys()
    assert public_view(alert, None)[0]["slot"] == "B2"  # where: public, as before
    plain = book.entry("round_resumed", {"by": "pit"})
    assert public_view(plain, None) == ({"by": "pit"}, False)  # nothing withheld


def test_every_message_of_these_kinds_matches_the_committed_schemas():
    from tests.unit.test_schema import _json_schema

    book = Book()
    entries = [
        book.entry("round_opened", {"round_no": 1, "game": "teen-patti-20-20"}),
        book.entry("round_halted", {"reason": "device lost for 30 s"}),
        book.entry("pit_alert", {"slot": None, "reason": "round halted: x: pit boss"}),
        book.entry("round_resumed", {"by": "pit (M. O.)"}),
        book.entry("round_voided", {"reason": PIT_VOID, "started": True, "bets": REFUNDS}),
    ]
    for topic, body in publish_all(entries):
        leaf = topic.removeprefix("tables/tp-1/")
        if leaf == "round" or body["kind"] == "round_opened":
            continue
        prefix = "secure" if leaf == "secure/events" else "event"
        _json_schema(f"{prefix}-{body['kind'].replace('_', '-')}").validate(body)
