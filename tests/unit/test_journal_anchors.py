"""Chain heads in the contract, the recorded feed's formats, and the verifier's verdicts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.journal import GENESIS_HASH, FeedError, Journal, VerifyReport, read_feed
from controller.messages import RoundSnapshot, Topics, messages_for
from controller.signing import Signer, verify_envelope, why_invalid

TOPICS = Topics(table="tp-1")


def _journal(path: Path) -> Journal:
    journal = Journal.open(path)
    journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
    journal.append("round_voided", {"reason": "stopped", "bets": {}}, round_id="r-1")
    journal.append("table_status", {"state": "idle"})
    return journal


def test_results_carry_their_own_chain_head_inside_the_signature(tmp_path):
    journal = _journal(tmp_path / "j.sqlite")
    assert journal.chain_head[0] == 3
    void = journal.get(2)
    assert void is not None and void.hash is not None
    signer = Signer(Ed25519PrivateKey.generate(), "k1")
    out = messages_for(
        void,
        TOPICS,
        journal=journal.identity,
        delayed=False,
        snapshot=RoundSnapshot().apply(void),
        signer=signer,
    )
    envelope = json.loads(out[0].payload)
    assert envelope["chain_head"] == {"seq": 2, "hash": void.hash}
    assert verify_envelope(envelope, signer.public_key)
    envelope["chain_head"]["hash"] = "0" * 64
    assert not verify_envelope(envelope, signer.public_key)
    # Other kinds carry none.
    status = journal.get(3)
    assert status is not None
    plain = messages_for(
        status, TOPICS, journal=journal.identity, delayed=False, snapshot=None, with_snapshot=False
    )
    assert "chain_head" not in json.loads(plain[0].payload)
    journal.close()


def _head(seq: int, chain: str, **extra: object) -> str:
    return json.dumps(
        {
            "table": "tp-1",
            "kind": "round_result",
            "chain_head": {"seq": seq, "hash": chain},
            **extra,
        }
    )


def test_feed_formats_plain_verbose_and_wrapped(tmp_path):
    feed = tmp_path / "feed.jsonl"
    payload = _head(2, "a" * 64)
    feed.write_text(
        "\n".join(
            [
                payload,
                f"tables/tp-1/results {_head(3, 'b' * 64)}",
                json.dumps({"topic": "tables/tp-1/status", "payload": _head(4, "c" * 64)}),
                json.dumps({"topic": "t", "payload": json.loads(_head(5, "d" * 64))}),
                '{"kind": "card_dealt", "seq": 9}',
                "",
            ]
        )
    )
    read = read_feed(feed)
    assert [(a.seq, a.hash[0]) for a in read.anchors] == [(2, "a"), (3, "b"), (4, "c"), (5, "d")]
    assert read.messages == 5
    assert read.tables == ("tp-1",)
    assert read.anchors[1].source == "feed.jsonl:2 (round_result)"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json at all", "line 1"),
        ("{broken", "line 1"),
        (json.dumps({"chain_head": {"seq": -1, "hash": "a" * 64}}), "chain_head.seq"),
        (json.dumps({"chain_head": {"seq": 1, "hash": "xyz"}}), "chain_head.hash"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_bad_feed_lines_are_named(tmp_path, line, says):
    feed = tmp_path / "feed.jsonl"
    feed.write_text(line + "\n")
    with pytest.raises(FeedError, match=says):
        read_feed(feed)


def test_missing_feed_is_an_error(tmp_path):
    with pytest.raises(FeedError, match="cannot read the feed"):
        read_feed(tmp_path / "nope.jsonl")


def test_verifier_verdicts(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = _journal(path)
    entries = {seq: journal.get(seq) for seq in (1, 2, 3)}
    heads: dict[int, str] = {}
    for seq, entry in entries.items():
        assert entry is not None and entry.hash is not None
        heads[seq] = entry.hash
    journal.close()
    feed = tmp_path / "feed.jsonl"

    def verify(*lines: str) -> VerifyReport:
        feed.write_text("\n".join(lines) + "\n")
        with Journal.open_readonly(path) as read:
            return read.verify(read_feed(feed).anchors)

    ok = verify(_head(0, GENESIS_HASH), _head(2, heads[2]), _head(3, heads[3]))
    assert ok.ok and ok.anchors_checked == 3 and ok.anchored_seq == 3
    assert not ok.truncated
    wrong_genesis = verify(_head(0, "1" * 64))
    assert "not the genesis hash" in wrong_genesis.problems[0].what
    rewritten = verify(_head(2, "e" * 64))
    assert rewritten.problems[0].seq == 2
    assert "hash differs from the feed's anchor" in rewritten.problems[0].what
    cut = verify(_head(2, heads[2]), _head(7, "f" * 64))
    assert cut.truncated
    assert "anchors seq 7" in cut.problems[0].what and "ends at seq 3" in cut.problems[0].what
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM entries WHERE seq = 2")
    gap = verify(_head(2, heads[2]))
    assert any("the journal has no such entry" in p.what for p in gap.problems)


def test_verify_command_against_a_feed(tmp_path, capsys):
    import argparse

    from controller.cli.recall import register
    from controller.errors import TablectlError

    path = tmp_path / "j.sqlite"
    _journal(path).close()
    feed = tmp_path / "feed.jsonl"
    parser = argparse.ArgumentParser(prog="tablectl")
    register(parser.add_subparsers(dest="command", required=True))

    def run(*argv: str) -> int:
        args = parser.parse_args(["journal", "verify", "--journal", str(path), *argv])
        try:
            return int(args.func(args))
        except TablectlError as exc:
            print(f"error: {exc}")
            return 2

    feed.write_text(_head(9, "a" * 64) + "\n")
    assert run("--against-feed", str(feed)) == 1
    out = capsys.readouterr().out
    assert "journal truncated: the feed anchors seq 9" in out
    assert "1 chain head(s) checked, the highest at seq 9; the journal is TRUNCATED" in out
    other = json.dumps({"table": "tp-2", "chain_head": {"seq": 1, "hash": "b" * 64}})
    feed.write_text(_head(1, "a" * 64) + "\n" + other + "\n")
    assert run("--against-feed", str(feed)) == 2
    assert "chain heads of 2 tables (tp-1, tp-2)" in capsys.readouterr().out


# --- hostile feeds and messages ---------------------------------------------------------------

HOSTILE_LINES = [
    b"[" * 3000 + b"]" * 3000,  # RecursionError out of read_feed before
    b'{"payload": "' + b"[" * 3000 + b"]" * 3000 + b'"}',
    b"tables/tp-1/status " + b"{" * 3000,
    b'{"chain_head": {"seq": NaN, "hash": "' + b"0" * 64 + b'"}}',
    b'{"chain_head": {"seq": ' + b"9" * 5000 + b', "hash": "x"}}',
    b'{"chain_head": {"seq": 9223372036854775808, "hash": "' + b"0" * 64 + b'"}}',
    b'{"table": "\\ud800", "chain_head": {"seq": 1, "hash": "' + b"0" * 64 + b'"}}',
    b'{"chain_head": {"seq": 1, "hash": ' + b"[" * 50 + b"]" * 50 + b"}}",
    b"\xff\xfe",
]


@pytest.mark.parametrize("line", HOSTILE_LINES)
def test_a_hostile_feed_line_is_a_feed_error_naming_the_line(tmp_path, line):
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(b"\n" + line + b"\n")
    with pytest.raises(FeedError, match=r"feed\.jsonl"):
        read_feed(feed)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.binary(max_size=80)
        | st.sampled_from(HOSTILE_LINES)
        | st.recursive(
            st.none() | st.integers() | st.floats() | st.text(max_size=70),
            lambda inner: st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["chain_head", "seq", "hash", "payload", "table", "kind"]), inner
            ),
            max_leaves=10,
        ).map(lambda value: json.dumps(value).encode()),
        max_size=4,
    )
)  # fmt: skip
def test_no_file_content_makes_read_feed_raise_anything_but_a_feed_error(tmp_path, lines):
    feed = tmp_path / "any.jsonl"
    feed.write_bytes(b"\n".join(lines))
    try:
        found, error = read_feed(feed), ""
    except FeedError as exc:
        found, error = None, str(exc)
    if found is None:
        assert "any.jsonl" in error
    else:
        assert all(0 <= anchor.seq < 2**53 for anchor in found.anchors)


@pytest.mark.parametrize(
    "payload",
    [
        b"[" * 3000 + b"]" * 3000,
        b'{"signature": {"alg": "Ed25519", "value": "AAAA"}, "x": '
        + b"[" * 990 + b"]" * 990 + b"}",
    ],
)  # fmt: skip
def test_signature_checks_say_false_on_a_deeply_nested_message(payload):
    key = Ed25519PrivateKey.generate().public_key()
    assert verify_envelope(payload, key) is False  # raised RecursionError before
    assert why_invalid(payload, key) != ""
