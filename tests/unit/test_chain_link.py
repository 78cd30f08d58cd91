"""Each entry's chain link on the wire (issue 21): ``link`` = its hash and the previous one's.

A consumer checks a run of entries against a signed chain head by walking down from the
signed result: its ``chain_head.hash`` is its ``link.hash``, and each entry below is on the
chain when its ``link.hash`` is the ``link.prev`` of the entry above it.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.journal import Journal, JournalEntry
from controller.journal.format import GENESIS_HASH
from controller.messages import Envelope, Topics, messages_for
from controller.signing import Signer, verify_envelope

SIGNER = Signer(Ed25519PrivateKey.generate(), "k1")
START = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _journal(path: Path) -> Journal:
    journal = Journal.open(path)
    rid = "lk-000001"
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("betting_closed", {}),
        ("card_dealt", {"slot": "A1", "hand": "A", "index": 0, "card": "As", "face": "up"}),
        ("card_dealt", {"slot": "B1", "hand": "B", "index": 1, "card": "Kd", "face": "up"}),
        ("round_voided", {"reason": "test", "bets": {}}),
    ]
    for n, (kind, body) in enumerate(bodies):
        journal.append(kind, body, round_id=rid, happened_at=START + timedelta(seconds=n))
    return journal


def _published(journal: Journal) -> list[dict[str, Any]]:
    topics = Topics(table="lk")
    out = []
    for entry in journal.entries():
        sent = messages_for(
            entry,
            topics,
            journal=journal.identity,
            delayed=False,
            snapshot=None,
            with_snapshot=False,
            signer=SIGNER,
        )
        out.append(json.loads(sent[0].payload))
    return out


def test_every_envelope_carries_its_link_and_the_run_walks_down_from_the_signed_head(tmp_path):
    with _journal(tmp_path / "j.sqlite") as journal:
        envelopes = _published(journal)
        head = journal.chain_head
    assert envelopes[0]["link"]["prev"] == GENESIS_HASH
    for below, above in itertools.pairwise(envelopes):
        assert below["link"]["hash"] == above["link"]["prev"]
    result = envelopes[-1]
    assert result["chain_head"]["hash"] == result["link"]["hash"] == head[1]
    assert verify_envelope(result, SIGNER.public_key)  # the link is inside the signed form
    moved = {**result, "link": {**result["link"], "prev": "0" * 64}}
    assert not verify_envelope(moved, SIGNER.public_key)
    assert all(Envelope.model_validate(e).link is not None for e in envelopes)


def test_the_append_and_every_read_give_the_same_link(tmp_path):
    path = tmp_path / "j.sqlite"
    appended: list[JournalEntry] = []
    with Journal.open(path) as journal:
        journal.add_listener(appended.append)
        for _ in range(5):
            journal.append("betting_closed", {}, round_id="r", happened_at=START)
        read = list(journal.entries())
        undelivered = journal.undelivered(from_seq=3)
        one = journal.get(4)
    by_append = [(e.seq, e.prev_hash, e.hash) for e in appended]
    assert [(e.seq, e.prev_hash, e.hash) for e in read] == by_append
    assert [(e.seq, e.prev_hash, e.hash) for e in undelivered] == by_append[2:]
    assert one is not None and (one.prev_hash, one.hash) == by_append[3][1:]
    assert by_append[0][1] == GENESIS_HASH
