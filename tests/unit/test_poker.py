"""Poker evaluators: differential against treys / phevaluator / eval7, worked examples, counts."""

from __future__ import annotations

import functools
import itertools
import random
from math import comb

import eval7
import numpy as np
import pytest
import treys
from hypothesis import given, settings
from hypothesis import strategies as st
from phevaluator import evaluate_cards

from controller.analysis import Method
from controller.cards import Card, parse_cards
from controller.errors import RulesError
from controller.games.poker import evaluator as poker
from controller.games.poker.evaluator import (
    best_five,
    evaluate5,
    evaluate5_batch,
    evaluate7,
    evaluate7_batch,
    hand_strength,
)
from controller.games.poker.hands import NUM_CLASSES, HandCategory, category_of, describe
from controller.games.texas_holdem import par_sheet as holdem

TREYS = treys.Evaluator()
TREYS_CARDS = [treys.Card.new(str(Card(code))) for code in range(52)]
EVAL7_CARDS = [eval7.Card(str(Card(code))) for code in range(52)]
EVAL7_CATEGORY = {
    "High Card": HandCategory.HIGH_CARD,
    "Pair": HandCategory.ONE_PAIR,
    "Two Pair": HandCategory.TWO_PAIR,
    "Trips": HandCategory.THREE_OF_A_KIND,
    "Straight": HandCategory.STRAIGHT,
    "Flush": HandCategory.FLUSH,
    "Full House": HandCategory.FULL_HOUSE,
    "Quads": HandCategory.FOUR_OF_A_KIND,
    "Straight Flush": HandCategory.STRAIGHT_FLUSH,
}


def codes(text: str) -> list[int]:
    return [card.code for card in parse_cards(text)]


def treys_value(hand: list[int]) -> int:
    """Higher is better (treys ranks 1 = best)."""
    cards = [TREYS_CARDS[c] for c in hand]
    return -int(TREYS.evaluate(cards[:2], cards[2:]))


def treys_category(hand: list[int]) -> HandCategory:
    cards = [TREYS_CARDS[c] for c in hand]
    rank_class = TREYS.get_rank_class(TREYS.evaluate(cards[:2], cards[2:]))
    # treys: 0 royal flush, 1 straight flush, 2 quads ... 9 high card
    return HandCategory(9 - max(rank_class, 1))


def phe_value(hand: list[int]) -> int:
    """phevaluator's card ids are ours (rank*4 + suit, c d h s); 1 = best."""
    return -int(evaluate_cards(*hand))


def eval7_category(hand: list[int]) -> HandCategory:
    return EVAL7_CATEGORY[eval7.handtype(eval7.evaluate([EVAL7_CARDS[c] for c in hand]))]


def sign(value: int) -> int:
    return (value > 0) - (value < 0)


def random_hands(rng: random.Random, count: int, size: int) -> list[list[int]]:
    hands = []
    for i in range(count):
        if i % 4 == 0:
            # Suit-heavy hands so flushes and straight flushes are well represented.
            deck = [c for c in range(52) if c % 4 in (0, 1)] if i % 8 == 0 else list(range(52))
            deck = [c for c in deck if c % 4 == 0 or rng.random() < 0.3]
            if len(deck) < size:
                deck = list(range(52))
        elif i % 4 == 1:
            deck = [c for c in range(52) if c // 4 >= 7]  # broadway-heavy: straights, quads
        else:
            deck = list(range(52))
        hands.append(rng.sample(deck, size))
    # Every straight flush (wheel included), padded with random other cards.
    for top in range(3, 13):
        for suit in range(4):
            run = [((rank % 13) * 4 + suit) for rank in range(top - 4, top + 1)]
            rest = [c for c in range(52) if c not in run]
            hands.append(run + rng.sample(rest, size - 5))
    return hands


# ---------------------------------------------------------------------------------------------
# Differential tests.


@pytest.mark.parametrize("size", [5, 7])
def test_order_and_category_match_treys_and_phevaluator(size: int) -> None:
    rng = random.Random(20240 + size)
    hands = random_hands(rng, 3000, size)
    ours = np.array([(evaluate7 if size == 7 else evaluate5)(h) for h in hands])
    theirs_treys = np.array([treys_value(h) for h in hands])
    theirs_phe = np.array([phe_value(h) for h in hands])
    # Same better / worse / tie verdict for every pair of hands.
    ours_cmp = np.sign(ours[:, None] - ours[None, :])
    assert np.array_equal(ours_cmp, np.sign(theirs_treys[:, None] - theirs_treys[None, :]))
    assert np.array_equal(ours_cmp, np.sign(theirs_phe[:, None] - theirs_phe[None, :]))
    for hand, strength in zip(hands, ours.tolist(), strict=True):
        assert category_of(strength) is treys_category(hand), hand
        assert category_of(strength) is eval7_category(hand), hand
    # Every category showed up, so the comparison covered them all.
    assert {category_of(int(s)) for s in ours} == set(HandCategory)


seven_cards = st.lists(st.integers(0, 51), min_size=7, max_size=7, unique=True)


@settings(deadline=None, max_examples=300)
@given(first=seven_cards, second=seven_cards)
def test_pairwise_verdict_matches_references(first: list[int], second: list[int]) -> None:
    verdict = sign(evaluate7(first) - evaluate7(second))
    assert verdict == sign(treys_value(first) - treys_value(second))
    assert verdict == sign(phe_value(first) - phe_value(second))
    five_a, five_b = first[:5], second[:5]
    verdict5 = sign(evaluate5(five_a) - evaluate5(five_b))
    assert verdict5 == sign(phe_value(five_a) - phe_value(five_b))
    assert category_of(evaluate7(first)) is treys_category(first)


@pytest.mark.parametrize("size", [5, 7])
def test_batch_equals_single(size: int) -> None:
    rng = random.Random(size)
    hands = random_hands(rng, 4000, size)
    single = [(evaluate7 if size == 7 else evaluate5)(h) for h in hands]
    batch = (evaluate7_batch if size == 7 else evaluate5_batch)(np.array(hands, dtype=np.int8))
    assert batch.tolist() == single


def test_seven_is_best_of_its_fives() -> None:
    rng = random.Random(7)
    for hand in random_hands(rng, 400, 7):
        best = max(evaluate5(list(c)) for c in itertools.combinations(hand, 5))
        assert evaluate7(hand) == best
        assert hand_strength([Card(c) for c in hand]) == best
        assert evaluate5([c.code for c in best_five([Card(c) for c in hand])]) == best


# ---------------------------------------------------------------------------------------------
# Worked examples of the rule page.


def strength(text: str) -> int:
    return hand_strength(parse_cards(text))


def test_wheel_is_the_lowest_straight() -> None:
    wheel = strength("Ah 2c 3d 4s 5h")
    six_high = strength("2c 3d 4s 5h 6c")
    broadway = strength("Tc Jd Qh Ks Ad")
    assert category_of(wheel) is HandCategory.STRAIGHT
    assert wheel < six_high < broadway
    assert wheel > strength("Ah Ac Ad Kc Qd")  # trips lose to any straight
    assert describe(wheel) == "straight, five high"
    assert [str(c) for c in best_five(parse_cards("Ah 2c 3d 4s 5h"))] == [
        "5h",
        "4s",
        "3d",
        "2c",
        "Ah",
    ]


def test_steel_wheel_is_the_lowest_straight_flush() -> None:
    steel = strength("Ah 2h 3h 4h 5h")
    assert category_of(steel) is HandCategory.STRAIGHT_FLUSH
    assert steel < strength("2h 3h 4h 5h 6h") < strength("Th Jh Qh Kh Ah")
    assert steel > strength("Ac Ad Ah As Kc")
    assert describe(strength("Th Jh Qh Kh Ah")) == "royal flush"


@pytest.mark.parametrize("text", ["Kc Ad 2h 3s 4c", "Qc Kd Ah 2s 3c", "Jc Qd Kh As 2c"])
def test_wrap_around_is_not_a_straight(text: str) -> None:
    assert category_of(strength(text)) is HandCategory.HIGH_CARD


def test_kickers_decide() -> None:
    assert strength("Kc Kd 9h 7s 3c") > strength("Kh Ks 9c 7d 2c")  # third kicker
    assert strength("Ac Ad Kh Ks 3c") > strength("Ah As Kc Kd 2c")  # two pair kicker
    assert strength("7c 7d 7h 7s Ac") > strength("7c 7d 7h 7s Kc")  # quads kicker
    assert strength("Kc Kd Kh 2s 2c") > strength("Qc Qd Qh As Ac")  # trips decide full house
    assert strength("Ah Jh 9h 7h 2h") > strength("Ad Jd 9d 6d 5d")  # flush card by card
    assert strength("9c 9d 4h 4s Ac") > strength("9h 9s 3c 3d Ad")  # lower pair decides


def test_chop_when_the_board_plays() -> None:
    board = "Tc Jd Qh Ks Ad"
    first = strength(f"2c 3d {board}")
    second = strength(f"2h 4s {board}")
    assert first == second
    # Suits never rank.
    assert strength("Ah Kh Qh Jh 9h") == strength("As Ks Qs Js 9s")


def test_describe_and_categories() -> None:
    assert describe(strength("Kc Kd Kh 9s 9c")) == "full house, kings full of nines"
    assert describe(strength("6c 6d 6h 6s 2c")) == "four of a kind, sixes, two kicker"
    assert describe(strength("Kc Kd 9h 9s 3c")) == "two pair, kings and nines, three kicker"
    assert category_of(1) is HandCategory.HIGH_CARD
    assert category_of(NUM_CLASSES) is HandCategory.STRAIGHT_FLUSH
    assert HandCategory.FULL_HOUSE.id == "full_house"
    with pytest.raises(RulesError):
        category_of(0)


def test_bad_hands_are_refused() -> None:
    with pytest.raises(RulesError):
        evaluate7([1, 2, 3])
    with pytest.raises(RulesError):
        evaluate5([0, 1, 2, 3, 99])
    with pytest.raises(RulesError, match="twice"):
        hand_strength(parse_cards("As As Kd Qc 2h"))
    with pytest.raises(RulesError, match="joker"):
        hand_strength([*parse_cards("As Kd Qc 2h"), Card(52)])
    with pytest.raises(RulesError, match="shape"):
        evaluate7_batch(np.zeros((3, 5), dtype=np.int8))
    with pytest.raises(RulesError, match="0-51"):
        evaluate5_batch(np.array([[0, 1, 2, 3, 52]]))
    with pytest.raises(RulesError, match="not 5 distinct"):
        evaluate5_batch(np.array([[0, 0, 0, 0, 0]]))


# ---------------------------------------------------------------------------------------------
# Category counts, against an independent brute-force classifier.


def classify5(hands: np.ndarray) -> np.ndarray:
    """Category of each five-card row, from rank counts, suits and gaps only."""
    ranks = hands // 4
    suits = hands % 4
    counts = (ranks[:, :, None] == np.arange(13)).sum(axis=1)
    ordered = -np.sort(-counts, axis=1)
    top, second = ordered[:, 0], ordered[:, 1]
    flush = (suits == suits[:, :1]).all(axis=1)
    present = counts > 0
    distinct = top == 1
    low, high = ranks.min(axis=1), ranks.max(axis=1)
    wheel = present[:, [12, 0, 1, 2, 3]].all(axis=1)
    straight = distinct & ((high - low == 4) | wheel)
    category = np.full(len(hands), int(HandCategory.HIGH_CARD))
    category[(top == 2) & (second == 1)] = HandCategory.ONE_PAIR
    category[(top == 2) & (second == 2)] = HandCategory.TWO_PAIR
    category[(top == 3) & (second == 1)] = HandCategory.THREE_OF_A_KIND
    category[straight] = HandCategory.STRAIGHT
    category[flush] = HandCategory.FLUSH
    category[(top == 3) & (second == 2)] = HandCategory.FULL_HOUSE
    category[top == 4] = HandCategory.FOUR_OF_A_KIND
    category[straight & flush] = HandCategory.STRAIGHT_FLUSH
    return category


@functools.cache
def all_fives() -> np.ndarray:
    """All C(52,5) hands, built by first card plus every 4-subset above it."""
    fours = np.array(list(itertools.combinations(range(52), 4)), dtype=np.int16)
    parts = []
    for first in range(48):
        rest = fours[fours[:, 0] > first]
        parts.append(np.hstack([np.full((len(rest), 1), first, dtype=np.int16), rest]))
    return np.vstack(parts)


@functools.cache
def all_five_categories() -> np.ndarray:
    return classify5(all_fives())


@pytest.mark.slow
def test_exact_report_matches_brute_force_five_card_counts() -> None:
    hands = all_fives()
    assert len(hands) == comb(52, 5)
    brute = all_five_categories()
    expected = np.bincount(brute, minlength=9).tolist()
    # The evaluator agrees hand by hand, not only in total.
    assert np.array_equal(poker.categories_of(evaluate5_batch(hands)), brute.astype(np.int8))
    report = holdem.analyze(method=Method.EXACT, samples=0, seed=1, progress=False)
    five = report.bets["categories_5"]
    assert [row.name for row in five.outcomes] == [c.id for c in HandCategory]
    assert [row.count for row in five.outcomes] == expected
    assert sum(row.probability for row in five.outcomes) == 1
    assert five.rtp == 1
    seven = report.bets["categories_7"]
    assert sum(row.count or 0 for row in seven.outcomes) == comb(52, 7)
    assert all(row.pays == 0 for row in seven.outcomes)
    assert report.to_json()["bets"]["categories_7"]["rtp_exact"] == "1/1"


def best_category_brute(deck: list[int]) -> np.ndarray:
    """Best-five category of every 7-card hand of ``deck``, by classifying all 21 fives."""
    sevens = np.array(list(itertools.combinations(deck, 7)), dtype=np.int16)
    best = np.zeros(len(sevens), dtype=np.int64)
    for picks in itertools.combinations(range(7), 5):
        best = np.maximum(best, classify5(sevens[:, list(picks)]))
    return best


@pytest.mark.slow
def test_seven_card_categories_on_a_restricted_deck_with_the_wheel() -> None:
    # A 2 3 4 5 6 in all suits: wheels, straights, flushes, straight flushes, quads, boats.
    deck = [c for c in range(52) if c // 4 in (12, 0, 1, 2, 3, 4)]
    sevens = np.array(list(itertools.combinations(deck, 7)), dtype=np.int8)
    ours = poker.categories_of(evaluate7_batch(sevens))
    assert np.array_equal(ours.astype(np.int64), best_category_brute(deck))


@pytest.mark.slow
def test_exact_seven_card_enumeration_on_a_restricted_deck() -> None:
    # The analyser's enumeration (lowest two cards + five above) over the top 24 codes
    # (nines to aces), against brute force with the independent classifier.
    counts = holdem._count_seven(False, lowest=28)
    assert int(counts.sum()) == comb(24, 7)
    ours = holdem._category_counts(counts)
    brute = np.bincount(best_category_brute(list(range(28, 52))), minlength=9).tolist()
    assert ours == brute


def test_monte_carlo_is_seeded_and_close_to_exact() -> None:
    first = holdem.analyze(method=Method.MONTE_CARLO, samples=40_000, seed=3, progress=False)
    again = holdem.analyze(method=Method.MONTE_CARLO, samples=40_000, seed=3, progress=False)
    assert first.to_json()["bets"] == again.to_json()["bets"]
    exact = np.bincount(all_five_categories(), minlength=9) / comb(52, 5)
    estimated = [float(row.probability) for row in first.bets["categories_5"].outcomes]
    for p, q in zip(exact.tolist(), estimated, strict=True):
        se = (p * (1 - p) / 40_000) ** 0.5
        assert abs(p - q) <= 5 * se + 1e-9
