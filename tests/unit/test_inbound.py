"""The one hardened parse (controller/inbound.py): bounded, typed, never raising."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from controller.inbound import (
    BOUNDS,
    Bounds,
    Rejection,
    RejectionLog,
    SeqGuard,
    check_payload,
    check_value,
    nesting_depth,
    parse_betting_status,
    parse_envelope,
    parse_json,
    parse_object,
    parse_snapshot,
    parse_status,
)
from controller.messages import Envelope, StatusMessage

AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
J1 = "a1" * 16
J2 = "b2" * 16


def event(**changes: object) -> bytes:
    body: dict[str, object] = {
        "schema_version": "3",
        "table": "tp-01",
        "journal": J1,
        "round": "tp-01-a1a1a1a1-000001",
        "seq": 42,
        "session": 1,
        "kind": "rescan_requested",
        "at": "2026-11-27T12:00:00.000000Z",
        "delayed": False,
        "data": {"slot": "A1", "attempt": 1, "cause": "crc"},
    }
    body.update(changes)
    return json.dumps(body).encode()


def test_a_table_event_is_read_as_its_typed_envelope():
    found = parse_envelope(event(), table="tp-01")
    assert isinstance(found, Envelope)
    assert (found.seq, found.kind, found.data["slot"]) == (42, "rescan_requested", "A1")


def test_deep_nesting_is_a_rejection_not_a_recursion_error():
    payload = b"[" * 3000 + b"]" * 3000  # the probe's ~6 kB value
    found = parse_json(payload)
    assert isinstance(found, Rejection) and found.code == "too_deep"
    deep_extra = event(data={"slot": "A1", "attempt": 1, "cause": "crc", "x": [[[[[[[[]]]]]]]]})
    assert isinstance(parse_envelope(deep_extra), Envelope)  # an extra field a consumer ignores
    deeper = b'{"data":' + b"[" * 30 + b"]" * 30 + b"}"
    assert isinstance(parse_envelope(deeper), Rejection)


def test_brackets_inside_strings_do_not_count_as_nesting():
    assert nesting_depth(b'{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"[[["}') == 1
    assert nesting_depth(b"[[1],[2,[3]]]") == 3


def test_out_of_range_numbers_are_rejections():
    for seq in (2**63, 10**30, 2**53):
        found = parse_envelope(event(seq=seq))
        assert isinstance(found, Rejection) and found.code == "out_of_range", seq
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        found = parse_json(b'{"x":' + constant + b"}")
        assert isinstance(found, Rejection) and found.code == "out_of_range"
    assert isinstance(parse_json(b"1" * 5000), Rejection)  # beyond int's digit limit


def test_sizes_encodings_and_shapes_are_rejected_with_a_reason():
    cases = {
        b"x" * (BOUNDS.max_bytes + 1): "too_large",
        b"\xff\xfe{}": "not_utf8",
        b'"\\ud800"': "not_utf8",
        b"{": "not_json",
        b"[]": "not_object",
        json.dumps({"a": "x" * (BOUNDS.max_string + 1)}).encode(): "too_large",
        json.dumps({"a": list(range(BOUNDS.max_items + 1))}).encode(): "too_large",
    }
    for payload, code in cases.items():
        found = parse_object(payload)
        assert isinstance(found, Rejection), payload[:40]
        assert found.code == code, (payload[:40], found)
        assert found.reason


def test_envelope_checks_version_table_and_the_kinds_data():
    assert parse_envelope(event(schema_version="9")).code == "schema_version"  # type: ignore[union-attr]
    wrong = parse_envelope(event(), table="tp-02")
    assert isinstance(wrong, Rejection) and wrong.code == "wrong_table"
    bad_data = parse_envelope(event(kind="card_dealt", data={"slot": 5}))
    assert isinstance(bad_data, Rejection) and bad_data.code == "invalid"
    assert "card_dealt" in bad_data.reason
    unknown_kind = parse_envelope(event(kind="from_the_future", data={"x": 1}))
    assert isinstance(unknown_kind, Envelope)


def test_status_snapshot_and_betting_status():
    status = StatusMessage(
        state="online",
        table="tp-01",
        journal=J1,
        session=2,
        game="teen-patti-20-20",
        version="1",
        at=AT,
    )
    assert isinstance(parse_status(status.to_bytes(), table="tp-01"), StatusMessage)
    assert isinstance(parse_status(status.to_bytes(), table="tp-02"), Rejection)
    assert isinstance(parse_snapshot(event()), Rejection)  # not a round_snapshot
    assert parse_betting_status(b'{"state":"online"}').state == "online"  # type: ignore[union-attr]
    assert isinstance(parse_betting_status(b'{"state":"maybe"}'), Rejection)


def test_seq_guard_refuses_a_seq_the_table_could_not_have_sent():
    guard = SeqGuard(Bounds(max_entries_per_second=10, seq_slack=100))
    status = StatusMessage(
        state="online",
        table="tp-01",
        journal=J1,
        session=1,
        game="teen-patti-20-20",
        version="1",
        at=AT,
        chain_head={"seq": 40, "hash": "0" * 64},
    )
    now = AT.timestamp() + 5
    guard.on_status(status, now)
    assert guard.admit("tp-01", 41, now) is None
    far = guard.admit("tp-01", 10**9, now)
    assert isinstance(far, Rejection) and far.code == "seq_ahead" and far.seq == 10**9
    assert guard.admit("tp-01", 42, now) is None  # the real table goes on
    assert guard.admit("tp-01", 41 + 100 + 50, now + 5) is None  # rate x time allows it


def test_seq_guard_takes_a_status_whose_time_has_no_epoch_value():
    # Naive year 1 is before the epoch in local time: datetime.timestamp() raises ValueError.
    status = parse_status(
        b'{"schema_version":"3","state":"online","table":"t","journal":"' + J1.encode() + b'",'
        b'"session":1,"game":"g",'
        b'"version":"1","at":"0001-01-01T00:00:00","chain_head":{"seq":40,"hash":"'
        + b"0" * 64
        + b'"}}'
    )
    assert isinstance(status, StatusMessage)
    guard = SeqGuard(Bounds(max_entries_per_second=1, seq_slack=10))
    guard.on_status(status, 100.0)
    assert guard.limit("t", 100.0) == 50  # anchored at the chain head, at the time given


def test_seq_guard_without_a_status_anchors_at_the_first_seq():
    guard = SeqGuard(Bounds(max_entries_per_second=1, seq_slack=10))
    assert guard.admit("t", 5, 0.0) is None
    assert guard.admit("t", 16, 0.0) is not None
    assert guard.admit("t", 15, 0.0) is None


def test_rejection_log_counts_every_rejection_and_logs_a_bounded_number():
    seen: list[Rejection] = []
    ticks = iter(range(1000))
    log = RejectionLog("test", on_reject=seen.append, burst=3, clock=lambda: float(next(ticks)))
    for _ in range(10):
        log.record(Rejection("too_deep", "deep"))
    assert log.counts["too_deep"] == 10 and log.total == 10 and len(seen) == 10
    assert log._logged == 3 and log._suppressed == 7


@given(st.binary(max_size=2048))
def test_no_byte_string_raises(payload: bytes):
    for parse in (parse_json, parse_object, parse_envelope, parse_status, parse_snapshot):
        parse(payload)
    parse_betting_status(payload)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=50,
)


@given(json_values)
def test_no_json_value_raises(value: object):
    payload = json.dumps(value).encode("utf-8", "surrogatepass")
    for parse in (parse_json, parse_object, parse_envelope, parse_status, parse_snapshot):
        parse(payload)
    wrapped = event(data={"slot": value}, kind="card_dealt")
    parse_envelope(wrapped)


ENVELOPE_FIELDS = (
    "schema_version", "table", "journal", "round", "seq", "session", "kind", "at", "delayed",
    "data", "state", "game", "version", "chain_head", "signature",
)  # fmt: skip


@given(st.fixed_dictionaries({}, optional=dict.fromkeys(ENVELOPE_FIELDS, json_values)))
def test_no_field_value_of_an_envelope_or_status_raises(body: dict[str, object]):
    """Each field the parse reads, holding any JSON value (a list as ``schema_version`` raised
    TypeError out of every reader: unhashable)."""
    body = {"schema_version": "3", **body} if "schema_version" not in body else body
    payload = json.dumps(body).encode("utf-8", "surrogatepass")
    for parse in (parse_envelope, parse_status, parse_snapshot, parse_betting_status):
        parse(payload)


def test_a_schema_version_of_any_type_is_a_rejection():
    for version in ([], {}, ["2"], {"2": 1}, 2, None, True, 2.0):
        for parse in (parse_envelope, parse_status, parse_snapshot):
            found = parse(event(schema_version=version))
            assert isinstance(found, Rejection) and found.code == "schema_version", version


def test_check_payload_bounds_a_payload_another_decoder_will_parse():
    assert check_payload(event()) is None
    deep = check_payload(b"[" * 3000 + b"]" * 3000)
    assert deep is not None and deep.code == "too_deep" and "3000 levels" in deep.reason
    # Many brackets, shallow: scanned, and within the bounds.
    assert check_payload(b"[" + b"[]," * 40 + b"[]]") is None
    # Brackets inside strings count towards the quick bound only, never towards the depth.
    assert check_payload(json.dumps({"a": "[" * 100}).encode()) is None
    big = check_payload(b" " * (BOUNDS.max_bytes + 1))
    assert big is not None and big.code == "too_large"
    wrong = check_payload(b'{"a": "\xff"}')
    assert wrong is not None and wrong.code == "not_utf8" and "byte 7" in wrong.reason


def test_check_value_bounds_what_another_decoder_parsed():
    assert check_value({"seq": 42, "data": {"a": [1.5, "x", None]}}) is None
    for value, code in (
        ({"seq": 2**63}, "out_of_range"),
        ({"a": [float("nan")]}, "out_of_range"),
        ({"a": "x" * (BOUNDS.max_string + 1)}, "too_large"),
        ({"\ud800": 1}, "not_utf8"),
        (list(range(BOUNDS.max_items + 1)), "too_large"),
    ):
        found = check_value(value)
        assert found is not None and found.code == code, (value, found)


@given(st.binary(max_size=512))
def test_check_payload_never_raises_and_agrees_with_parse_json(payload: bytes):
    early = check_payload(payload)
    parsed = parse_json(payload)
    if early is not None:
        assert isinstance(parsed, Rejection) and parsed.code == early.code


def test_a_forged_status_does_not_move_the_seq_watermark():
    now = AT.timestamp()
    guard = SeqGuard()

    def status(seq: int) -> StatusMessage:
        return StatusMessage(
            state="online", table="tp-01", journal=J1, session=1, game="g", version="1",
            at=AT, chain_head={"seq": seq, "hash": "0" * 64},
        )  # fmt: skip

    assert guard.on_status(status(40), now) is None
    forged = guard.on_status(status(10**9), now + 1)  # 10**9 entries in a second
    assert isinstance(forged, Rejection) and forged.code == "seq_ahead" and forged.seq == 10**9
    assert guard.admit("tp-01", 10**9, now + 2) is not None
    assert guard.admit("tp-01", 41, now + 2) is None  # the real table goes on


def _status(seq: int, session: int, journal: str = J1) -> StatusMessage:
    return StatusMessage(
        state="online", table="tp-01", journal=journal, session=session, game="g",
        version="1", at=AT, chain_head={"seq": seq, "hash": "0" * 64},
    )  # fmt: skip


def test_an_older_birth_leaves_the_guard_where_the_table_is():
    now = AT.timestamp()
    guard = SeqGuard(Bounds(max_entries_per_second=1, seq_slack=10))
    assert guard.on_status(_status(500, 3), now) is None
    assert guard.admit("tp-01", 505, now) is None
    assert guard.on_status(_status(100, 3), now) is None  # a retained birth, read again
    assert guard.admit("tp-01", 516, now) is not None  # still anchored at 505 (limit 515)
    assert guard.admit("tp-01", 515, now) is None


def test_a_new_journal_is_told_by_its_id_and_anchors_afresh_within_the_limit():
    now = AT.timestamp()
    guard = SeqGuard(Bounds(max_entries_per_second=1, seq_slack=10))
    assert guard.on_status(_status(500, 7), now) is None
    assert guard.journal("tp-01") == J1
    # A lower session of the same journal is an older birth (retained), not a new journal.
    assert guard.on_status(_status(3, 1), now) is None
    assert guard.admit("tp-01", 505, now) is None
    claimed = guard.on_status(_status(10**6, 1, J2), now)  # another journal, far ahead
    assert isinstance(claimed, Rejection) and claimed.code == "seq_ahead"
    assert "a new journal" in claimed.reason
    assert guard.admit("tp-01", 506, now) is None  # still following the old journal
    # Another journal from its start, even with a higher session: anchors afresh.
    assert guard.on_status(_status(3, 8, J2), now) is None
    assert guard.journal("tp-01") == J2
    assert guard.admit("tp-01", 4, now) is None
    assert guard.admit("tp-01", 505, now) is not None


def test_a_status_after_a_forged_first_seq_anchors_at_the_table():
    now = AT.timestamp()
    guard = SeqGuard(Bounds(max_entries_per_second=1, seq_slack=10))
    assert guard.admit("tp-01", 10**6, now) is None  # nothing to judge the first one by
    assert guard.on_status(_status(40, 1), now) is None
    assert guard.admit("tp-01", 41, now) is None
    assert guard.admit("tp-01", 10**6 + 1, now) is not None


def test_a_version_2_message_gets_one_clear_refusal_naming_the_versions():
    """What a table of the previous release publishes (no journal id): refused, once, saying
    which version it is and which this reader reads (issue 22: version 3)."""
    old = json.loads(event())
    old["schema_version"] = "2"
    del old["journal"]
    found = parse_envelope(json.dumps(old).encode())
    assert isinstance(found, Rejection) and found.code == "schema_version"
    assert found.reason == "schema_version '2' is not one this reader knows (3)"
    # A version 3 message without its journal is not the schema.
    missing = parse_envelope(json.dumps({**old, "schema_version": "3"}).encode())
    assert isinstance(missing, Rejection) and missing.code == "invalid"
    assert "journal" in missing.reason
