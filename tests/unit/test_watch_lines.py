"""Lines of ``tablectl watch`` that read badly before (issue #12 item 9)."""

from __future__ import annotations

from controller.watch import describe

TOPIC = "tables/t-1/events"


def test_a_holdem_hand_won_by_folds_names_the_winner_and_how():
    envelope = {
        "kind": "round_result",
        "seq": 40,
        "at": "2026-01-01T10:00:00.000Z",
        "data": {
            "round_no": 3,
            "winner": "seat6",
            "hands": {},
            "cards": {},
            "bets": {},
            "details": {"ended": "folds", "pots": []},
        },
    }
    line = describe(TOPIC, envelope)
    assert line == "10:00:00.000 #40 round 3 result: seat6 wins (the others folded)"


def test_a_showdown_still_lists_the_hands():
    envelope = {
        "kind": "round_result",
        "seq": 41,
        "at": "2026-01-01T10:00:00.000Z",
        "data": {
            "round_no": 4,
            "winner": "A",
            "hands": {"A": {"description": "pair of aces"}, "B": {"description": "king high"}},
            "cards": {"A": ["As", "Ad", "2c"], "B": ["Kh", "9d", "3s"]},
        },
    }
    assert describe(TOPIC, envelope) == (
        "10:00:00.000 #41 round 4 result: A wins; A [As Ad 2c] pair of aces; B [Kh 9d 3s] king high"
    )


def test_a_pit_alert_without_a_slot_does_not_print_none():
    envelope = {
        "kind": "pit_alert",
        "seq": 7,
        "at": "2026-01-01T10:00:00.000Z",
        "data": {"slot": None, "reason": "round halted: device lost: pit boss"},
    }
    line = describe(TOPIC, envelope)
    assert line == "10:00:00.000 #7 PIT ALERT: round halted: device lost: pit boss"
    assert "None" not in line


def test_a_pit_alert_at_a_slot_names_it():
    envelope = {
        "kind": "pit_alert",
        "seq": 8,
        "at": "2026-01-01T10:00:00.000Z",
        "data": {"slot": "B2", "reason": "3 misreads in a row"},
    }
    assert describe(TOPIC, envelope) == "10:00:00.000 #8 PIT ALERT at B2: 3 misreads in a row"


def test_a_late_seq_is_shown_once_and_a_repeat_is_not():
    import json

    from controller.inbound import RejectionLog
    from controller.tablefold import TableFold
    from controller.watch import Reader

    def event(seq: int) -> bytes:
        return json.dumps(
            {"schema_version": "3", "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
             "table": "t-1", "round": None, "seq": seq, "session": 1,
             "kind": "table_status", "at": "2026-01-01T10:00:00.000Z", "data": {"state": "ready"}}
        ).encode()  # fmt: skip

    reader = Reader("tables/t-1", TableFold("t-1"), RejectionLog(reader="watch"))
    assert reader.lines(TOPIC, event(1)) == ["10:00:00.000 #1 table: ready"]
    assert reader.lines(TOPIC, event(3)) == [
        "! gap: events 2..2 not received",
        "10:00:00.000 #3 table: ready",
    ]
    assert reader.lines(TOPIC, event(2)) == ["10:00:00.000 #2 table: ready"]  # late: shown
    assert reader.lines(TOPIC, event(2)) == []  # a repeat: not
    assert reader.lines(TOPIC, event(3)) == []
    assert reader.lines(TOPIC, event(4)) == ["10:00:00.000 #4 table: ready"]


def test_a_card_entered_by_hand_says_so():
    def card(source: str | None) -> dict[str, object]:
        data: dict[str, object] = {"slot": "B2", "hand": "B", "index": 3, "card": "Kc"}
        data["face"] = "up"
        if source is not None:
            data["source"] = source
        return {"kind": "card_dealt", "seq": 9, "at": "2026-01-01T10:00:00.000Z", "data": data}

    manual = describe(TOPIC, card("manual"))
    read = describe(TOPIC, card(None))
    assert manual is not None and manual.endswith("B2 Kc (entered by hand)")
    assert read is not None and read.endswith("B2 Kc")


def test_a_fold_by_removal_says_the_cards_left_the_reader():
    envelope = {
        "kind": "decision_applied",
        "seq": 12,
        "at": "2026-01-01T10:00:00.000Z",
        "data": {
            "window": "action-1",
            "decision": {"action": "fold", "seat": "seat2", "amount": 0},
            "default": False,
            "command_id": None,
            "source": "removal",
            "reason": "removal: seat2's cards were taken off its reader (the last left its reader)",
        },
    }
    line = describe(TOPIC, envelope)
    assert line is not None
    assert line.endswith("(the cards left the reader)"), line
    assert "fold" in line and "seat2" in line, line
