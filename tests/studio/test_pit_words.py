"""What the pit console says: device states and the tables' answers in words (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.studio.pit.words import (
    action_record,
    action_sentence,
    age_words,
    device_label,
    device_words,
    state_words,
)

LOST_AT = "2026-11-27T03:00:00.000000Z"
BACK_AT = "2026-11-27T03:00:03.400000Z"
NOW = datetime(2026, 11, 27, 3, 0, 10, tzinfo=UTC)
REPR = "the connection to the device failed (url='serial:///tmp/tp/pty', errno=5)"


def test_a_lost_scanner_in_words_with_its_age_and_the_detail_kept_apart():
    words = device_words("serial:///tmp/tp/pty", "lost", at=LOST_AT, detail=REPR)
    assert words.sentence(NOW) == "card scanner disconnected 10 s ago"
    assert not words.ok
    assert words.detail == REPR
    assert "serial" not in words.sentence(NOW) and "(" not in words.sentence(NOW)


def test_a_scanner_back_says_when_it_was_lost_and_how_long_it_was_away():
    words = device_words("serial:///tmp/tp/pty", "recovered", at=BACK_AT, lost_at=LOST_AT)
    assert words.sentence(NOW) == "card scanner disconnected 10 s ago, reconnected after 3 s"
    assert words.ok and words.age_at == LOST_AT


def test_a_device_never_lost_and_a_state_the_words_do_not_know():
    assert (
        device_words("tcp://10.0.0.5:9000", "connected", at=LOST_AT).sentence(NOW)
        == "card scanner connected 10 s ago"
    )
    jammed = device_words("shoe", "paper_jam", at=LOST_AT)
    assert jammed.sentence(NOW) == "card reader shoe reports paper jam 10 s ago"
    assert not jammed.ok
    assert device_words("shoe", "boot", at=None).sentence(NOW) == "card reader shoe starting up"


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0 s ago"), (9.6, "10 s ago"), (119, "119 s ago"), (600, "10 min ago"), (9000, "2 h ago")],
)
def test_ages(seconds: float, said: str) -> None:
    assert age_words(seconds) == said


@given(device=st.text(max_size=80), state=st.text(max_size=40), at=st.none() | st.text(max_size=40))
def test_any_device_text_gives_words_and_never_raises(device: str, state: str, at: str | None):
    words = device_words(device, state, at=at, lost_at=at)
    assert words.sentence(NOW).startswith(device_label(device))
    assert state_words(state)


def test_answers_as_sentences() -> None:
    table, round_id = "tp-01", "tp-01-000042"
    assert (
        action_sentence("void", table=table, round_id=round_id, status="accepted")
        == "Round tp-01-000042 at table tp-01 voided: every bet is refunded."
    )
    assert (
        action_sentence("resume", table=table, round_id=round_id, status="accepted")
        == "Round tp-01-000042 at table tp-01 resumed: the dealer deals on."
    )
    assert (
        action_sentence(
            "replay", table=table, round_id=round_id, status="accepted", data={"resent": 2}
        )
        == "Table tp-01 re-sent 2 result messages of round tp-01-000042."
    )
    assert (
        action_sentence("ack", table=table, round_id=None, status="accepted", data={"alert_seq": 7})
        == "Table tp-01 recorded that you acknowledged the alert (entry 7)."
    )
    assert (
        action_sentence(
            "resume",
            table=table,
            round_id=round_id,
            status="refused",
            reason="no round is in progress",
        )
        == "Table tp-01 refused to resume round tp-01-000042: no round is in progress."
    )
    assert action_sentence(
        "void",
        table=table,
        round_id=round_id,
        status="refused",
        reason="not authorized",
        by_broker=True,
    ).startswith("The broker did not pass the void on to table tp-01")
    assert action_sentence(
        "void", table=table, round_id=round_id, status="no_answer", timeout=10
    ).startswith("No answer from table tp-01 within 10 s")
    assert (
        action_sentence(
            "void", table=table, round_id=round_id, status="invalid", reason="a void needs a reason"
        )
        == "Not sent: A void needs a reason."
    )


@given(
    action=st.sampled_from(["void", "resume", "replay", "ack", "other"]),
    status=st.sampled_from(["accepted", "refused", "no_answer", "not_sent", "invalid", "x"]),
    reason=st.text(max_size=60),
    data=st.dictionaries(st.sampled_from(["resent", "alert_seq"]), st.integers() | st.text()),
)
def test_every_answer_is_a_sentence_without_json(action, status, reason, data):
    said = action_sentence(
        action, table="tp-01", round_id="r", status=status, reason=reason, data=data
    )
    assert said.endswith(".")
    assert "command_id" not in said
    if "{" not in reason and "}" not in reason:
        assert "{" not in said, "no JSON in an answer"


def test_actions_as_recall_lists_them_after_the_operator() -> None:
    assert action_record("void", status="accepted", void_reason="shoe dropped") == (
        "voided the round (shoe dropped)"
    )
    assert action_record("replay", status="accepted", data={"resent": 1}) == (
        "had the results re-sent (1 message)"
    )
    assert action_record("ack", status="accepted", data={"alert_seq": 9}) == (
        "acknowledged the alert (entry 9)"
    )
    assert action_record("resume", status="refused", reason="no round is in progress.") == (
        "asked to resume the round: refused (no round is in progress)"
    )
