"""The card's stored body: a read card and a card entered by hand, the same text as ``json``."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from controller.journal.entries import CardDealtData, body_values, stored_body

OPTIONAL = {"source": "manual", "operator": "alice", "reason": "reader dead"}


def _json_text(body: CardDealtData) -> str:
    return json.dumps(body_values(body), separators=(",", ":"), ensure_ascii=False)


def test_a_read_card_is_stored_without_the_manual_fields() -> None:
    body = CardDealtData(slot="A1", hand="A", index=0, card="As", face="up")
    text, values = stored_body(body)
    assert text == '{"slot":"A1","hand":"A","index":0,"card":"As","face":"up"}'
    assert values == json.loads(text)


def test_a_card_entered_by_hand_keeps_who_and_why() -> None:
    body = CardDealtData(slot="B2", hand="B", index=3, card="Kc", face="up", **OPTIONAL)
    text, values = stored_body(body)
    assert values == json.loads(text) == {
        "slot": "B2", "hand": "B", "index": 3, "card": "Kc", "face": "up", **OPTIONAL
    }  # fmt: skip


@given(
    optional=st.sets(st.sampled_from(sorted(OPTIONAL))),
    card=st.text(min_size=1, max_size=4) | st.none(),
    face=st.sampled_from(["up", "hidden"]),
    hand=st.text(max_size=3) | st.none(),
)
def test_any_fields_set_store_the_text_json_writes(
    optional: set[str], card: str | None, face: str, hand: str | None
) -> None:
    extra = {key: OPTIONAL[key] for key in optional}
    body = CardDealtData(slot="S1", hand=hand, index=2, card=card, face=face, **extra)
    text, values = stored_body(body)
    assert text == _json_text(body)
    assert values == json.loads(text)
