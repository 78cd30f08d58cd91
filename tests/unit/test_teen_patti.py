"""Teen Patti 20-20: hand ranking, 6 Card Bonus, resolve and settle."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cards import JOKER, Card, Tile, parse_cards
from controller.errors import PayTableError, RulesError
from controller.games.base import TableGame
from controller.games.teen_patti.par_sheet import (
    six_card_bonus_levels,
)
from controller.games.teen_patti.rules import (
    TEEN_PATTI_20_20,
    SixCardBonus,
    TeenPattiHand,
    category_of_strength,
    describe_hand,
    hand_category,
    rank_hand,
    six_card_bonus,
)
from controller.money import BetOutcome, merge_paytables

# --- an independent reading of the rule page, written without the module's encoding ------

# Sequences, high to low, exactly as the sheet lists them.
SEQUENCES = [("A", "K", "Q"), ("A", "2", "3")] + [
    tuple("AKQJT98765432"[i : i + 3]) for i in range(1, 11)
]
ORDER = "23456789TJQKA"
CATEGORY_ORDER = [  # low to high
    "high_card",
    "pair",
    "flush",
    "straight",
    "straight_flush",
    "trail",
    "trail_of_aces",
]


def rank_chars(cards: list[Card]) -> list[str]:
    return [str(card)[0] for card in cards]


def reference_key(cards: list[Card]) -> tuple[int, tuple[int, ...]]:
    """(category index, tie-break) straight from the sheet; bigger is better."""
    chars = rank_chars(cards)
    values = sorted((ORDER.index(ch) for ch in chars), reverse=True)
    suited = len({str(card)[1] for card in cards}) == 1
    sequence = next(
        (pos for pos, seq in enumerate(SEQUENCES) if sorted(seq) == sorted(chars)), None
    )
    if len(set(chars)) == 1:
        name = "trail_of_aces" if chars[0] == "A" else "trail"
        return CATEGORY_ORDER.index(name), (values[0],)
    if sequence is not None:
        name = "straight_flush" if suited else "straight"
        return CATEGORY_ORDER.index(name), (-sequence,)
    if suited:
        return CATEGORY_ORDER.index("flush"), tuple(values)
    if len(set(values)) == 2:
        pair = max(set(values), key=values.count)
        kicker = min(set(values), key=values.count)
        return CATEGORY_ORDER.index("pair"), (pair, kicker)
    return CATEGORY_ORDER.index("high_card"), tuple(values)


def hand(text: str) -> list[Card]:
    return parse_cards(text)


ALL_CARDS = [Card(code) for code in range(52)]
three_cards = st.lists(st.sampled_from(ALL_CARDS), min_size=3, max_size=3, unique=True)
six_cards = st.lists(st.sampled_from(ALL_CARDS), min_size=6, max_size=6, unique=True)


# --- worked examples ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("better", "worse"),
    [
        ("Kc Kd Kh", "Qc Qd Qs"),  # higher trail
        ("Ac Ad Ah", "Kc Kd Kh"),  # trail of aces above other trails
        ("2c 2d 2h", "Ah Kh Qh"),  # any trail above the best straight flush
        ("Kc Kd Qh", "Ks Kh 9c"),  # same pair, the third card decides
        ("Qc Jd Th", "Tc 9d 8h"),  # higher sequence
        ("Ac Kd Qh", "Ac 2d 3h"),  # A-K-Q is the highest sequence
        ("As 2d 3h", "Kc Qd Jh"),  # A-2-3 is the second-highest
        ("Kc Qd Jh", "Qc Jd Th"),
        ("4c 3d 2h", "Ac Kd Jh"),  # the lowest straight above an ace-high hand
        ("Qh Jh Th", "Qc Jd Th"),  # straight flush vs straight of the same ranks
        ("As 2s 3s", "Kh Qh Jh"),  # A-2-3 also second among straight flushes
        ("2c 3c 4c", "Ad Kd Qh"),  # any straight flush above any straight
        ("4c 3d 2h", "Ah Kh Jh"),  # any straight above any flush
        ("Ac Kd Qd", "Ah Kh Jh"),  # the A-K-Q straight beats the A-K-J flush
        ("2h 3h 5h", "Ac Ad Kh"),  # any flush above any pair
        ("2c 2d 3h", "Ac Kd Jh"),  # any pair above any high card
        ("Ac Kd 9h", "Ac Qd Jh"),  # high card: second card decides
        ("Ac Kd 9h", "As Kh 8c"),  # high card: third card decides
        ("Ah Th 4h", "Ac 9c 8c"),  # flush: second card decides
        ("Ac Ad 2h", "Kc Kd Ah"),  # higher pair beats better kicker
        ("Ac 2d 4h", "Kc Qd Th"),  # A-2-4 is not a sequence: ace high
    ],
)
def test_worked_examples(better: str, worse: str) -> None:
    assert rank_hand(hand(better)) > rank_hand(hand(worse))


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("Kc Kd 9h", "Ks Kh 9c"),  # suits never decide
        ("Ac 2d 3h", "As 2h 3c"),
        ("Ah Kh Qh", "As Ks Qs"),
        ("Ac Td 4h", "As Th 4c"),
        ("5c 5d 5h", "5s 5d 5c"),
        ("9c 7c 2c", "9h 7h 2h"),
    ],
)
def test_ties(left: str, right: str) -> None:
    assert rank_hand(hand(left)) == rank_hand(hand(right))


@pytest.mark.parametrize(
    ("cards", "category", "description"),
    [
        ("Ac Ad As", TeenPattiHand.TRAIL_OF_ACES, "trail of aces"),
        ("6c 6d 6s", TeenPattiHand.TRAIL, "trail of sixes"),
        ("Qh Kh Ah", TeenPattiHand.STRAIGHT_FLUSH, "straight flush, ace-king-queen"),
        ("3d Ad 2d", TeenPattiHand.STRAIGHT_FLUSH, "straight flush, ace-two-three"),
        ("Tc Jd 9h", TeenPattiHand.STRAIGHT, "straight, jack-ten-nine"),
        ("2c 4c 9c", TeenPattiHand.FLUSH, "flush, nine, four, two"),
        ("Kc Qd Kh", TeenPattiHand.PAIR, "pair of kings, queen kicker"),
        ("2c Ad 2h", TeenPattiHand.PAIR, "pair of twos, ace kicker"),
        ("Ac Td 4h", TeenPattiHand.HIGH_CARD, "ace high, ten, four"),
        ("Qc Kd 2h", TeenPattiHand.HIGH_CARD, "king high, queen, two"),
        ("Kc Ad 2h", TeenPattiHand.HIGH_CARD, "ace high, king, two"),  # no wrap-around
        ("3c 2d Ah", TeenPattiHand.STRAIGHT, "straight, ace-two-three"),
    ],
)
def test_categories_and_descriptions(cards: str, category: TeenPattiHand, description: str) -> None:
    assert hand_category(hand(cards)) is category
    assert category_of_strength(rank_hand(hand(cards))) is category
    assert describe_hand(hand(cards)) == description


def test_category_levels_follow_the_sheet() -> None:
    levels = [category.level for category in TeenPattiHand]
    assert levels == sorted(levels, reverse=True)
    assert [category.value for category in TeenPattiHand] == CATEGORY_ORDER[::-1]
    with pytest.raises(RulesError):
        TeenPattiHand.from_level(7)


@pytest.mark.parametrize(
    "cards",
    [["Ac", "Kd"], ["Ac", "Kd", "Qh", "Js"], ["Ac", "Ac", "Kd"]],
)
def test_rank_hand_refuses_bad_hands(cards: list[str]) -> None:
    with pytest.raises(RulesError) as caught:
        rank_hand(hand(" ".join(cards)))
    assert caught.value.context


def test_rank_hand_refuses_joker_and_tiles() -> None:
    with pytest.raises(RulesError, match="joker"):
        rank_hand([JOKER, Card.parse("Ac"), Card.parse("Kd")])
    with pytest.raises(RulesError, match="not a playing card"):
        rank_hand([Tile(1), Card.parse("Ac"), Card.parse("Kd")])


# --- the whole ranking against the independent reading --------------------------------------


def test_ranking_matches_reference_over_all_22100_hands() -> None:
    hands = [list(combo) for combo in itertools.combinations(ALL_CARDS, 3)]
    keyed = sorted((reference_key(h), rank_hand(h)) for h in hands)
    assert len(keyed) == 22_100
    for (key_low, strength_low), (key_high, strength_high) in itertools.pairwise(keyed):
        if key_low == key_high:
            assert strength_low == strength_high, (key_low, key_high)
        else:
            assert strength_low < strength_high, (key_low, key_high)


@settings(deadline=None, max_examples=300)
@given(three_cards, three_cards)
def test_ranking_is_consistent_with_categories_and_sheet(
    left: list[Card], right: list[Card]
) -> None:
    strength_left, strength_right = rank_hand(left), rank_hand(right)
    key_left, key_right = reference_key(left), reference_key(right)
    assert (strength_left > strength_right) == (key_left > key_right)
    assert (strength_left == strength_right) == (key_left == key_right)
    level_left = hand_category(left).level
    level_right = hand_category(right).level
    if level_left != level_right:
        assert (level_left > level_right) == (strength_left > strength_right)
    assert level_left == key_left[0]


@settings(deadline=None, max_examples=200)
@given(three_cards, st.permutations(range(4)))
def test_rank_is_invariant_under_suit_permutation(cards: list[Card], suit_map: list[int]) -> None:
    mapped = [Card.of(card.rank, suit_map[card.code % 4]) for card in cards]
    assert rank_hand(mapped) == rank_hand(cards)
    assert rank_hand(list(reversed(cards))) == rank_hand(cards)


# --- 6 Card Bonus ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cards", "category", "best"),
    [
        ("Ah Kh Qh Jh Th 2c", SixCardBonus.ROYAL_FLUSH, "Ah Kh Qh Jh Th"),
        ("9h Kh Qh Jh Th Ah", SixCardBonus.ROYAL_FLUSH, "Ah Kh Qh Jh Th"),
        ("9s Ks Qs Js Ts 9d", SixCardBonus.STRAIGHT_FLUSH, "9s Ks Qs Js Ts"),
        ("As 2s 3s 4s 5s Kd", SixCardBonus.STRAIGHT_FLUSH, "As 2s 3s 4s 5s"),
        ("7c 7d 7h 7s 2c 2d", SixCardBonus.FOUR_OF_A_KIND, "7c 7d 7h 7s 2c"),
        ("7c 7d 7h 2s 2c 2d", SixCardBonus.FULL_HOUSE, "7c 7d 7h 2s 2c"),
        ("7c 7d 7h 2s 2c 9d", SixCardBonus.FULL_HOUSE, "7c 7d 7h 2s 2c"),
        ("Ac 9c 7c 5c 3c Kd", SixCardBonus.FLUSH, "Ac 9c 7c 5c 3c"),
        ("Ac 9c 7c 5c 3c 2c", SixCardBonus.FLUSH, "Ac 9c 7c 5c 3c"),
        ("Ac 2d 3h 4s 5c Kd", SixCardBonus.STRAIGHT, "Ac 2d 3h 4s 5c"),  # the wheel
        ("Ac 2d 3h 4s 5c 6d", SixCardBonus.STRAIGHT, "2d 3h 4s 5c 6d"),
        ("Ac Kd Qh Js Tc Td", SixCardBonus.STRAIGHT, None),
        ("9c 9d 9h As 4c 2d", SixCardBonus.THREE_OF_A_KIND, "9c 9d 9h As 4c"),
        ("Qc Kd Ah 2s 3c 9d", SixCardBonus.NO_BONUS, None),  # no wrap-around Q-K-A-2-3
        ("Qc Qd Ah As 3c 3d", SixCardBonus.NO_BONUS, None),  # three pairs
        ("Ac Kc Qc Jc 9d 2h", SixCardBonus.NO_BONUS, None),  # four to a flush
    ],
)
def test_six_card_bonus_examples(cards: str, category: SixCardBonus, best: str | None) -> None:
    result = six_card_bonus(hand(cards))
    assert result.category is category
    if best is not None:
        assert set(result.best_five) == set(hand(best))
    assert len(result.best_five) == 5
    assert set(result.best_five) <= set(hand(cards))
    level = six_card_bonus_levels(np.array([[card.code for card in hand(cards)]]))
    assert int(level[0]) == category.level


def test_six_card_bonus_refuses_bad_input() -> None:
    with pytest.raises(RulesError, match="6 cards"):
        six_card_bonus(hand("Ac Kd Qh"))
    with pytest.raises(RulesError, match="repeat"):
        six_card_bonus(hand("Ac Kd Qh Ac 2d 3h"))
    with pytest.raises(RulesError, match="not a standard card"):
        six_card_bonus([JOKER, *hand("Kd Qh Jc 2d 3h")])


@settings(deadline=None, max_examples=300)
@given(six_cards)
def test_vectorised_bonus_agrees_with_best_of_five(cards: list[Card]) -> None:
    result = six_card_bonus(cards)
    levels = six_card_bonus_levels(np.array([[card.code for card in cards]]))
    assert int(levels[0]) == result.category.level


# --- the game -------------------------------------------------------------------------------


def test_game_shape() -> None:
    game: TableGame = TEEN_PATTI_20_20
    assert game.id == "teen-patti-20-20"
    assert len(game.deck) == 52
    assert JOKER not in game.deck
    assert [slot.name for slot in game.deal_plan.slots] == ["A1", "B1", "A2", "B2", "A3", "B3"]
    assert all(slot.face == "up" for slot in game.deal_plan.slots)
    assert game.deal_plan.hands == ("A", "B")
    assert game.bet_ids == (
        "player_a",
        "player_b",
        "tie",
        "pair_plus_a",
        "pair_plus_b",
        "six_card_bonus",
    )
    tables = game.default_paytables
    assert list(tables) == list(game.bet_ids)
    assert tables["player_a"] == {"win": Fraction(19, 20)}
    assert tables["tie"] == {"tie": Fraction(50)}
    assert tables["pair_plus_b"]["trail_of_aces"] == 50
    assert tables["pair_plus_b"]["pair"] == 1
    assert tables["six_card_bonus"]["royal_flush"] == 1000
    assert tables["six_card_bonus"]["three_of_a_kind"] == 7


def deal(a: str, b: str) -> dict[str, list[Card]]:
    return {"A": hand(a), "B": hand(b)}


def test_resolve_and_settle_a_wins_with_side_bets() -> None:
    result = TEEN_PATTI_20_20.resolve(deal("Kc Kd Kh", "Qc Qd Qs"))
    assert result.winner == "A"
    assert result.hands["A"].category == "trail"
    assert result.hands["A"].description == "trail of kings"
    assert result.details["six_card_bonus"]["category"] == "full_house"
    assert sorted(result.details["six_card_bonus"]["best_five"])[:3] == ["Kc", "Kd", "Kh"]
    settled = TEEN_PATTI_20_20.settle(result, TEEN_PATTI_20_20.default_paytables)
    assert list(settled) == list(TEEN_PATTI_20_20.bet_ids)
    assert settled["player_a"].outcome is BetOutcome.WIN
    assert settled["player_a"].payout == Fraction(39, 20)
    assert settled["player_b"].outcome is BetOutcome.LOSE
    assert settled["tie"].outcome is BetOutcome.LOSE
    assert settled["pair_plus_a"].odds == 40
    assert settled["pair_plus_a"].reason == "trail"
    assert settled["pair_plus_b"].odds == 40  # pays whatever the main result
    assert settled["six_card_bonus"].odds == 20
    assert settled["six_card_bonus"].reason == "full_house"


def test_resolve_and_settle_tie() -> None:
    result = TEEN_PATTI_20_20.resolve(deal("Ac Td 4h", "As Th 4c"))
    assert result.winner == "tie"
    settled = TEEN_PATTI_20_20.settle(result, TEEN_PATTI_20_20.default_paytables)
    for bet in ("player_a", "player_b"):
        assert settled[bet].outcome is BetOutcome.PUSH
        assert settled[bet].reason == "tie"
        assert settled[bet].payout == 1
    assert settled["tie"].outcome is BetOutcome.WIN
    assert settled["tie"].payout == 51
    assert settled["pair_plus_a"].outcome is BetOutcome.LOSE
    assert settled["pair_plus_a"].reason == "high_card"
    assert settled["six_card_bonus"].outcome is BetOutcome.LOSE
    assert settled["six_card_bonus"].reason == "no_bonus"


def test_straight_flush_beats_straight_of_same_ranks_in_a_round() -> None:
    result = TEEN_PATTI_20_20.resolve(deal("Qc Jd Ts", "Qh Jh Th"))
    assert result.winner == "B"
    settled = TEEN_PATTI_20_20.settle(result, TEEN_PATTI_20_20.default_paytables)
    assert settled["player_b"].outcome is BetOutcome.WIN
    assert settled["pair_plus_a"].odds == 6
    assert settled["pair_plus_b"].odds == 30
    assert result.details["six_card_bonus"]["category"] == "no_bonus"


def test_settle_uses_overridden_paytables() -> None:
    tables = merge_paytables(
        TEEN_PATTI_20_20.default_paytables,
        {"player_a": {"win": "0.98:1"}, "six_card_bonus": {"straight": "12:1"}},
    )
    result = TEEN_PATTI_20_20.resolve(deal("Ac 2d 3h", "4s 5c Kd"))
    settled = TEEN_PATTI_20_20.settle(result, tables)
    assert result.winner == "A"
    assert settled["player_a"].odds == Fraction(49, 50)
    assert settled["six_card_bonus"].reason == "straight"
    assert settled["six_card_bonus"].odds == 12
    with pytest.raises(PayTableError):
        merge_paytables(TEEN_PATTI_20_20.default_paytables, {"pair_plus_a": {"quads": 5}})


def test_settle_refuses_incomplete_paytables() -> None:
    result = TEEN_PATTI_20_20.resolve(deal("Ac Ad 3h", "4s 5c Kd"))
    tables = dict(TEEN_PATTI_20_20.default_paytables)
    tables["pair_plus_a"] = {"trail": Fraction(40)}
    with pytest.raises(RulesError) as caught:
        TEEN_PATTI_20_20.settle(result, tables)
    assert caught.value.context["bet"] == "pair_plus_a"
    assert caught.value.context["outcome"] == "pair"


@pytest.mark.parametrize(
    ("hands", "fragment"),
    [
        ({"A": "Ac Kd", "B": "2c 3d 4h"}, "exactly 3 cards"),
        ({"A": "Ac Kd Qh", "B": "2c 3d 4h 5s"}, "exactly 3 cards"),
        ({"A": "Ac Kd Qh", "B": "Ac 3d 4h"}, "both hands"),
        ({"A": "Ac Kd Kd", "B": "2c 3d 4h"}, "twice"),
        ({"A": "Ac Kd Qh"}, "hands A and B"),
        ({"A": "Ac Kd Qh", "B": "2c 3d 4h", "C": "5c 6d 7h"}, "hands A and B"),
        ({"A": "Ac Kd JK", "B": "2c 3d 4h"}, "joker"),
    ],
)
def test_resolve_refuses_bad_deals(hands: dict[str, str], fragment: str) -> None:
    with pytest.raises(RulesError, match=fragment) as caught:
        TEEN_PATTI_20_20.resolve({label: hand(text) for label, text in hands.items()})
    assert caught.value.context


def test_resolve_refuses_a_tile_and_names_the_hand() -> None:
    with pytest.raises(RulesError) as caught:
        TEEN_PATTI_20_20.resolve({"A": hand("Ac Kd Qh"), "B": [*hand("2c 3d"), Tile(4)]})
    assert caught.value.context["hand"] == "B"
    assert caught.value.context["piece"] == "4p"


SWAPPED = {
    "player_a": "player_b",
    "player_b": "player_a",
    "tie": "tie",
    "pair_plus_a": "pair_plus_b",
    "pair_plus_b": "pair_plus_a",
    "six_card_bonus": "six_card_bonus",
}


@settings(deadline=None, max_examples=300)
@given(six_cards)
def test_settlement_is_symmetric_between_a_and_b(cards: list[Card]) -> None:
    a, b = cards[:3], cards[3:]
    tables = TEEN_PATTI_20_20.default_paytables
    straight = TEEN_PATTI_20_20.settle(TEEN_PATTI_20_20.resolve({"A": a, "B": b}), tables)
    swapped = TEEN_PATTI_20_20.settle(TEEN_PATTI_20_20.resolve({"A": b, "B": a}), tables)
    for bet, mirror in SWAPPED.items():
        assert straight[bet] == swapped[mirror]
    # And the settlement follows the independent reading.
    key_a, key_b = reference_key(a), reference_key(b)
    expected = "win" if key_a > key_b else ("tie" if key_a == key_b else "lose")
    assert straight["player_a"].reason == expected
    assert (straight["tie"].outcome is BetOutcome.WIN) == (key_a == key_b)
