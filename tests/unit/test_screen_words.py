"""The words people read on the command line's screens (issue 25, items 4 and 5)."""

from __future__ import annotations

from fractions import Fraction

from controller.analysis import AnalysisReport, BetReport, Method, OutcomeRow, payout_words
from controller.watch import describe
from controller.wording import reason_words, returns_words

EVENTS = "tables/sim-1/events"
RESULTS = "tables/sim-1/results"
AT = "2026-01-01T10:00:00.000Z"


def _event(kind: str, data: dict[str, object], *, round_id: str | None = None) -> str | None:
    envelope = {"kind": kind, "seq": 5, "at": AT, "round": round_id, "data": data}
    return describe(EVENTS, envelope)


def test_a_card_read_during_betting_is_not_named_none():
    line = _event("card_refused", {"slot": None, "card": "Ks", "reason": "betting is still open"})
    assert line == "10:00:00.000 #5   Ks read before the deal, refused: betting is still open"
    assert "None" not in line


def test_a_card_refused_at_its_slot_names_the_slot_and_the_reason_in_prose():
    line = _event("card_refused", {"slot": "A1", "card": "Ks", "reason": "duplicate_card"})
    assert line == "10:00:00.000 #5   A1 refused Ks: duplicate card"


def test_a_window_closed_with_no_choice_says_so_not_an_empty_setting():
    line = _event("decision_applied", {"window": "setting", "decision": {}, "default": True})
    assert line is not None
    assert line.endswith(
        "decision setting: nothing chosen by the deadline (the game's default applies)"
    )
    assert ":  (" not in line


def test_a_chosen_decision_is_listed():
    line = _event("decision_applied", {"window": "action-1", "decision": {"action": "call"}})
    assert line == "10:00:00.000 #5   decision action-1: action=call"


def test_one_name_for_a_round_and_its_id_where_a_command_asks_for_it():
    round_id = "sim-1-3f9a1c2e-000012"
    opened = _event(
        "round_opened",
        {
            "round_no": 12,
            "game": "teen-patti-20-20",
            "betting_seconds": 15,
            "betting_closes_at": AT,
        },
        round_id=round_id,
    )
    closed = _event("betting_closed", {}, round_id=round_id)
    halted = _event("round_halted", {"reason": "device_lost"}, round_id=round_id)
    assert opened is not None and opened.startswith(
        f"10:00:00.000 #5 round 12 ({round_id}, teen-patti-20-20): "
    )
    assert closed == "10:00:00.000 #5 round 12: betting closed, dealing"
    assert halted == f"10:00:00.000 #5 round 12 ({round_id}) HALTED: device lost"


def test_a_settlement_says_what_each_bet_returns_stake_included():
    envelope = {
        "kind": "round_result",
        "seq": 9,
        "at": AT,
        "round": "sim-1-3f9a1c2e-000001",
        "data": {
            "round_no": 1,
            "bets": {
                "player_a": {"outcome": "win", "payout": "1.95", "reason": "win"},
                "pair_plus_a": {"outcome": "lose", "payout": "0", "reason": "high_card"},
            },
        },
    }
    text = describe(RESULTS, envelope)
    assert text is not None
    assert "player_a     win    returns 1.95 per 1 staked" in text
    assert "pair_plus_a  lose   returns nothing (high card)" in text
    assert " pays " not in text and "(win)" not in text


def test_words_helpers():
    assert returns_words("1.95") == "returns 1.95 per 1 staked"
    assert returns_words("0") == "returns nothing"
    assert reason_words("no_bonus") == "no bonus"
    assert reason_words("dealer does not qualify") == "dealer does not qualify"
    assert payout_words(Fraction(19, 20)) == "pays 0.95 to 1"
    assert payout_words(Fraction(0)) == "push (stake back)"
    assert payout_words(Fraction(-1)) == "loses the stake"


def _report(pays: list[Fraction]) -> AnalysisReport:
    rows = [OutcomeRow(f"o{n}", p, Fraction(1, len(pays)), 1) for n, p in enumerate(pays)]
    return AnalysisReport(game="g", method=Method.EXACT, bets={"main": BetReport(rows)})


def test_a_par_sheet_labels_its_net_payouts():
    text = _report([Fraction(19, 20), Fraction(-1)]).to_text()
    assert "pays 0.95 to 1" in text and "loses the stake" in text
    assert "return to player 97.5000%" in text


def test_a_par_sheet_without_a_house_bet_says_so():
    text = _report([Fraction(0), Fraction(0)]).to_text()
    assert "no house bet" in text
    assert "return to player" not in text
