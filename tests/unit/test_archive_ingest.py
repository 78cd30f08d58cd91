"""What the archive makes of a message (pure): entries, statuses, and rejections with reasons."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.archive import ingest
from controller.archive.batch import WALK_WINDOW, ChainWalks, Copy, Linked, walk_chain
from controller.archive.config import ConsumerSettings, load_archive_settings
from controller.archive.gap_tracker import MAX_LISTED, GapTracker
from controller.archive.gaps import Hole, advance
from controller.archive.ingest import (
    Entry,
    Rejected,
    Status,
    TableKeys,
    canonical_json,
    classify,
    classify_batch,
    loads,
)
from controller.errors import ConfigError
from controller.inbound import SeqGuard, check_value
from controller.signing import Signer, verify_envelope

SIGNER = Signer(Ed25519PrivateKey.generate(), "k1")
KEYS = TableKeys({"t1": SIGNER.public_key, "t2": None})


def env(**over: object) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema_version": "2",
        "table": "t1",
        "round": "t1-000001",
        "seq": 5,
        "session": 2,
        "kind": "card_dealt",
        "at": "2026-11-25T07:00:00.000001Z",
        "delayed": False,
        "data": {"slot": "A1", "card": "As", "face": "up"},
    }
    base.update(over)
    return base


def run(payload: object, topic: str = "tables/t1/events") -> Entry | Status | Rejected:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return classify(topic, raw, KEYS)


def test_an_entry_is_read_with_its_fields():
    found = run(env())
    assert isinstance(found, Entry)
    assert (found.table, found.session, found.seq, found.kind, found.round_id) == (
        "t1",
        2,
        5,
        "card_dealt",
        "t1-000001",
    )
    assert found.at.microsecond == 1 and found.signed is False


def test_a_signed_result_verifies_and_a_changed_one_does_not():
    result = SIGNER.sign(env(kind="round_result", data={"winner": "A", "bets": []}))
    found = run(result, "tables/t1/results")
    assert isinstance(found, Entry) and found.signed
    changed = {**result, "data": {"winner": "B", "bets": []}}
    bad = run(changed, "tables/t1/results")
    assert isinstance(bad, Rejected) and bad.category == "signature" and bad.seq == 5
    assert "does not match" in bad.reason
    unsigned = run(env(kind="round_result", data={}), "tables/t1/results")
    assert isinstance(unsigned, Rejected) and "no signature member" in unsigned.reason
    # A table without a key in the config: results are taken unsigned.
    assert isinstance(run(env(table="t2", kind="round_result"), "tables/t2/results"), Entry)


@pytest.mark.parametrize(
    ("payload", "topic", "category", "words"),
    [
        (b"\xff\xfe", "tables/t1/events", "not_utf8", "not UTF-8 (byte 0)"),
        (b'{"a": ', "tables/t1/events", "not_json", "not JSON"),
        ([1, 2], "tables/t1/events", "not_object", "JSON list, not an object"),
        (env(schema_version="1"), "tables/t1/events", "schema_version", "'1'"),
        (env(schema_version=None), "tables/t1/events", "schema_version", "None"),
        (env(table="t9"), "tables/t9/events", "unknown_table", "'t9'"),
        (env(table="t2"), "tables/t1/events", "malformed", "field 'table' is 't2'"),
        (env(seq="5"), "tables/t1/events", "malformed", "field 'seq'"),
        (env(seq=True), "tables/t1/events", "malformed", "field 'seq'"),
        (env(seq=0), "tables/t1/events", "malformed", "must be >= 1"),
        (env(data=[]), "tables/t1/events", "malformed", "field 'data'"),
        (env(at="yesterday"), "tables/t1/events", "malformed", "field 'at'"),
        (env(at="2026-11-25T07:00:00"), "tables/t1/events", "malformed", "no time zone"),
        (env(round=7), "tables/t1/events", "malformed", "field 'round'"),
        (env(), "tables/t1/secure/events", "malformed", "is not tables/TABLE"),
        (env(), "elsewhere/t1/events", "malformed", "is not tables/TABLE"),
    ],
)
def test_bad_messages_are_rejected_with_the_reason(payload, topic, category, words):
    found = run(payload, topic)
    assert isinstance(found, Rejected)
    assert found.category == category
    assert words in found.reason


def test_a_status_keeps_its_chain_head():
    status = {
        "schema_version": "2",
        "state": "online",
        "table": "t1",
        "session": 3,
        "chain_head": {"seq": 41, "hash": "ab" * 32},
    }
    found = run(status, "tables/t1/status")
    assert isinstance(found, Status) and found.chain_head == (41, "ab" * 32)


@given(st.binary(max_size=300), st.sampled_from(["events", "results", "status", "round", "x/y"]))
def test_nothing_makes_classify_raise(payload, suffix):
    assert isinstance(classify(f"tables/t1/{suffix}", payload, KEYS), Entry | Status | Rejected)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_no_json_value_makes_classify_raise(value):
    for payload in (
        value,
        {**env(), "data": value},
        {**env(), "seq": value},
        {**env(), "at": value},
    ):
        assert isinstance(run(payload), Entry | Status | Rejected)


def test_a_watermark_stops_below_the_first_hole_still_in_its_grace():
    ripe, young = Hole("t1", 5, 7, ripe=True), Hole("t1", 10, 10, ripe=False)
    assert advance(3, 12, []) == 12
    assert advance(3, 12, [ripe]) == 12  # recorded as a gap: the watermark passes it
    assert advance(3, 12, [ripe, young]) == 9
    assert advance(3, 12, [Hole("t1", 4, 4, ripe=False)]) == 3
    assert advance(3, None, []) == 3  # nothing above it
    assert advance(8, 12, [Hole("t1", 2, 2, ripe=False)]) == 8  # never moves down
    # A tail hole (up to the head a status stated) recorded: the watermark passes it.
    assert advance(3, 12, [Hole("t1", 13, 15, ripe=True)]) == 15
    assert advance(3, 12, [Hole("t1", 13, 15, ripe=False)]) == 12


def test_share_group_and_database_timeouts_are_checked(tmp_path):
    path = tmp_path / "archive.toml"
    path.write_text('[database]\nurl = "postgresql://x/y"\n[consumer]\nshare_group = "a/b"\n')
    with pytest.raises(ConfigError, match=r"consumer\.share_group"):
        load_archive_settings(path)
    path.write_text('[database]\nurl = "postgresql://x/y"\ntimeout_seconds = 0\n')
    with pytest.raises(ConfigError, match=r"database\.timeout_seconds"):
        load_archive_settings(path)
    path.write_text(
        '[database]\nurl = "postgresql://x/y"\nreconnect_min_seconds = 5\n'
        "reconnect_max_seconds = 1\n"
    )
    with pytest.raises(ConfigError, match="reconnect_max_seconds is below"):
        load_archive_settings(path)
    path.write_text('[database]\nurl = "postgresql://x/y"\n[consumer]\npartition = "2/2"\n')
    with pytest.raises(ConfigError, match="is not I/N"):
        load_archive_settings(path)
    path.write_text(
        '[database]\nurl = "postgresql://x/y"\n[consumer]\nshare_group = "a"\npartition = "0/2"\n'
    )
    with pytest.raises(ConfigError, match="exclude each other"):
        load_archive_settings(path)
    path.write_text('[database]\nurl = "sqlite:///a.sqlite"\n[consumer]\npartition = "0/2"\n')
    with pytest.raises(ConfigError, match="need a PostgreSQL archive"):
        load_archive_settings(path)
    path.write_text('[database]\nurl = "postgresql://x/y"\n[consumer]\nshare_group = "arch"\n')
    assert load_archive_settings(path).consumer.share_group == "arch"
    example = load_archive_settings(Path(__file__).parents[2] / "config/archive-example.toml")
    assert example.consumer.share_group == "archive"


def test_a_partition_takes_its_share_of_the_tables_and_together_all():
    tables = [f"t{n}" for n in range(40)]
    halves = [ConsumerSettings(partition=f"{i}/2") for i in range(2)]
    owned = [{t for t in tables if half.owns(t)} for half in halves]
    assert owned[0] | owned[1] == set(tables) and not owned[0] & owned[1]
    assert all(8 <= len(part) <= 32 for part in owned)  # a hash, not one side
    assert all(ConsumerSettings().owns(t) for t in tables)


def test_the_sqlite_paths_gaps_are_seen_on_events_only_and_filled_by_any_copy():
    tracker = GapTracker({"t1": 3})
    assert tracker.seen("t1", 4, 0.0, in_order_topic=True) is None
    gap = tracker.seen("t1", 8, 1.0, in_order_topic=True)
    assert gap is not None and (gap.lo, gap.hi) == (5, 7)
    assert tracker.seen("t1", 12, 1.0, in_order_topic=False) is None  # results: not gap-free
    assert tracker.due_for_replay(1.1, grace=0.5) == []
    assert tracker.due_for_replay(1.5, grace=0.5) == [gap]
    gap.requested_at = 1.5  # asked: due again only `every` seconds later, until alerted
    assert tracker.due_for_replay(1.6, grace=0.5) == []
    assert tracker.due_for_replay(11.4, grace=0.5, every=10.0) == []
    assert tracker.due_for_replay(11.5, grace=0.5, every=10.0) == [gap]
    gap.alerted = True
    assert tracker.due_for_replay(30.0, grace=0.5, every=10.0) == []
    gap.requested_at, gap.alerted = None, False
    tracker.seen("t1", 6, 2.0, in_order_topic=False)
    assert gap.missing() == [5, 7] and tracker.filled() == []
    tracker.seen("t1", 5, 2.0, in_order_topic=True)
    tracker.seen("t1", 7, 2.0, in_order_topic=True)
    assert tracker.filled() == [gap] and tracker.open == []
    assert tracker.due_for_alert(99.0, timeout=1.0) == []
    first = tracker.seen("new", 3, 0.0, in_order_topic=True)
    assert first is not None and (first.lo, first.hi) == (1, 2)


def test_archive_config_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "archive.toml"
    path.write_text('[database]\nurl = "postgresql://x/y"\n[gaps]\ntimeout_seconds = 0\n')
    with pytest.raises(ConfigError, match=r"gaps\.timeout_seconds") as caught:
        load_archive_settings(path)
    assert caught.value.context["path"] == str(path)
    path.write_text('[database]\nurl = "postgresql://x/y"\n[tables."a/b"]\n')
    with pytest.raises(ConfigError, match="one topic level"):
        load_archive_settings(path)
    path.write_text("[database\n")
    with pytest.raises(ConfigError, match="not TOML"):
        load_archive_settings(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_archive_settings(tmp_path / "missing.toml")
    path.write_text(
        '[database]\nurl = "postgresql://x/y"\n[tables.t1]\n[tables.t2]\npublic_key = "k.pub"\n'
    )
    settings = load_archive_settings(path)
    assert settings.tables["t1"].public_key is None
    assert settings.gaps.replay_role == "pit"


# -- speed paths: the same answers as the plain ones ----------------------------------------

_FLOATLESS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _stdlib(value: object) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=500)
@given(_FLOATLESS)
def test_the_fast_canonical_json_is_the_standard_librarys_bytes(value):
    # orjson writes it when there is no float; what it cannot write falls back.
    try:
        fast = canonical_json(value, plain=True)
    except UnicodeEncodeError:  # a lone surrogate: the standard library cannot either
        with pytest.raises(UnicodeEncodeError):
            canonical_json(value, plain=False)
        return
    assert fast == _stdlib(value)


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ('{"a": 1, "b": "1.5e-05", "c": [true, null]}', True),
        ('{"a": 1.0}', False),
        ('{"a": [1e-05]}', False),
        ('{"a": NaN}', False),
        ('{"a": -Infinity}', False),
    ],
)
def test_loads_tells_whether_a_payload_holds_a_float(text, plain):
    value, utf8, found = loads(text.encode())
    assert utf8 and found is plain
    assert canonical_json(value, plain=found) == _stdlib(value)


def test_a_payload_that_is_not_utf8_is_rejected_as_every_reader_does():
    payload = json.dumps(env()).encode("utf-16")
    value, utf8, plain = loads(payload)  # what the decoder alone would make of it
    assert value == env() and not utf8 and not plain
    found = run(payload)
    assert isinstance(found, Rejected) and found.category == "not_utf8"


def test_a_lone_surrogate_is_rejected_not_raised():
    found = run(json.dumps(env(data={"note": "\ud800"})).encode())
    assert isinstance(found, Rejected) and found.category == "not_utf8"


@given(st.lists(st.sampled_from(["events", "results", "status"]), min_size=1, max_size=8))
def test_a_batch_classifies_like_one_message_at_a_time(topics):
    result = SIGNER.sign({**env(seq=9, kind="round_result", data={"winner": "A"})})
    messages = [(f"tables/t1/{t}", json.dumps(result).encode()) for t in topics]
    messages.append(("tables/t2/events", messages[0][1]))  # another table's topic: rejected
    assert classify_batch(messages, KEYS) == [classify(t, p, KEYS) for t, p in messages]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8),
        st.text(max_size=20) | st.integers(-(2**53) + 1, 2**53 - 1),  # within the bounds
        max_size=4,
    ),
    st.integers(min_value=0, max_value=63),
    st.integers(min_value=1, max_value=255),
    st.booleans(),
)
def test_the_archive_accepts_a_signature_exactly_when_the_tables_verifier_does(
    data, position, flip, tamper
):
    """libsodium checks signatures at ingest; OpenSSL (``controller.signing``) is the tables'
    verifier. Whatever the envelope and whatever byte of its signature is changed, the archive
    accepts it exactly when ``verify_envelope`` does."""
    signed = SIGNER.sign(env(seq=7, kind="round_result", data=data))
    if tamper:
        raw = bytearray(base64.b64decode(signed["signature"]["value"]))
        raw[position] ^= flip
        signed["signature"]["value"] = base64.b64encode(bytes(raw)).decode()
    found = run(signed, "tables/t1/results")
    assert verify_envelope(signed, SIGNER.public_key) is (not tamper)
    assert ingest._verifies(signed, KEYS.verifiers["t1"], False) is (not tamper)  # the fast path
    assert isinstance(found, Entry) is (not tamper)
    if isinstance(found, Entry):
        assert found.signed
    else:
        assert isinstance(found, Rejected) and found.category == "signature"


def test_the_libsodium_key_is_the_tables_key():
    raw = SIGNER.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert bytes(KEYS.verifiers["t1"]) == raw and "t2" not in KEYS.verifiers


# -- hostile input: the shared bounds before the archive's decoder (issue 21) ----------------

DEEP = b"[" * 3000 + b"]" * 3000
"""The probe's ~6 kB value that raised RecursionError in the archive's decoder."""


def _hostile_payloads() -> list[tuple[bytes, str]]:
    """The probe's payloads and their kin, with the category each must be rejected as."""
    return [
        (DEEP, "too_deep"),
        (b'{"schema_version": "2", "data": ' + DEEP + b"}", "too_deep"),
        (b"[" * 3000, "too_deep"),  # not even closed
        (json.dumps(env(seq=2**63)).encode(), "out_of_range"),
        (json.dumps(env(seq=10**30)).encode(), "out_of_range"),
        (json.dumps(env(session=-(2**63) - 1)).encode(), "out_of_range"),
        (json.dumps(env(data={"x": 2**53})).encode(), "out_of_range"),
        (json.dumps(env(data={"x": float("nan")})).encode(), "out_of_range"),
        (json.dumps(env(data={"x": 1e300})).encode(), "out_of_range"),
        (json.dumps(env(data={"x": "y" * 20_000})).encode(), "too_large"),
        (json.dumps(env(data={"x": list(range(10_001))})).encode(), "too_large"),
        (b" " * (256 * 1024 + 1), "too_large"),
        (json.dumps(env(data={"x": "\udfff"})).encode(), "not_utf8"),
        (b"\xc0\x80", "not_utf8"),
        (b"1" * 5000, "not_json"),
        (b'"a"', "not_object"),
    ]


@pytest.mark.parametrize(("payload", "category"), _hostile_payloads())
def test_hostile_payloads_are_rejected_by_the_shared_bounds(payload, category):
    for suffix in ("events", "results", "status"):
        found = classify(f"tables/t1/{suffix}", payload, KEYS)
        assert isinstance(found, Rejected), found
        assert found.category == category, found.reason
        assert found.seq is None  # nothing beyond a database integer is kept as its seq
        assert len(found.payload) <= 256 * 1024 and found.reason


def test_a_status_with_a_chain_head_beyond_the_bounds_is_rejected():
    status = {"schema_version": "2", "state": "online", "table": "t1", "session": 3}
    status["chain_head"] = {"seq": 2**63, "hash": "ab" * 32}
    found = run(status, "tables/t1/status")
    assert isinstance(found, Rejected) and found.category == "out_of_range"


def test_values_within_the_bounds_are_taken_exactly_as_before():
    data = {"big": 2**53 - 1, "small": -(2**53) + 1, "f": 1.5, "s": "é" * 100, "u": "\u00e9"}
    found = run(env(data=data))
    assert isinstance(found, Entry) and found.data == data


def _status(seq: int, at: str = "2026-11-25T07:00:00Z") -> tuple[str, bytes]:
    body = {
        "schema_version": "2",
        "state": "online",
        "table": "t2",
        "session": 2,
        "game": "two_hand_poker",
        "version": "1",
        "at": at,
        "chain_head": {"seq": seq, "hash": "ab" * 32},
    }
    return "tables/t2/status", json.dumps(body).encode()


def _event(seq: int) -> tuple[str, bytes]:
    return "tables/t2/events", json.dumps(env(table="t2", seq=seq)).encode()


def test_a_seq_far_ahead_of_what_the_table_could_have_sent_is_rejected():
    guard = SeqGuard()
    now = datetime.fromisoformat("2026-11-25T07:00:10Z").timestamp()
    found = classify_batch(
        [_status(41), _event(42), _event(10**9), _event(43), _event(2**53 - 1)],
        KEYS,
        guard=guard,
        now=now,
    )
    assert isinstance(found[0], Status)
    assert isinstance(found[1], Entry) and isinstance(found[3], Entry)
    for ahead in (found[2], found[4]):
        assert isinstance(ahead, Rejected) and ahead.category == "seq_ahead"
        assert "could have sent" in ahead.reason and ahead.payload
    assert isinstance(found[4], Rejected) and found[4].seq == 2**53 - 1
    # The watermark stayed where the real table is: its next entry is taken.
    assert isinstance(classify_batch([_event(44)], KEYS, guard=guard, now=now)[0], Entry)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["events", "results", "status", "round"]),
            st.binary(max_size=400)
            | st.sampled_from([p for p, _ in _hostile_payloads()])
            | st.builds(lambda s: json.dumps(env(seq=s)).encode(), st.integers(min_value=-1)),
        ),
        max_size=12,
    )
)
def test_no_batch_of_bytes_makes_classify_batch_raise(messages):
    guard = SeqGuard()
    batch = [(f"tables/t1/{suffix}", payload) for suffix, payload in messages]
    batch.append(("tables/t1/events", json.dumps(env(seq=7)).encode()))
    found = classify_batch(batch, KEYS, guard=guard, now=1.0e9)
    assert len(found) == len(batch)
    for item in found:
        assert isinstance(item, Entry | Status | Rejected)
        if isinstance(item, Entry | Rejected) and item.seq is not None:
            assert -(2**63) <= item.seq < 2**63  # fits the stores' integer columns
    assert isinstance(found[-1], Entry | Rejected)


_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(_ANY_JSON, st.integers(min_value=0, max_value=60))
def test_no_json_value_at_any_depth_makes_classify_raise(value, depth):
    nested: object = value
    for _ in range(depth):
        nested = [nested]
    for payload in ({**env(), "data": {"x": nested}}, {**env(), "seq": nested}, nested):
        found = run(json.dumps(payload).encode())
        assert isinstance(found, Entry | Status | Rejected)
        if isinstance(found, Entry):
            assert check_value(found.envelope) is None  # what is archived is within bounds


# -- the walk down the signed chain (pure; docs/archive.md, "Provisional entries") ------------


def _hashes(n: int, salt: str = "") -> list[str]:
    """A chain's hashes: index 0 is the genesis, index i the entry at seq i."""
    out = ["0" * 64]
    for seq in range(1, n + 1):
        out.append(hashlib.sha256(f"{salt}{seq}{out[-1]}".encode()).hexdigest())
    return out


def _chain(h: list[str], state: str = "provisional") -> dict[int, list[Linked]]:
    return {seq: [Linked(seq, 1, h[seq - 1], h[seq], state)] for seq in range(1, len(h))}


def test_a_walk_verifies_the_run_below_a_signed_head_down_to_what_is_verified():
    h = _hashes(8)
    chain = _chain(h)
    first = walk_chain(5, h[5], chain, {})
    assert first.verified == [(5, 1), (4, 1), (3, 1), (2, 1), (1, 1)] and first.stopped == "start"
    second = walk_chain(8, h[8], chain, {})
    assert second.verified == [(8, 1), (7, 1), (6, 1)] and second.stopped == "verified"
    assert not first.forged and not second.forged


def test_a_copy_off_the_chain_is_forged_and_the_chains_own_copy_takes_its_place():
    h = _hashes(5)
    chain = _chain(h)
    chain[3] = [Linked(3, 1, "ab" * 32, "cd" * 32, "provisional")]  # forged, came first
    real = Copy(id=7, seq=3, session=1, prev=h[2], hash=h[3])
    walk = walk_chain(5, h[5], chain, {3: [real]})
    assert walk.forged == [(3, 1)] and walk.promoted == [real]
    assert walk.verified == [(5, 1), (4, 1), (2, 1), (1, 1)] and walk.stopped == "start"
    # Without the chain's own copy yet: forged all the same, the walk waits there.
    chain = _chain(h)
    chain[3] = [Linked(3, 1, "ab" * 32, "cd" * 32, "provisional")]
    walk = walk_chain(5, h[5], chain, {})
    assert walk.forged == [(3, 1)] and walk.stopped == "missing" and walk.seq == 3


def test_an_unlinked_key_is_displaced_only_by_the_chains_own_copy():
    h = _hashes(5)
    chain = _chain(h)
    chain[3] = [Linked(3, 1, None, None, "provisional")]  # before links, or a forger's
    walk = walk_chain(5, h[5], chain, {})
    assert walk.stopped == "unlinked" and not walk.forged and walk.verified == [(5, 1), (4, 1)]
    real = Copy(id=9, seq=3, session=1, prev=h[2], hash=h[3])
    chain = _chain(h)
    chain[3] = [Linked(3, 1, None, None, "provisional")]
    walk = walk_chain(5, h[5], chain, {3: [real]})
    assert walk.forged == [(3, 1)] and walk.promoted == [real] and walk.stopped == "start"


def test_a_verified_key_is_never_displaced():
    h, other = _hashes(5), _hashes(5, salt="fork")
    chain = _chain(h)
    chain[2] = [Linked(2, 1, other[1], other[2], "verified")]
    walk = walk_chain(5, h[5], chain, {})
    assert walk.stopped == "verified" and walk.seq == 2 and not walk.forged
    assert chain[2][0].state == "verified"


def _entry(seq: int, h: list[str], *, head: bool = False) -> Entry:
    found = run(env(seq=seq, link={"prev": h[seq - 1], "hash": h[seq]}))
    assert isinstance(found, Entry)
    return dataclasses.replace(found, head=h[seq] if head else None)


def test_chain_walks_read_further_down_when_a_walk_needs_it():
    h = _hashes(200)
    walks = ChainWalks([_entry(200, h, head=True)])
    assert walks.windows() == {"t1": (200 - WALK_WINDOW, 201)}
    chain = _chain(h)
    lo = 200 - WALK_WINDOW
    walks.add("t1", lo, [k for s in range(lo, 201) for k in chain[s]], [])
    more = walks.run()
    assert more == {"t1": (1, lo - 1)}
    walks.add("t1", 1, [k for s in range(1, lo) for k in chain[s]], [])
    assert walks.run() == {}
    verified, forged_keys, promoted = walks.outcome()
    assert len(verified) == 200 and not forged_keys and not promoted


def test_a_late_entry_below_a_verified_key_is_covered():
    h = _hashes(6)
    chain = _chain(h)
    del chain[3]
    walk_chain(6, h[6], chain, {})  # stops at 3: missing
    late = ChainWalks([_entry(3, h)])
    keys = [k for s in sorted(chain) for k in chain[s]] + [Linked(3, 1, h[2], h[3], "provisional")]
    late.add("t1", 1, keys, [])
    assert late.run() == {}
    verified, _, _ = late.outcome()
    assert verified == [("t1", 1, 3), ("t1", 1, 2), ("t1", 1, 1)]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=2, max_value=30),
    st.lists(st.tuples(st.integers(1, 30), st.booleans(), st.booleans()), max_size=10),
)
def test_a_walk_verifies_only_the_chain_and_forges_only_what_is_off_it(n, forgeries):
    h = _hashes(n)
    true = {(seq, h[seq]) for seq in range(1, n + 1)}
    chain = _chain(h)
    copies: dict[int, list[Copy]] = {}
    for number, (seq, replace, kept) in enumerate(forgeries):
        if seq > n:
            continue
        fake = Linked(
            seq,
            2 + number,
            "ab" * 32,
            hashlib.sha256(str(number).encode()).hexdigest(),
            "provisional",
        )
        if replace:  # the forged copy came first: the real one is a conflicting copy
            chain[seq] = [fake]
            if kept:
                copies.setdefault(seq, []).append(Copy(number, seq, 1, h[seq - 1], h[seq]))
        else:
            chain[seq].append(fake)
    hashes = {(key.seq, key.session): key.hash for keys in chain.values() for key in keys}
    walk = walk_chain(n, h[n], chain, copies)
    assert all((seq, hashes[(seq, session)]) in true for seq, session in walk.verified)
    assert all((seq, hashes[(seq, session)]) not in true for seq, session in walk.forged)
    assert all((c.seq, c.hash) in true for c in walk.promoted)


def test_a_wide_gap_lists_a_bounded_number_of_missing_seqs():
    """A gap as wide as a day's entries is counted whole but listed only so far (no hang)."""
    tracker = GapTracker({"tp-01": 10})
    gap = tracker.seen("tp-01", 10**9, 0.0, in_order_topic=True)
    assert gap is not None
    tracker.seen("tp-01", 12, 0.0, in_order_topic=True)
    assert gap.missing_count == 10**9 - 11 - 1
    missing = gap.missing()
    assert len(missing) == MAX_LISTED
    assert missing[:2] == [11, 13]
