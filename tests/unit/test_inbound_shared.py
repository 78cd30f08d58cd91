"""One parse per message per process: readers given the same payload share its parse.

``make run``'s demo hands each table message to five readers in one process (the studio's
public floor, its delay line, its secure-delay floor, the pit console, ``--show``); each used to
decode, bound and validate it again (docs/performance.md, "The demo").
"""

from __future__ import annotations

import json
from typing import Any

from controller.inbound import (
    SHARED_MAX_BYTES,
    SHARED_PARSES,
    Rejection,
    parse_envelope,
    parse_shared_object,
    parse_snapshot,
    parse_status,
)
from controller.messages import SCHEMA_VERSION, Envelope

JOURNAL = "0123456789abcdef" * 2


def _body(kind: str, seq: int, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "journal": JOURNAL,
        "table": "sh-1",
        "round": "sh-1-000001",
        "seq": seq,
        "session": 1,
        "kind": kind,
        "at": "2026-12-07T08:00:00.000000Z",
        "delayed": False,
        "data": data,
        **extra,
    }


def event(seq: int, *, pad: int = 0) -> bytes:
    data = {"device": "shoe", "state": "connected", "detail": "x"}
    notes = ["y" * 1000] * (pad // 1000 + 1)  # many strings, each within the bounds
    return json.dumps(_body("device_status", seq, data, notes=notes)).encode()


def snapshot(seq: int) -> bytes:
    data = {
        "round_no": 1,
        "game": "teen-patti-20-20",
        "state": "betting_open",
        "betting_closes_at": None,
        "cards": [],
        "awaiting_rescan": None,
        "result": None,
        "last_seq": seq,
    }
    return json.dumps(_body("round_snapshot", seq, data)).encode()


def status() -> bytes:
    body = {
        "schema_version": SCHEMA_VERSION,
        "journal": JOURNAL,
        "state": "online",
        "table": "sh-1",
        "session": 1,
        "game": "teen-patti-20-20",
        "version": "1",
        "at": "2026-12-07T08:00:00.000000Z",
    }
    return json.dumps(body).encode()


def test_readers_of_the_same_bytes_share_one_parse() -> None:
    payload = event(1)
    first = parse_envelope(payload, table="sh-1")
    assert isinstance(first, Envelope)
    assert parse_envelope(bytes(bytearray(payload)), table="sh-1") is first  # equal bytes
    found = parse_snapshot(snapshot(2), table="sh-1")
    assert not isinstance(found, Rejection)
    again = parse_snapshot(snapshot(2), table="sh-1")
    assert not isinstance(again, Rejection)
    assert again[0] is found[0] and again[1] is found[1]
    assert parse_status(status(), table="sh-1") is parse_status(status(), table="sh-1")


def test_what_the_parse_depends_on_is_part_of_what_is_shared() -> None:
    payload = event(3)
    public = parse_envelope(payload, table="sh-1")
    assert isinstance(public, Envelope)
    other = parse_envelope(payload, table="sh-2")  # the topic names another table
    assert isinstance(other, Rejection) and other.code == "wrong_table"
    assert parse_envelope(payload, table="sh-1", secure=True) is not public
    assert parse_envelope(payload, table="sh-1") is public


def test_mutable_or_large_payloads_are_parsed_each_time() -> None:
    payload = event(4)
    mutable = bytearray(payload)
    first = parse_envelope(mutable, table="sh-1")
    assert isinstance(first, Envelope)
    assert parse_envelope(mutable, table="sh-1") is not first
    assert parse_envelope(mutable, table="sh-1") == first
    large = event(5, pad=SHARED_MAX_BYTES)
    assert len(large) > SHARED_MAX_BYTES
    parsed = parse_envelope(large, table="sh-1")
    assert isinstance(parsed, Envelope)
    assert parse_envelope(large, table="sh-1") is not parsed


def test_a_flood_of_distinct_payloads_turns_the_cache_over() -> None:
    first = parse_envelope(event(10), table="sh-1")
    for seq in range(11, 11 + SHARED_PARSES):
        parse_envelope(event(seq), table="sh-1")
    assert parse_envelope(event(10), table="sh-1") is not first  # parsed anew: bounded
    assert parse_envelope(event(10), table="sh-1") == first


def test_a_rejection_is_shared_like_a_message() -> None:
    payload = b'{"schema_version": "3", "table": 1}'
    rejected = parse_envelope(payload)
    assert isinstance(rejected, Rejection)
    assert parse_envelope(payload) is rejected


def test_the_object_as_received_comes_from_the_parse_already_made() -> None:
    """The pit console keeps each message's JSON object as received (what a signature
    covers): after the typed parse, it is that parse's object, not a second one."""
    payload = event(20)
    parsed = parse_envelope(payload, table="sh-1")
    assert isinstance(parsed, Envelope)
    body = parse_shared_object(payload)
    assert body is parse_shared_object(bytes(bytearray(payload)))
    assert body == json.loads(payload)
    assert parse_shared_object(bytearray(payload)) is not body  # a mutable payload: parsed
