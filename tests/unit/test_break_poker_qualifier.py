"""Break Poker's dealer qualifier: the rule as written (``k32``) and the published reading.

The published par table (main bet edge 2.48%) has the dealer not qualifying 1.3408% of the
time: the probability that seven cards hold no pair, no straight, no joker and no king. The
tests count those hands here by combinatorics, independently of the par sheet.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections import Counter
from fractions import Fraction
from typing import Any

import pytest

from controller.analysis import Method
from controller.cards import JOKER, Card, parse_cards
from controller.errors import ConfigError
from controller.games.break_poker import par_sheet as par
from controller.games.break_poker.hands import Qualifier, high_key, qualifies
from controller.games.break_poker.live import BreakPokerLiveRound, Options
from controller.games.break_poker.rules import (
    BREAK_POKER,
    DEFAULT_PAYTABLES,
    Setting,
    dealer_qualifies,
    house_way,
    house_way_with_step,
    is_lucky_break,
)
from controller.games.registry import DEFAULT_GAME, analyzer_for, make_live_game
from tests.unit.test_live_helpers import drive, pieces

RANKS = range(2, 15)
KING, ACE = 13, 14


def _has_three_in_a_row(ranks: tuple[int, ...]) -> bool:
    """A three-card straight among distinct ranks: consecutive ranks, or A-2-3 (no K-A-2)."""
    present = set(ranks)
    runs = [(r, r + 1, r + 2) for r in range(2, 13)] + [(14, 2, 3)]
    return any(set(run) <= present for run in runs)


def _nothing_hands(*, without: tuple[int, ...]) -> int:
    """Seven-card hands with no pair, no straight, no joker and none of the ranks ``without``."""
    ranks = [rank for rank in RANKS if rank not in without]
    sets = [combo for combo in itertools.combinations(ranks, 7) if not _has_three_in_a_row(combo)]
    return len(sets) * 4**7


def _not_qualifying(qualifier: Qualifier) -> Fraction:
    """The par sheet's own single-hand count of dealers who do not qualify."""
    table = par.full_table()
    missing = 0
    for index in range(len(table)):
        low, high = table.house_way_keys(index)
        if not qualifies(high, low, qualifier):
            missing += int(table.ways[index])
    return Fraction(missing, math.comb(53, 7))


def test_not_qualifying_probability_of_each_reading_matches_the_combinatorics() -> None:
    as_written = Fraction(_nothing_hands(without=(KING, ACE)), math.comb(53, 7))
    needs_king = Fraction(_nothing_hands(without=(KING,)), math.comb(53, 7))
    assert _not_qualifying(Qualifier.K32) == as_written
    assert _not_qualifying(Qualifier.NEEDS_KING) == needs_king
    # The published table's 1.34% (it prints 1.3408%; the exact count is 1.3393%, see
    # docs/rules/break-poker.md), computed here, not copied into the code.
    assert round(float(needs_king) * 100, 2) == 1.34
    assert as_written < needs_king


@pytest.mark.parametrize("qualifier", list(Qualifier))
def test_qualifier_on_the_best_high_hand_fails_the_same_hands(qualifier: Qualifier) -> None:
    """Judging the dealer on the best three cards instead of the house way changes nothing.

    One of the candidates screened for the published edge (docs/rules/break-poker.md): for
    every rank multiset of the full deck, the best high hand of the seven cards qualifies
    exactly when the house-way setting does, under either reading.
    """
    table = par.full_table()
    differ = 0
    for index in range(len(table)):
        ranks = [int(rank) for rank in table.ranks[index]]
        best = max(high_key(*combo) for combo in itertools.combinations(ranks, 3))
        low, high = table.house_way_keys(index)
        if qualifies(best, None, qualifier) != qualifies(high, low, qualifier):
            differ += int(table.ways[index])
    assert differ == 0


def test_qualifier_on_crafted_settings() -> None:
    ace_high = Setting.of("Qs Jd", "Ah 9c 7d")  # A-9-7 high, no king anywhere
    assert dealer_qualifies(ace_high)
    assert dealer_qualifies(ace_high, Qualifier.K32)
    assert not dealer_qualifies(ace_high, Qualifier.NEEDS_KING)
    king_low = Setting.of("Ks Qd", "Ah 9c 7d")  # the king sits in the low hand
    assert dealer_qualifies(king_low, Qualifier.NEEDS_KING)
    king_high = Setting.of("Qs Jd", "Kh 4c 3d")
    assert dealer_qualifies(king_high, Qualifier.NEEDS_KING)
    pair = Setting.of("Qs Jd", "5h 5c 3d")  # a pair qualifies under both readings
    assert dealer_qualifies(pair, Qualifier.NEEDS_KING)
    queen_high = Setting.of("Js 9d", "Qh 8c 7d")
    assert not dealer_qualifies(queen_high, Qualifier.K32)
    assert not dealer_qualifies(queen_high, Qualifier.NEEDS_KING)


def _deck_cards(deck: par.DeckSpec) -> list[Card]:
    result: list[Card] = []
    for rank, copies in deck.copies:
        result.extend([JOKER] if rank == 0 else [Card.of(rank, s) for s in range(copies)])
    return result


def _hand(ranks: tuple[int, ...]) -> list[Card]:
    used: Counter[int] = Counter()
    hand = []
    for rank in ranks:
        hand.append(JOKER if rank == 0 else Card.of(rank, used[rank]))
        used[rank] += 1
    return hand


@pytest.mark.parametrize("qualifier", list(Qualifier))
@pytest.mark.slow
def test_heads_up_not_qualified_counts_match_brute_force(qualifier: Qualifier) -> None:
    """Every deal of a 15-card deck with aces and kings, dealer judged card by card."""
    deck = par.DeckSpec.of(
        {14: 2, 13: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 8: 1, 9: 2, 10: 1, 11: 2, 12: 1}, False
    )
    all_cards = _deck_cards(deck)
    assert len(all_cards) == 15

    @functools.cache
    def not_qualified(ranks: tuple[int, ...]) -> bool:
        seven = _hand(ranks)
        _setting, step = house_way_with_step(seven)
        nothing = step == 7
        holds_king = KING in ranks
        top = max(ranks)
        if qualifier is Qualifier.K32:
            return nothing and top < KING
        return nothing and not holds_king

    total = 0
    missing = 0
    for dealer in itertools.combinations(range(len(all_cards)), 7):
        ranks = tuple(sorted(all_cards[i].rank for i in dealer))
        weight = math.comb(len(all_cards) - 7, 7)  # the player's sevens from the other eight
        total += weight
        missing += weight * not_qualified(ranks)
    counts = par.heads_up_counts(par.judge_multisets(deck), qualifier=qualifier)
    assert counts.total == total
    assert counts.main[par.MainOutcome.NOT_QUALIFIED] == missing > 0


def test_readings_differ_on_a_deck_with_ace_high_dealers() -> None:
    deck = par.DeckSpec.of({14: 2, 13: 1, 2: 1, 3: 1, 5: 1, 6: 1, 8: 1, 9: 2, 11: 2, 12: 2}, False)
    table = par.judge_multisets(deck)
    written = par.heads_up_counts(table, qualifier=Qualifier.K32).main
    king = par.heads_up_counts(table, qualifier=Qualifier.NEEDS_KING).main
    assert king[par.MainOutcome.NOT_QUALIFIED] > written[par.MainOutcome.NOT_QUALIFIED]
    assert sum(king) == sum(written)


def test_published_reading_raises_the_edge_by_the_extra_pushes() -> None:
    """The issue's acceptance, as far as the qualifier explains it (Monte Carlo, same deals).

    Exact figures (``tablectl analyze break-poker``, about a minute each, in
    docs/rules/break-poker.md): 1.5729% as written, 2.4238% under ``needs_king``; the
    published 2.48% is 0.06 points above what the qualifier alone accounts for.
    """
    samples = 400_000
    edges: dict[Qualifier, tuple[float, float, float]] = {}
    for qualifier in Qualifier:
        analyze = analyzer_for("break-poker", {"dealer_qualifier": qualifier.value})
        report = analyze(method=Method.MONTE_CARLO, samples=samples, seed=5, progress=False)
        main = report.bets["main"]
        assert main.rtp_se is not None and main.rtp is not None
        (not_qualified,) = [row for row in main.outcomes if "does not qualify" in row.name]
        assert not_qualified.probability is not None
        edges[qualifier] = (
            1 - float(main.rtp),
            float(main.rtp_se),
            float(not_qualified.probability),
        )
        assert any(f"dealer_qualifier={qualifier.value}" in note for note in report.notes)
    published, published_se, published_nq = edges[Qualifier.NEEDS_KING]
    written, written_se, written_nq = edges[Qualifier.K32]
    assert abs(published - 0.024238) < 4 * published_se
    assert abs(written - 0.015729) < 4 * written_se
    # The same deals: only the extra non-qualifying dealers differ, and they were mostly
    # player wins (an ace-high dealer without a king is weak), so the edge rises by most of
    # their share.
    assert published_nq > written_nq
    assert 0.5 * (published_nq - written_nq) < published - written <= published_nq - written_nq


def test_analyze_refuses_options_the_par_sheet_does_not_read() -> None:
    with pytest.raises(ConfigError, match="does not read option 'setting_seconds'"):
        analyzer_for("break-poker", {"setting_seconds": "3"})
    with pytest.raises(ConfigError, match="dealer_qualifier"):
        analyzer_for("break-poker", {"dealer_qualifier": "aces"})
    with pytest.raises(ConfigError, match="does not read option"):
        analyzer_for(DEFAULT_GAME, {"dealer_qualifier": "k32"})


def test_option_is_validated_like_the_other_options() -> None:
    assert Options().dealer_qualifier is Qualifier.K32
    assert Options.model_validate({"dealer_qualifier": "needs_king"}).dealer_qualifier is (
        Qualifier.NEEDS_KING
    )
    with pytest.raises(ConfigError, match=r"game_options\.dealer_qualifier"):
        make_live_game("break-poker", {"dealer_qualifier": "kings"}, {})


PLAYER = "Qh Jc 9s 8h 6c 4d 3s"
ACE_HIGH_DEALER = "As Qs Td 8d 6h 5c 2c"  # no pair, no straight, no joker, no king


def _play(options: dict[str, Any]) -> dict[str, Any]:
    rnd = make_live_game("break-poker", options, {}).new_round({})
    assert isinstance(rnd, BreakPokerLiveRound)
    drive(rnd, pieces(f"{PLAYER} {ACE_HIGH_DEALER}"), lambda step: {"choice": "close"})
    result = rnd.result()
    assert isinstance(result, dict)
    return result


def test_live_play_qualifies_or_not_by_the_option() -> None:
    dealer = parse_cards(ACE_HIGH_DEALER)
    setting, step = house_way_with_step(dealer)
    assert step == 7 and setting.high_key[1] == ACE and not is_lucky_break(setting)

    written = _play({})
    assert written["details"]["dealer_qualified"] is True
    assert written["details"]["dealer_qualifier"] == "k32"
    (default_main,) = [
        line for line in written["bets"] if line["bet"] == "main" and line.get("default")
    ]
    assert default_main["reason"] != "dealer_not_qualified"
    # The player's Q-high hand loses both to an ace-high dealer who qualifies.
    assert written["winner"] == "dealer"

    published = _play({"dealer_qualifier": "needs_king"})
    assert published["details"]["dealer_qualified"] is False
    assert published["details"]["dealer_qualifier"] == "needs_king"
    by_setting = [line for line in published["bets"] if line["bet"] == "main"]
    assert by_setting and all("setting" in line for line in by_setting)
    assert all(line["reason"] == "dealer_not_qualified" for line in by_setting)
    assert all(line["outcome"] == "push" for line in by_setting)
    assert published["winner"] == "tie"


def test_settling_a_judged_result_keeps_its_qualifier() -> None:
    hands = {"player": parse_cards(PLAYER), "dealer": parse_cards(ACE_HIGH_DEALER)}
    judged = BREAK_POKER.resolve(hands)
    assert judged.details["dealer_qualifier"] == "k32"
    assert BREAK_POKER.settle(judged, DEFAULT_PAYTABLES)["main"].outcome.value == "lose"
    published = dataclasses.replace(
        judged, details={**judged.details, "dealer_qualifier": "needs_king"}
    )
    assert BREAK_POKER.settle(published, DEFAULT_PAYTABLES)["main"].outcome.value == "push"
    assert house_way(hands["dealer"]).id == judged.details["dealer_setting"]["id"]
