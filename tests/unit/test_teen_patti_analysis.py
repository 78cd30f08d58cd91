"""Teen Patti 20-20 par sheet: the fast counting checked against slow brute force."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter, defaultdict
from fractions import Fraction

import numpy as np
import pytest

from controller.analysis import AnalysisReport, Method
from controller.cards import Card
from controller.errors import RulesError
from controller.games.registry import analyzer_for
from controller.games.teen_patti.par_sheet import (
    analyze,
    count_hand_categories,
    count_main_outcomes,
    count_six_card_bonus,
    six_card_bonus_levels,
)
from controller.games.teen_patti.rules import (
    TEEN_PATTI_20_20,
    SixCardBonus,
    TeenPattiHand,
)
from tests.unit.test_teen_patti import CATEGORY_ORDER, reference_key

BET_IDS = ["player_a", "player_b", "tie", "pair_plus_a", "pair_plus_b", "six_card_bonus"]


def deck_of(ranks: list[int], suits: int) -> list[Card]:
    return [Card.of(rank, suit) for rank in ranks for suit in range(suits)]


# --- three-card hands -----------------------------------------------------------------------


def brute_categories(cards: list[Card]) -> Counter[str]:
    return Counter(
        CATEGORY_ORDER[reference_key(list(combo))[0]] for combo in itertools.combinations(cards, 3)
    )


def test_category_counts_of_all_22100_hands_match_brute_force() -> None:
    counted = count_hand_categories(range(52))
    expected = brute_categories([Card(code) for code in range(52)])
    assert {hand.value: number for hand, number in counted.items()} == {
        name: expected[name] for name in CATEGORY_ORDER
    }
    assert sum(counted.values()) == math.comb(52, 3)


def brute_main(cards: list[Card]) -> tuple[int, int, int]:
    """Every ordered pair of disjoint hands, compared with the independent reading."""
    hands = [
        (frozenset(combo), reference_key(list(combo))) for combo in itertools.combinations(cards, 3)
    ]
    a_wins = ties = b_wins = 0
    for cards_a, key_a in hands:
        for cards_b, key_b in hands:
            if cards_a & cards_b:
                continue
            if key_a > key_b:
                a_wins += 1
            elif key_a == key_b:
                ties += 1
            else:
                b_wins += 1
    return a_wins, ties, b_wins


@pytest.mark.parametrize(
    "cards",
    [
        # Aces, deuces, threes, queens, kings: trails, A-K-Q, A-2-3, flushes, pairs.
        deck_of([14, 2, 3, 12, 13], 4),
        # Uneven: a random 16-card subset of the deck (inclusion-exclusion must not care).
        [Card(code) for code in sorted(random.Random(7).sample(range(52), 16))],
        # Sequences everywhere, three suits.
        deck_of([2, 3, 4, 5, 6], 3),
    ],
    ids=["AKQ32x4", "random16", "23456x3"],
)
def test_main_outcome_counts_match_brute_force_on_small_decks(cards: list[Card]) -> None:
    counted = count_main_outcomes([card.code for card in cards])
    assert (counted.a_wins, counted.ties, counted.b_wins) == brute_main(cards)
    assert counted.total == math.comb(len(cards), 3) * math.comb(len(cards) - 3, 3)


def test_full_deck_main_counts_against_grouped_brute_force_ties() -> None:
    counted = count_main_outcomes(range(52))
    assert counted.total == 22_100 * math.comb(49, 3) == 407_170_400
    # Ties only happen between hands with the same reference key: enumerate those groups.
    groups: dict[tuple[int, tuple[int, ...]], list[frozenset[Card]]] = defaultdict(list)
    for combo in itertools.combinations([Card(code) for code in range(52)], 3):
        groups[reference_key(list(combo))].append(frozenset(combo))
    ties = sum(1 for members in groups.values() for a in members for b in members if not a & b)
    assert counted.ties == ties
    # Ordered deals are symmetric: every (A, B) with A ahead has its mirror (B, A).
    assert counted.a_wins == counted.b_wins == (counted.total - ties) // 2


# --- six cards ------------------------------------------------------------------------------


def brute_five(cards: tuple[Card, ...]) -> str:
    """Standard five-card category, written from the poker rules without the module."""
    ranks = sorted(card.rank for card in cards)
    suited = len({card.code % 4 for card in cards}) == 1
    shape = sorted(Counter(ranks).values())
    straight = len(set(ranks)) == 5 and (ranks[4] - ranks[0] == 4 or ranks == [2, 3, 4, 5, 14])
    if straight and suited:
        return "royal_flush" if ranks[0] == 10 else "straight_flush"
    if shape == [1, 4]:
        return "four_of_a_kind"
    if shape == [2, 3]:
        return "full_house"
    if suited:
        return "flush"
    if straight:
        return "straight"
    if shape == [1, 1, 3]:
        return "three_of_a_kind"
    return "no_bonus"


BONUS_ORDER = [bonus.value for bonus in SixCardBonus]  # high to low


def brute_six(cards: tuple[Card, ...]) -> str:
    found = {brute_five(five) for five in itertools.combinations(cards, 5)}
    return min(found, key=BONUS_ORDER.index)


@pytest.mark.parametrize(
    ("ranks", "suits"),
    [
        ([10, 11, 12, 13, 14], 4),  # royals, quads, full houses, broadway straights
        ([14, 2, 3, 4, 5, 6, 7], 3),  # the wheel, straight flushes, no wrap-around
        ([2, 3, 4, 5, 6, 8, 9, 10], 2),  # plain flushes, six-suited sets
    ],
)
def test_six_card_counts_match_brute_force_on_small_decks(ranks: list[int], suits: int) -> None:
    cards = deck_of(ranks, suits)
    sets = list(itertools.combinations(cards, 6))
    expected = Counter(brute_six(six) for six in sets)
    counted = count_six_card_bonus(ranks, suits)
    assert {bonus.value: n for bonus, n in counted.items() if n} == dict(expected)
    assert sum(counted.values()) == math.comb(len(cards), 6)
    levels = six_card_bonus_levels(np.array([[card.code for card in six] for six in sets]))
    vectorised = Counter(BONUS_ORDER[::-1][level] for level in levels.tolist())
    assert vectorised == expected


@pytest.mark.slow
def test_full_six_card_count_matches_a_vectorised_pass_over_all_sets() -> None:
    """All 20,358,520 sets through the vectorised best-of-five (about 15 s)."""
    four = np.asarray(list(itertools.combinations(range(52), 4)), dtype=np.int64)
    levels = np.zeros(len(SixCardBonus), dtype=np.int64)
    for first, second in itertools.combinations(range(52), 2):
        rest = four[np.searchsorted(four[:, 0], second + 1) :]
        if len(rest) == 0:
            continue
        rows = np.empty((len(rest), 6), dtype=np.int64)
        rows[:, 0], rows[:, 1], rows[:, 2:] = first, second, rest
        levels += np.bincount(six_card_bonus_levels(rows), minlength=len(SixCardBonus))
    counted = count_six_card_bonus(list(range(2, 15)), 4)
    assert {bonus: int(levels[bonus.level]) for bonus in SixCardBonus} == counted
    assert int(levels.sum()) == math.comb(52, 6)


# --- the report -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exact() -> AnalysisReport:
    return analyze(method=Method.EXACT, samples=0, seed=0, progress=False)


def test_exact_report_is_consistent(exact: AnalysisReport) -> None:
    assert exact.game == "teen-patti-20-20"
    assert list(exact.bets) == BET_IDS
    tables = TEEN_PATTI_20_20.default_paytables
    for bet_id, bet in exact.bets.items():
        assert sum(row.probability for row in bet.outcomes) == 1
        total = sum(row.count or 0 for row in bet.outcomes)
        assert total == (20_358_520 if bet_id == "six_card_bonus" else 407_170_400)
        for row in bet.outcomes:
            assert row.probability == Fraction(row.count or 0, total)
            if row.name in tables[bet_id]:
                assert row.pays == tables[bet_id][row.name]
            else:  # a push on the player bets, a loss otherwise
                assert row.pays == (0 if row.name == "tie" else -1)
        assert bet.rtp == sum(row.probability * (1 + row.pays) for row in bet.outcomes)
    main = count_main_outcomes(range(52))
    player_a = {row.name: row.count for row in exact.bets["player_a"].outcomes}
    assert player_a == {"win": main.a_wins, "tie": main.ties, "lose": main.b_wins}
    assert exact.bets["player_a"].rtp == exact.bets["player_b"].rtp
    # Player A returns 1.95 on a win and the stake on a tie.
    p_tie = Fraction(main.ties, main.total)
    assert exact.bets["player_a"].rtp == (1 - p_tie) / 2 * Fraction(39, 20) + p_tie
    assert exact.bets["tie"].rtp == p_tie * 51
    categories = count_hand_categories(range(52))
    pair_plus = {row.name: row.count for row in exact.bets["pair_plus_a"].outcomes}
    assert pair_plus == {hand.value: n * math.comb(49, 3) for hand, n in categories.items()}
    assert [row.name for row in exact.bets["pair_plus_b"].outcomes] == [
        hand.value for hand in TeenPattiHand
    ]
    bonus = {row.name: row.count for row in exact.bets["six_card_bonus"].outcomes}
    counted = count_six_card_bonus(list(range(2, 15)), 4)
    assert bonus == {outcome.value: n for outcome, n in counted.items()}
    document = json.loads(exact.dumps())
    assert document["method"] == "exact"
    assert list(document["bets"]) == BET_IDS
    assert "rtp_exact" in document["bets"]["tie"]
    assert "player_a" in exact.to_text()


def test_monte_carlo_agrees_with_exact_and_is_repeatable(exact: AnalysisReport) -> None:
    first = analyze(method=Method.MONTE_CARLO, samples=200_000, seed=11, progress=False)
    again = analyze(method=Method.MONTE_CARLO, samples=200_000, seed=11, progress=False)
    assert first.samples == 200_000
    assert list(first.bets) == BET_IDS
    for bet_id, bet in first.bets.items():
        assert bet.rtp_se is not None
        assert bet.rtp_se > 0
        assert abs(sum(float(row.probability) for row in bet.outcomes) - 1) < 1e-9
        assert abs(float(bet.rtp or 0) - float(exact.bets[bet_id].rtp or 0)) < 5 * bet.rtp_se
        assert [row.probability for row in bet.outcomes] == [
            row.probability for row in again.bets[bet_id].outcomes
        ]
    assert json.loads(first.dumps())["bets"]["player_a"]["rtp_se"] > 0


def test_analyze_dispatch_and_errors() -> None:
    assert analyzer_for("teen-patti-20-20") is analyze
    with pytest.raises(RulesError):
        analyze(method=Method.MONTE_CARLO, samples=1, seed=0, progress=False)
