"""Break Poker rules and par sheet (controller.games.break_poker.rules)."""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections import Counter
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.analysis import Method
from controller.cards import JOKER, Card, Deck, Tile, parse_cards
from controller.errors import IllegalAction, RulesError
from controller.games.base import Face
from controller.games.break_poker import par_sheet as par
from controller.games.break_poker.hands import (
    BreakBonusHand,
    high_key,
    house_way_step,
    low_key,
    qualifies,
)
from controller.games.break_poker.rules import (
    BREAK_POKER,
    DEAL_PLAN,
    DEFAULT_PAYTABLES,
    Setting,
    best_lucky_break,
    check_setting,
    dealer_qualifies,
    high_hand_key,
    house_way,
    house_way_with_step,
    is_lucky_break,
    legal_settings,
    low_hand_key,
    main_bet,
    round_result,
    setting_outranks,
)
from controller.money import BetOutcome

RANK_OF = {r: i + 2 for i, r in enumerate("23456789TJQKA")}


def cards(text: str) -> list[Card]:
    return parse_cards(text)


def hi(text: str) -> tuple[int, ...]:
    return high_hand_key(cards(text))


def lo(text: str) -> tuple[int, ...]:
    return low_hand_key(cards(text))


def ranks_of(hand: tuple[Card, ...] | list[Card]) -> list[int]:
    return sorted((card.rank for card in hand), reverse=True)


# --------------------------------------------------------------------------------------------
# Worked examples: hand strengths


def test_pair_with_higher_rank_beats_lower_pair_whatever_the_kicker() -> None:
    assert hi("As Ad 2c") > hi("Ks Kd Qc")


def test_low_ace_three_beats_king_queen() -> None:
    assert lo("As 3d") > lo("Ks Qd")


def test_q_k_a_is_the_highest_straight_and_a_2_3_the_lowest() -> None:
    straights = [hi("Qs Kd Ac"), hi("Js Qd Kc"), hi("2s 3d 4c"), hi("As 2d 3c")]
    assert straights == sorted(straights, reverse=True)
    assert all(key[0] == 2 for key in straights)
    every_straight = [hi(f"{a}s {b}d {c}c") for a, b, c in _straight_texts()]
    assert max(every_straight) == hi("Qs Kd Ac")
    assert min(every_straight) == hi("As 2d 3c")
    assert hi("As 2d 3c") > hi("As Ad Kc")  # the lowest straight beats the best pair
    assert hi("2s 2d 2c") > hi("Qs Kd Ac")  # the lowest trips beat the best straight
    assert hi("Ks As 2d")[0] == 0  # no wrap-around


def _straight_texts() -> list[tuple[str, str, str]]:
    order = "A23456789TJQKA"
    return [(order[i], order[i + 1], order[i + 2]) for i in range(12)]


def test_three_card_order_of_categories() -> None:
    assert hi("As As As"[:2] + " Ad Ah") > hi("2s 2d 2h")
    assert hi("2s 2d 2h") > hi("Qs Kd Ac") > hi("As Ad Kh") > hi("2s 2d 3h") > hi("As Kd Jh")
    assert hi("As Kd Jh") > hi("5s 3d 2h")
    assert hi("As Ad Kc") > hi("As Ad Qc")


def test_two_card_order() -> None:
    assert lo("As Ad") > lo("2s 2d") > lo("As Kd") > lo("3s 2d")


def test_joker_is_an_ace_in_a_two_card_hand() -> None:
    assert lo("JK Kd") == lo("As Kd")
    assert lo("JK Ad") == lo("As Ad")
    assert lo("JK 2d") == lo("Ac 2d")


def test_joker_completes_three_of_a_kind_and_straights() -> None:
    assert hi("JK 5s 5d") == hi("5c 5s 5d")
    assert hi("JK 5s 7d") == hi("5c 6s 7d")
    assert hi("JK 5s 6d") == hi("5c 6s 7d")  # the higher completion
    assert hi("JK Qs Kd") == hi("Qc Ks Ad")
    assert hi("JK As Kd") == hi("Qc Ks Ad")
    assert hi("JK As 2d") == hi("Ac 2s 3d")
    assert hi("JK As 3d") == hi("Ac 2s 3d")
    assert hi("JK Js Qd") == hi("Jc Qs Kd")
    assert hi("JK As Ad") == hi("Ac As Ad")


def test_joker_is_an_ace_when_it_completes_nothing() -> None:
    assert hi("JK 9s 4d") == hi("Ac 9s 4d")
    assert hi("JK As 7d") == hi("Ac As 7d")  # pair of aces


# --------------------------------------------------------------------------------------------
# Hand orders: total, and tell every different hand apart


def _all_rank_multisets(size: int) -> list[tuple[int, ...]]:
    return list(itertools.combinations_with_replacement(range(2, 15), size))


def test_three_card_order_is_total_and_separates_every_rank_multiset() -> None:
    multisets = [m for m in _all_rank_multisets(3)]
    keys = {m: high_key(*m) for m in multisets}
    assert len(set(keys.values())) == len(multisets) == math.comb(15, 3)
    # Independent check of the order: sort with an obvious comparator built from the page.
    ordered = sorted(multisets, key=functools.cmp_to_key(_obvious_high_compare))
    assert [keys[m] for m in ordered] == sorted(keys.values())


def _obvious_high_compare(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    def describe(ranks: tuple[int, ...]) -> tuple[int, list[int]]:
        counts = Counter(ranks)
        by_count = sorted(ranks, key=lambda r: (counts[r], r), reverse=True)
        distinct = sorted(set(ranks))
        if len(distinct) == 1:
            return 3, by_count
        if len(distinct) == 3 and distinct[2] - distinct[0] == 2:
            return 2, [distinct[2]]
        if distinct == [2, 3, 14]:
            return 2, [3]
        if len(distinct) == 2:
            return 1, by_count
        return 0, by_count

    da, db = describe(a), describe(b)
    return (da > db) - (da < db)


def test_two_card_order_is_total_and_separates_every_rank_multiset() -> None:
    multisets = _all_rank_multisets(2)
    keys = [low_key(*m) for m in multisets]
    assert len(set(keys)) == len(multisets) == math.comb(14, 2)
    pairs = sorted((k for k in keys if k[0] == 1), reverse=True)
    assert pairs[0] == low_key(14, 14)
    assert pairs[-1] == low_key(2, 2)
    assert min(k for k in keys if k[0] == 1) > max(k for k in keys if k[0] == 0)


card_codes = st.integers(min_value=0, max_value=52)
triples = st.lists(card_codes, min_size=3, max_size=3, unique=True)


@settings(deadline=None, max_examples=150)
@given(st.lists(triples, min_size=3, max_size=3))
def test_three_card_comparison_is_a_total_preorder(hands: list[list[int]]) -> None:
    a, b, c = (high_hand_key([Card(code) for code in hand]) for hand in hands)
    assert (a < b) + (a == b) + (a > b) == 1
    if a <= b <= c:
        assert a <= c
    if a == b:
        assert not a < b
        assert not b < a


# --------------------------------------------------------------------------------------------
# Settings


def test_low_may_not_outrank_high() -> None:
    seven = cards("As Ad Kc Qh 7s 5d 2c")
    ids = {setting.id for setting in legal_settings(seven)}
    assert Setting.of("As Ad", "Kc Qh 7s").id not in ids  # pair low, high card high
    assert Setting.of("Kc Qh", "As Ad 7s").id in ids
    assert Setting.of("As Kc", "Ad Qh 7s").id not in ids  # A-K low vs A-Q-7 high
    assert Setting.of("As 7s", "Ad Kc 2c").id in ids  # A-7 vs A-K-2: fine


def test_equal_low_and_high_is_allowed() -> None:
    seven = cards("As Ad Ac Ah Kd 5c 2c")
    ids = {setting.id for setting in legal_settings(seven)}
    assert Setting.of("As Ad", "Ac Ah Kd").id in ids  # pair of aces both: equal, allowed
    seven = cards("As Kd 9c Ah Kc 5c 2c")
    ids = {setting.id for setting in legal_settings(seven)}
    assert Setting.of("As Kd", "Ah Kc 5c").id in ids  # A-K low vs A-K-5: equal so far
    assert Setting.of("JK 5c", "Ah 9c 2c", "").low == (JOKER, Card.parse("5c"))


def test_legal_settings_ids_are_unique_and_every_split_counted() -> None:
    seven = cards("9s 8d 7c 5h 4s 3d 2c")
    settings_ = legal_settings(seven)
    assert len({s.id for s in settings_}) == len(settings_)
    illegal = [
        s
        for s in (
            Setting.of(low, high)
            for high in itertools.combinations(seven, 3)
            for low in itertools.combinations([c for c in seven if c not in high], 2)
        )
        if setting_outranks(s)
    ]
    assert len(settings_) + len(illegal) == 210


@settings(deadline=None, max_examples=60)
@given(st.lists(card_codes, min_size=7, max_size=7, unique=True))
def test_house_way_is_legal_and_no_legal_setting_outranks(codes: list[int]) -> None:
    seven = [Card(code) for code in codes]
    legal = legal_settings(seven)
    assert all(not setting_outranks(setting) for setting in legal)
    everything = [
        Setting.of(low, high)
        for high in itertools.combinations(seven, 3)
        for low in itertools.combinations([c for c in seven if c not in high], 2)
    ]
    assert {s.id for s in legal} == {
        s.id for s in everything if not _obviously_outranks(s.low, s.high_key)
    }
    chosen = house_way(seven)
    assert chosen.id in {setting.id for setting in legal}
    assert set(chosen.low + chosen.high + chosen.discards) == set(seven)


def _obviously_outranks(low: tuple[Card, ...], high: tuple[int, ...]) -> bool:
    """The Decisions' "outrank" rule written out: category, pair rank, cards in order."""
    a, b = sorted((card.rank or 14 for card in low), reverse=True)
    low_category = 1 if a == b else 0
    high_category = {3: 2, 2: 2, 1: 1, 0: 0}[high[0]]
    if low_category != high_category:
        return low_category > high_category
    if low_category == 1:
        return a > high[1]
    return [a, b] > list(high[1:3])


def test_check_setting_refuses_illegal_settings_with_reasons() -> None:
    seven = cards("As Ad Kc Qh 7s 5d 2c")
    with pytest.raises(IllegalAction, match="outranks"):
        check_setting(seven, Setting.of("As Ad", "Kc Qh 7s"))
    with pytest.raises(IllegalAction, match="not in the player hand"):
        check_setting(seven, Setting.of("As 3d", "Kc Qh 7s"))
    with pytest.raises(IllegalAction, match="low hand needs 2"):
        check_setting(seven, Setting.of("As", "Ad Kc Qh"))
    with pytest.raises(IllegalAction, match="high hand needs 3"):
        check_setting(seven, Setting.of("As Ad", "Kc Qh"))
    with pytest.raises(IllegalAction, match="used twice"):
        check_setting(seven, Setting.of("As Ad", "As Qh 7s"))
    with pytest.raises(IllegalAction, match="discards"):
        check_setting(seven, Setting.of("Kc Qh", "As Ad 7s", "5d 7s"))
    good = check_setting(seven, Setting.of("Qh Kc", "Ad 7s As"))
    assert good.discards == tuple(cards("5d 2c"))
    assert good.id == "KcQh-AsAd7s"


def test_lucky_break() -> None:
    assert is_lucky_break(Setting.of("2s 2d", "As 2c 3d"))
    assert is_lucky_break(Setting.of("JK Ad", "9s 9c 9d"))
    assert not is_lucky_break(Setting.of("As Kd", "9s 9c 9d"))
    assert not is_lucky_break(Setting.of("Ks Kd", "As Ac 9d"))


# --------------------------------------------------------------------------------------------
# The house way, step by step


@pytest.mark.parametrize(
    ("hand", "step", "low", "high"),
    [
        # 1: pair + trips, the highest pair low.
        ("9s 9d 9c Ks Kd 5c 2h", 1, "Ks Kd", "9s 9d 9c"),
        ("9s 9d 9c Ks Kd 5c 5h", 1, "Ks Kd", "9s 9d 9c"),
        ("As Ad Ac Ks Kd 2c 2h", 1, "Ks Kd", "As Ad Ac"),
        ("JK Ad 9c 9s 9d 5c 2h", 1, "JK Ad", "9s 9d 9c"),
        # 2: pair + straight, the highest pair low; the highest straight (tie rule).
        ("4s 5d 6c Qs Qd 9c Ah", 2, "Qs Qd", "4s 5d 6c"),
        ("4s 5d 6c 6s Qs Qd Ah", 2, "Qs Qd", "4s 5d 6c"),
        ("4s 5d 6c 7h Qs Qd 2h", 2, "Qs Qd", "5d 6c 7h"),
        ("JK Kd 5c 5s 9d Ac 2h", 2, "5c 5s", "JK Ac Kd"),
        # 3: no-pair low + trips, the highest two cards low.
        ("8s 8d 8c As Kd 5c 2h", 3, "As Kd", "8s 8d 8c"),
        ("8s 8d 8c 8h Kd 5c 2h", 3, "8h Kd", "8s 8d 8c"),
        # 4: no-pair low + straight, the highest two cards low.
        ("4s 5d 6c As Kd 9c 2h", 4, "As Kd", "4s 5d 6c"),
        ("As Kd Qc 9s 7d 5c 2h", 4, "9s 7d", "As Kd Qc"),
        ("JK Kd Tc 8s 6d 4c 2h", 4, "Kd Tc", "JK 8s 6d"),
        # 5: two pairs, the second-highest pair low.
        ("As Ad Ks Kd 5c 5h 9c", 5, "Ks Kd", "As Ad 9c"),
        ("As Ad 5c 5h Ks 9d 7c", 5, "5c 5h", "As Ad Ks"),
        # 6: one pair, the highest two cards low.
        ("7s 7d As Kd 9c 4h 2c", 6, "As Kd", "7s 7d 9c"),
        ("As Ad Kd Jc 9c 4h 2c", 6, "Kd Jc", "As Ad 9c"),
        # 7: nothing: second and third cards low.
        ("As Kd 9c 8h 5c 4d 2s", 7, "Kd 9c", "As 8h 5c"),
    ],
)
def test_house_way_steps(hand: str, step: int, low: str, high: str) -> None:
    setting, used = house_way_with_step(cards(hand))
    assert used == step
    assert ranks_of(setting.low) == ranks_of(cards(low))
    assert setting.high_key == hi(high)


def test_step_7_sample_hand_really_has_nothing_better() -> None:
    setting = house_way(cards("As Kd 9c 8h 5c 4d 2s"))
    assert setting.low_key == lo("Kd 9c")
    assert setting.high_key == hi("As 8h 5c")
    assert setting.discards == tuple(cards("4d 2s"))


def _card_hand(multiset: tuple[int, ...]) -> list[Card]:
    """Some real cards with these ranks (0 = joker)."""
    used: Counter[int] = Counter()
    result = []
    for rank in multiset:
        if rank == 0:
            result.append(JOKER)
        else:
            result.append(Card.of(rank, used[rank]))
            used[rank] += 1
    return result


@pytest.mark.slow
def test_literal_house_way_equals_the_par_sheets_scored_house_way_on_a_reduced_deck() -> None:
    deck = par.DeckSpec.of({2: 4, 3: 4, 5: 2, 8: 2, 10: 1, 12: 2, 13: 4, 14: 4}, joker=True)
    table = par.judge_multisets(deck)
    steps: Counter[int] = Counter()
    for index in range(len(table)):
        seven = _card_hand(tuple(int(r) for r in table.ranks[index]))
        setting, step = house_way_with_step(seven)
        steps[step] += 1
        assert (setting.low_key, setting.high_key) == table.house_way_keys(index), seven
    assert set(steps) == set(range(1, 8))  # every step was exercised


def test_house_way_facts_over_every_full_deck_multiset() -> None:
    table = par.full_table()
    assert len(table) > 0  # the loop below runs
    for index in range(len(table)):
        low, high = table.house_way_keys(index)
        step = house_way_step(low, high).number
        ranks = [int(r) for r in table.ranks[index]]
        if 0 in ranks:
            assert step <= 4  # the joker always makes three of a kind or a straight
        assert high != hi("Ks 3d 2c")  # K-3-2 exactly is never set by the house way
        if not qualifies(high):
            assert step == 7
            assert max(ranks) <= 12
        assert (int(table.bonus[index]) > 0) == (step in (1, 2))


@settings(deadline=None, max_examples=80)
@given(st.lists(card_codes, min_size=7, max_size=7, unique=True))
def test_literal_house_way_equals_scored_house_way_on_random_hands(codes: list[int]) -> None:
    seven = [Card(code) for code in codes]
    table = par.full_table()
    index = table.index_of[tuple(sorted(card.rank for card in seven))]
    setting = house_way(seven)
    assert (setting.low_key, setting.high_key) == table.house_way_keys(index)
    assert int(table.bonus[index]) == best_lucky_break(seven)


# --------------------------------------------------------------------------------------------
# Qualification and the main bet


def test_qualification_at_k_3_2() -> None:
    assert qualifies(hi("Ks 3d 2c"))
    assert not qualifies(hi("Qs Jd 9c"))
    for multiset in _all_rank_multisets(3):
        key = high_key(*multiset)
        assert qualifies(key) == (key[0] > 0 or max(multiset) >= 13)
    assert qualifies(hi("2s 2d 3c"))
    assert dealer_qualifies(Setting.of("Qs Jd", "Ks 3d 2c"))
    assert not dealer_qualifies(Setting.of("9s 8d", "Qs Jd 6c"))


def test_non_qualifying_dealer_pushes_every_main_bet() -> None:
    result = round_result(cards("As Ad Ac Ks Kd 5c 2h"), cards("Qs Jd 9c 8h 6s 5d 3c"))
    assert result.dealer_step == 7
    assert not result.dealer_qualified
    assert result.dealer_setting.high_key == hi("Qs 8h 6s")
    assert {r.outcome for r in result.main.values()} == {BetOutcome.PUSH}
    assert {r.reason for r in result.main.values()} == {"dealer_not_qualified"}


def test_king_high_dealer_qualifies() -> None:
    result = round_result(cards("As Ad Ac Qs Qd 5c 2h"), cards("Ks Jd 9c 8h 6s 5d 3c"))
    assert result.dealer_qualified
    assert result.main_for(None).outcome is BetOutcome.WIN


def test_lucky_break_beats_any_non_lucky_break() -> None:
    weak = Setting.of("2s 2d", "Ac 2c 3d")
    strong = Setting.of("Ks Kd", "As Ad Qc")
    assert main_bet(weak, strong).outcome is BetOutcome.WIN
    assert main_bet(weak, strong).reason == "player_lucky_break"
    assert main_bet(strong, weak).outcome is BetOutcome.LOSE
    assert main_bet(strong, weak).reason == "dealer_lucky_break"


def test_main_bet_comparisons() -> None:
    dealer = Setting.of("Ks Qd", "9s 9c 5d")
    assert main_bet(Setting.of("As 2d", "Ts Tc 3d"), dealer).outcome is BetOutcome.WIN
    assert main_bet(Setting.of("Kh Qc", "9h 9d 5c"), dealer).outcome is BetOutcome.LOSE  # copies
    assert main_bet(Setting.of("Kh Jc", "As Ac 5c"), dealer).outcome is BetOutcome.PUSH
    assert main_bet(Setting.of("As Jc", "9h 9d 5c"), dealer).outcome is BetOutcome.PUSH
    both_lucky = Setting.of("3s 3d", "4s 5c 6d")
    assert main_bet(Setting.of("4h 4d", "5s 6c 7d"), both_lucky).outcome is BetOutcome.WIN
    assert main_bet(Setting.of("4h 4d", "4s 5h 6h"), both_lucky).outcome is BetOutcome.PUSH
    assert main_bet(Setting.of("3h 3c", "4h 5h 6h"), both_lucky).outcome is BetOutcome.LOSE
    assert main_bet(Setting.of("As 2d", "Ts Tc 3d"), dealer).odds == Fraction(1)


# --------------------------------------------------------------------------------------------
# Side bets


@pytest.mark.parametrize(
    ("hand", "line", "odds"),
    [
        ("As Ad Ah Ac JK 7c 2d", BreakBonusHand.FIVE_ACES, 200),
        ("9s 9d 9h 9c JK 7c 2d", BreakBonusHand.FIVE_OF_A_KIND, 100),
        ("Ks Kd Kh Kc JK As Ad", BreakBonusHand.FIVE_OF_A_KIND, 100),
        ("9s 9d 9h 5c 5d Kc 2d", BreakBonusHand.PAIR_TRIPS, 6),
        ("9s 9d JK 5c 5d Kc 2d", BreakBonusHand.PAIR_TRIPS, 6),
        ("Qs Kd Ah 5c 5d 8c 2d", BreakBonusHand.PAIR_QKA, 3),
        ("JK Kd Ah 5c 5d 8c 2d", BreakBonusHand.PAIR_QKA, 3),
        ("4s 5d 6h Jc Jd 9c 2d", BreakBonusHand.PAIR_STRAIGHT, 1),
        ("As 2d 3h Jc Jd 9c 7d", BreakBonusHand.PAIR_STRAIGHT, 1),
        ("As Kd 9h 7c 5d 3c 2d", BreakBonusHand.NONE, None),
        ("As Ad Kh Kc 9d 5c 2d", BreakBonusHand.NONE, None),
    ],
)
def test_break_bonus_lines(hand: str, line: BreakBonusHand, odds: int | None) -> None:
    seven = cards(hand)
    assert best_lucky_break(seven) is line
    dealer = [c for c in Deck.with_joker() if isinstance(c, Card) and c not in seven][:7]
    result = round_result(seven, dealer).break_bonus
    if odds is None:
        assert result.outcome is BetOutcome.LOSE
    else:
        assert result.outcome is BetOutcome.WIN
        assert result.odds == odds
        assert result.reason == line.outcome


def test_dealer_break_bonus_one_to_one_and_four_to_one() -> None:
    dealer_lucky = cards("Ks Kd 4c 5h 6s 9d 2c")
    player_none = cards("As Qd Jc 9h 7s 3d 2h")
    player_lucky = cards("Qs Qh 8c 8h 8d Td 3s")
    assert round_result(player_none, dealer_lucky).dealer_break_bonus.odds == 1
    assert round_result(player_lucky, dealer_lucky).dealer_break_bonus.odds == 4
    assert round_result(player_lucky, dealer_lucky).dealer_break_bonus.reason == (
        "both_lucky_break"
    )
    dealer_none = cards("Ks Kd 4c 7h Js 9d 2c")
    assert round_result(player_lucky, dealer_none).dealer_break_bonus.outcome is BetOutcome.LOSE


def test_player_lucky_break_for_the_side_bet_ignores_the_chosen_setting() -> None:
    dealer = cards("Ks Kd 4c 5h 6s 9d 2c")
    player = cards("Qs Qh 8c 8h 8d Td 3s")
    result = round_result(player, dealer)
    not_lucky = Setting.of("Qs Td", "8c 8h 8d")
    bets = result.settle(check_setting(player, not_lucky))
    assert bets["dealer_break_bonus"].odds == 4
    assert bets["main"].outcome is BetOutcome.LOSE  # dealer Lucky Break, player none
    assert result.main_for(None).reason == "split"  # both Lucky Breaks: Q-Q < K-K, 8s > 4-5-6


# --------------------------------------------------------------------------------------------
# The live shared-hand result


def test_round_result_lists_every_legal_setting_and_flags_the_default() -> None:
    player = cards("As Ad Kc Qh 7s 5d 2c")
    dealer = cards("9s 9d 9c 4h 3s Td 8c")
    result = round_result(player, dealer)
    assert list(result.main) == [s.id for s in legal_settings(player)]
    assert result.default_setting_id == house_way(player).id
    assert result.default_main == result.main[result.default_setting_id]
    assert result.main_for(result.default_setting_id) == result.default_main
    details = result.to_details()
    assert details["default_setting"] in details["main_by_setting"]
    with pytest.raises(IllegalAction):
        result.main_for(Setting.of("As Ad", "Kc Qh 7s"))
    with pytest.raises(IllegalAction):
        result.main_for("AsAd-KcQh7s")


def test_wrong_counts_duplicates_and_tiles_are_refused() -> None:
    player = cards("As Ad Kc Qh 7s 5d 2c")
    dealer = cards("9s 9d 9c 4h 3s Td 8c")
    with pytest.raises(RulesError, match="exactly 7"):
        round_result(player[:6], dealer)
    with pytest.raises(RulesError, match="exactly 7") as info:
        round_result(player, [*dealer, JOKER])
    assert info.value.context["hand"] == "dealer"
    with pytest.raises(RulesError, match="twice"):
        round_result([*player[:6], player[0]], dealer)
    with pytest.raises(RulesError, match="both"):
        round_result(player, [*dealer[:6], player[3]])
    with pytest.raises(RulesError, match="not a playing card"):
        round_result([*player[:6], Tile(3)], dealer)
    with pytest.raises(RulesError):
        legal_settings(player[:5])


def test_deal_plan_and_game_object() -> None:
    assert len(DEAL_PLAN) == 14
    assert [s.name for s in DEAL_PLAN.slots[:7]] == [f"P{i}" for i in range(1, 8)]
    assert all(s.face is Face.UP for s in DEAL_PLAN.slots[:7])
    assert all(s.face is Face.HIDDEN and s.hand == "dealer" for s in DEAL_PLAN.slots[7:])
    assert DEAL_PLAN.hands == ("player", "dealer")
    assert len(BREAK_POKER.deck) == 53
    player = cards("As Ad Ac Qs Qd 5c 2h")
    dealer = cards("Ks Jd 9c 8h 6s 5d 3c")
    result = BREAK_POKER.resolve(DEAL_PLAN.group([*player, *dealer]))
    assert result.winner == "player"
    bets = BREAK_POKER.settle(result, BREAK_POKER.default_paytables)
    assert list(bets) == list(BREAK_POKER.bet_ids)
    assert bets["break_bonus"].odds == 6
    with pytest.raises(RulesError):
        BREAK_POKER.resolve({"player": player})


def test_pay_table_overrides_apply() -> None:
    tables = {bet: dict(table) for bet, table in DEFAULT_PAYTABLES.items()}
    tables["break_bonus"]["pair_trips"] = Fraction(7)
    result = round_result(cards("9s 9d 9h 5c 5d Kc 2d"), cards("Ks Jd 9c 8h 6s 4d 3c"), tables)
    assert result.break_bonus.odds == 7
    del tables["main"]["win"]
    with pytest.raises(RulesError, match="no entry"):
        round_result(cards("9s 9d 9h 5c 5d Kc 2d"), cards("Ks Jd 7c 8h 6s 4d 3c"), tables)


@settings(deadline=None, max_examples=25)
@given(
    st.lists(card_codes, min_size=14, max_size=14, unique=True),
    st.permutations(range(4)),
)
def test_results_do_not_depend_on_suits(codes: list[int], suits: list[int]) -> None:
    def permute(card: Card) -> Card:
        if card.is_joker:
            return card
        return Card.of(card.rank, suits[int(card.suit or 0)])

    hand = [Card(code) for code in codes]
    first = round_result(hand[:7], hand[7:])
    moved = [permute(card) for card in hand]
    second = round_result(moved[:7], moved[7:])
    for setting_id, outcome in first.main.items():
        setting = first.settings[setting_id]
        mapped = Setting.of(map(permute, setting.low), map(permute, setting.high))
        assert second.main[mapped.id] == outcome
    assert second.break_bonus == first.break_bonus
    assert second.dealer_break_bonus == first.dealer_break_bonus
    assert second.dealer_qualified == first.dealer_qualified
    assert second.house_way.high_key == first.house_way.high_key


# --------------------------------------------------------------------------------------------
# Par sheet: the combinatorial counters against brute force


def _obvious_high_category(ranks: tuple[int, ...]) -> tuple[str, int]:
    """('trips', rank), ('straight', top), or ('other', 0); joker = 0, tried as every rank."""
    options = (
        [ranks]
        if 0 not in ranks
        else [tuple(r if r != 0 else sub for r in ranks) for sub in range(2, 15)]
    )
    best = ("other", 0)
    for option in options:
        a, b, c = sorted(option)
        if a == b == c:
            candidate = ("trips", a)
        elif (b == a + 1 and c == b + 1) or (a, b, c) == (2, 3, 14):
            candidate = ("straight", c if c != 14 or a != 2 else 3)
        else:
            continue
        if (candidate[0] == "trips", candidate[1]) > (best[0] == "trips", best[1]):
            best = candidate
    return best


def _obvious_bonus(seven: tuple[int, ...]) -> BreakBonusHand:
    best = BreakBonusHand.NONE
    for high in itertools.combinations(range(7), 3):
        rest = [i for i in range(7) if i not in high]
        kind, rank = _obvious_high_category(tuple(seven[i] for i in high))
        if kind == "other":
            continue
        for low in itertools.combinations(rest, 2):
            a, b = (seven[i] or 14 for i in low)
            if a != b:
                continue
            if kind == "trips" and rank == a:
                line = BreakBonusHand.FIVE_ACES if a == 14 else BreakBonusHand.FIVE_OF_A_KIND
            elif kind == "trips":
                line = BreakBonusHand.PAIR_TRIPS
            elif rank == 14:
                line = BreakBonusHand.PAIR_QKA
            else:
                line = BreakBonusHand.PAIR_STRAIGHT
            best = max(best, line)
    return best


def _deck_cards(deck: par.DeckSpec) -> list[Card]:
    result = []
    for rank, copies in deck.copies:
        result.extend([JOKER] if rank == 0 else [Card.of(rank, s) for s in range(copies)])
    return result


def test_break_bonus_counts_match_brute_force_on_a_reduced_deck() -> None:
    deck = par.DeckSpec.of({2: 4, 3: 4, 13: 4, 14: 4}, joker=True)
    all_cards = _deck_cards(deck)
    evaluate = functools.cache(_obvious_bonus)
    brute: Counter[BreakBonusHand] = Counter()
    for hand in itertools.combinations(all_cards, 7):
        brute[evaluate(tuple(sorted(card.rank for card in hand)))] += 1
    counted = par.break_bonus_counts(par.judge_multisets(deck))
    assert sum(brute.values()) == math.comb(17, 7)
    assert counted == {line: brute[line] for line in BreakBonusHand}
    assert all(brute[line] > 0 for line in BreakBonusHand)


def test_break_bonus_counts_of_the_full_deck_sum_to_c_53_7() -> None:
    counts = par.break_bonus_counts(par.full_table())
    assert sum(counts.values()) == math.comb(53, 7) == 154_143_080
    # Five aces: the four aces and the joker, with any two of the other 48 cards.
    assert counts[BreakBonusHand.FIVE_ACES] == math.comb(48, 2)
    report = par.break_bonus_report(par.full_table(), DEFAULT_PAYTABLES)
    assert sum(row.probability for row in report.outcomes) == 1


def _obvious_main(player: tuple[Any, ...], dealer: tuple[Any, ...]) -> str:
    """The rule page's comparison, written out again; keys are (low, high, lucky)."""
    (pl, ph, plucky), (dl, dh, dlucky) = player, dealer
    if dh < (0, 13, 3, 2):
        return "nq"
    if dlucky and not plucky:
        return "lose"
    if plucky and not dlucky:
        return "win"
    if pl > dl and ph > dh:
        return "win"
    if dl >= pl and dh >= ph:
        return "lose"
    return "push"


@pytest.mark.slow
def test_heads_up_counts_match_brute_force_on_a_reduced_deck() -> None:
    deck = par.DeckSpec.of(
        {14: 2, 13: 2, 2: 2, 3: 1, 5: 1, 6: 1, 8: 1, 9: 1, 10: 1, 11: 1, 12: 1}, joker=True
    )
    all_cards = _deck_cards(deck)
    assert len(all_cards) == 15

    @functools.cache
    def judged(ranks: tuple[int, ...]) -> tuple[Any, ...]:
        seven = _card_hand(ranks)
        setting = house_way(seven)
        return (setting.low_key, setting.high_key, is_lucky_break(setting))

    @functools.cache
    def bonus(ranks: tuple[int, ...]) -> bool:
        return best_lucky_break(_card_hand(ranks)) is not BreakBonusHand.NONE

    main: Counter[str] = Counter()
    dealer_bonus: Counter[str] = Counter()
    for player in itertools.combinations(range(15), 7):
        rest = [i for i in range(15) if i not in player]
        p_ranks = tuple(sorted(all_cards[i].rank for i in player))
        for dealer in itertools.combinations(rest, 7):
            d_ranks = tuple(sorted(all_cards[i].rank for i in dealer))
            p, d = judged(p_ranks), judged(d_ranks)
            main[_obvious_main(p, d)] += 1
            if not d[2]:
                dealer_bonus["none"] += 1
            else:
                dealer_bonus["both" if bonus(p_ranks) else "dealer"] += 1
    counts = par.heads_up_counts(par.judge_multisets(deck))
    m = counts.main
    assert m[par.MainOutcome.NOT_QUALIFIED] == main["nq"] > 0
    assert m[par.MainOutcome.PLAYER_LUCKY_BREAK] + m[par.MainOutcome.BOTH_HANDS_WIN] == main["win"]
    assert m[par.MainOutcome.DEALER_LUCKY_BREAK] + m[par.MainOutcome.DEALER_BOTH] == main["lose"]
    assert m[par.MainOutcome.SPLIT] == main["push"]
    assert counts.total == math.comb(15, 7) * math.comb(8, 7)
    db = counts.dealer_bonus
    assert db[par.DealerBonusOutcome.NONE] == dealer_bonus["none"]
    assert db[par.DealerBonusOutcome.DEALER_ONLY] == dealer_bonus["dealer"]
    assert db[par.DealerBonusOutcome.BOTH] == dealer_bonus["both"] > 0


def test_monte_carlo_dealer_lucky_break_rate_agrees_with_the_exact_count() -> None:
    table = par.full_table()
    counts = par.monte_carlo_counts(table, 20_000, random.Random(7))
    exact = 1 - Fraction(par.break_bonus_counts(table)[BreakBonusHand.NONE], math.comb(53, 7))
    lucky = sum(counts.dealer_bonus[1:]) / counts.total
    se = math.sqrt(float(exact) * (1 - float(exact)) / counts.total)
    assert abs(lucky - float(exact)) < 5 * se
    again = par.monte_carlo_counts(table, 20_000, random.Random(7))
    assert again == counts


def test_analyze_monte_carlo_report() -> None:
    report = par.analyze(method=Method.MONTE_CARLO, samples=3_000, seed=3, progress=False)
    assert list(report.bets) == ["main", "break_bonus", "dealer_break_bonus"]
    assert report.samples == 3_000
    assert report.bets["main"].rtp_se is not None
    names = [row.name for row in report.bets["main"].outcomes]
    assert "dealer does not qualify (push)" in names
    bonus = report.bets["break_bonus"]
    assert isinstance(bonus.rtp, Fraction)
    assert sum(row.count or 0 for row in bonus.outcomes) == math.comb(53, 7)
    assert any("Monte Carlo" in note for note in report.notes)
    document = report.to_json()
    assert document["bets"]["break_bonus"]["rtp_exact"]
