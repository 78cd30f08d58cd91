from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.analysis import Method
from controller.cards import Card, Tile, parse_cards
from controller.errors import IllegalAction, PieceRefused, RulesError
from controller.games.base import Face
from controller.games.three_card_mulligan import par_sheet as par
from controller.games.three_card_mulligan import rules as tcm
from controller.money import BetOutcome, merge_paytables

# --------------------------------------------------------------------------------------------
# A naive, independent classifier: (category, tie-break tuple), compared as tuples.


def naive_key(cards: tuple[Card, ...] | list[Card]) -> tuple[int, tuple[int, ...]]:
    ranks = sorted((card.rank for card in cards), reverse=True)
    distinct = set(ranks)
    flush = len({card.suit for card in cards}) == 1
    wheel = distinct == {14, 2, 3}
    straight = len(distinct) == 3 and (ranks[0] - ranks[2] == 2 or wheel)
    top = 3 if wheel else ranks[0]
    if len(distinct) == 1:
        return (4, (ranks[0],))
    if straight and flush:
        return (5, (top,))
    if straight:
        return (3, (top,))
    if flush:
        return (2, tuple(ranks))
    if len(distinct) == 2:
        pair = ranks[1]
        kicker = ranks[0] if ranks[0] != pair else ranks[2]
        return (1, (pair, kicker))
    return (0, tuple(ranks))


NAIVE_GROUP = {5: "straight_flush", 4: "three_of_a_kind", 3: "straight"}


def naive_stays(cards: tuple[Card, ...]) -> bool:
    category, ranks = naive_key(cards)
    if category > 0:
        return True
    return ranks[0] == 14 or (ranks[0] == 13 and ranks[1] >= 10)


def naive_dealer_stands(cards: tuple[Card, ...]) -> bool:
    category, ranks = naive_key(cards)
    return category > 0 or ranks[0] >= 13


def hand(text: str) -> list[Card]:
    return parse_cards(text)


def strength(text: str) -> int:
    return tcm.rank_hand(hand(text))


# --------------------------------------------------------------------------------------------
# Ranking


def test_ranking_matches_naive_order_on_every_hand() -> None:
    hands = list(itertools.combinations([Card(code) for code in range(52)], 3))
    assert len(hands) == 22_100
    keyed = sorted(hands, key=naive_key)
    for before, after in itertools.pairwise(keyed):
        s_before, s_after = tcm.rank_hand(before), tcm.rank_hand(after)
        if naive_key(before) == naive_key(after):
            assert s_before == s_after
        else:
            assert s_before < s_after, (before, after)


def test_a23_is_the_lowest_straight_and_qka_the_highest() -> None:
    a23 = strength("As 2d 3c")
    assert tcm.category_of_strength(a23) is tcm.MulliganHand.STRAIGHT
    assert a23 < strength("2s 3d 4c")
    assert a23 > strength("Ks Qs 9s")  # any flush
    qka = strength("Qs Kd Ac")
    assert qka > strength("Js Qd Kc")
    assert qka < strength("2s 2d 2c")
    assert tcm.hand_category(hand("Ks As 2d")) is tcm.MulliganHand.HIGH_CARD  # no wrap-around
    assert tcm.hand_category(hand("Ah 2h 3h")) is tcm.MulliganHand.STRAIGHT_FLUSH
    assert strength("Ah 2h 3h") < strength("2h 3h 4h")
    assert strength("Ah 2h 3h") > strength("As Ad Ac")


def test_category_order() -> None:
    ordered = ["4h 5h 6h", "3s 3d 3c", "9s Td Jc", "2h 7h 9h", "8s 8d 2c", "As Kd 9c"]
    strengths = [strength(text) for text in ordered]
    assert strengths == sorted(strengths, reverse=True)
    assert [tcm.category_of_strength(s) for s in strengths] == list(tcm.MulliganHand)


def test_suits_never_break_ties() -> None:
    assert strength("Ks Qs 9h") == strength("Kd Qc 9c")
    assert strength("As 2d 3c") == strength("Ah 2c 3d")
    assert strength("8s 8d 2c") == strength("8h 8c 2d")


def test_describe() -> None:
    assert tcm.describe_hand(hand("As 2d 3c")) == "straight, ace-two-three"
    assert tcm.describe_hand(hand("Ks Kd Qc")) == "pair of kings, queen kicker"
    assert tcm.evaluate_hand(hand("Qs Kd Ac")).category == "straight"


SUIT_PERMUTATIONS = list(itertools.permutations(range(4)))


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.integers(0, 51), min_size=3, max_size=3, unique=True),
    st.lists(st.integers(0, 51), min_size=3, max_size=3, unique=True),
    st.sampled_from(SUIT_PERMUTATIONS),
    st.permutations(range(3)),
)
def test_ranking_is_a_total_order_invariant_under_suits(
    first: list[int], second: list[int], perm: tuple[int, ...], order: list[int]
) -> None:
    a = [Card(code) for code in first]
    b = [Card(code) for code in second]
    moved = [Card.of(card.rank, perm[card.code % 4]) for card in a]
    shuffled = [a[index] for index in order]
    assert tcm.rank_hand(moved) == tcm.rank_hand(a) == tcm.rank_hand(shuffled)
    sa, sb = tcm.rank_hand(a), tcm.rank_hand(b)
    ka, kb = naive_key(a), naive_key(b)
    assert (sa > sb) == (ka > kb)
    assert (sa == sb) == (ka == kb)


def test_bad_hands_are_refused() -> None:
    with pytest.raises(RulesError, match="exactly 3"):
        tcm.rank_hand(hand("As Kd"))
    with pytest.raises(RulesError, match="twice"):
        tcm.rank_hand(hand("As As Kd"))
    with pytest.raises(RulesError, match="joker"):
        tcm.rank_hand([*hand("As Kd"), Card.parse("JK")])
    with pytest.raises(RulesError, match="not a playing card"):
        tcm.rank_hand([*hand("As Kd"), Tile(3)])


# --------------------------------------------------------------------------------------------
# Dealer's rule and house way


@pytest.mark.parametrize(
    ("text", "stands"),
    [
        ("Ks 3d 2c", True),  # the lowest king-high
        ("Kh Qd Jc", True),
        ("As 4d 2c", True),
        ("2s 2d 3c", True),
        ("Qs Jd 9c", False),  # queen-high mulligans
        ("7s 5d 2c", False),
        ("Qh 8h 3h", True),  # a flush is better than king-high
    ],
)
def test_dealer_stands_on_king_high_or_better(text: str, stands: bool) -> None:
    assert tcm.dealer_stands(hand(text)) is stands


@pytest.mark.parametrize(
    ("text", "stays"),
    [
        ("Ks Td 2c", True),  # K-10-x, the weakest stay
        ("Ks Jd 2c", True),
        ("As 4d 2c", True),  # ace-high
        ("Ks 9d 8c", False),  # K-9-x mulligans
        ("Qs Jd 9c", False),
        ("2s 2d 3c", True),
        ("7h 5h 2h", True),
    ],
)
def test_house_way(text: str, stays: bool) -> None:
    assert tcm.house_way_stays(hand(text)) is stays


# --------------------------------------------------------------------------------------------
# Settlement


def test_mulligan_bet_on_the_mulligan_path() -> None:
    result = tcm.round_result(
        player=hand("7s 5d 2c"), dealer=hand("Ks Qh 3d"), player_mulligan=hand("9h Tc Jd")
    )
    assert result.dealer_final == "D"
    assert result.winner(tcm.Path.STAYED) == "dealer"
    assert result.winner(tcm.Path.MULLIGANED) == "player"
    stayed = result.bets(tcm.Path.STAYED)
    assert stayed["ante"].outcome is BetOutcome.LOSE
    assert stayed["pair_plus"].outcome is BetOutcome.LOSE
    mulliganed = result.bets(tcm.Path.MULLIGANED)
    assert set(mulliganed) == {"ante", "mulligan", "pair_plus", "pair_plus_mulligan"}
    for bet in ("ante", "mulligan"):
        assert mulliganed[bet].outcome is BetOutcome.WIN
        assert mulliganed[bet].odds == Fraction(3, 2)
        assert mulliganed[bet].reason == "straight"
    assert mulliganed["pair_plus"].outcome is BetOutcome.LOSE  # original hand: high card
    assert mulliganed["pair_plus_mulligan"].odds == 6


def test_pair_plus_on_both_hands_whatever_the_main_result() -> None:
    result = tcm.round_result(
        player=hand("8s 8d 2c"),
        dealer=hand("Qs Jd 9c"),  # the dealer mulligans
        player_mulligan=hand("4h 4d 4c"),
        dealer_mulligan=hand("As Ad Kc"),
    )
    assert result.dealer_final == "DM"
    stayed = result.bets(tcm.Path.STAYED)
    assert stayed["ante"].outcome is BetOutcome.LOSE  # pair of 8s < pair of aces
    assert stayed["pair_plus"].outcome is BetOutcome.WIN
    assert stayed["pair_plus"].odds == 1
    mulliganed = result.bets(tcm.Path.MULLIGANED)
    assert mulliganed["ante"].odds == 4
    assert mulliganed["mulligan"].odds == 4
    assert mulliganed["pair_plus"].odds == 1  # settled on the original hand
    assert mulliganed["pair_plus_mulligan"].odds == 30
    assert mulliganed["pair_plus_mulligan"].reason == "three_of_a_kind"


def test_ties_push_and_game_result() -> None:
    result = tcm.round_result(player=hand("Ks Qd 9h"), dealer=hand("Kd Qc 9c"))
    assert result.mulliganed is None
    assert result.bets(tcm.Path.STAYED)["ante"].outcome is BetOutcome.PUSH
    game = result.game_result()
    assert game.winner == "tie"
    assert set(game.details["paths"]) == {"stayed"}
    with pytest.raises(RulesError, match="no mulligan hand"):
        result.bets(tcm.Path.MULLIGANED)


def test_dealer_mulligan_hand_must_match_the_rule() -> None:
    with pytest.raises(RulesError, match="must mulligan"):
        tcm.round_result(player=hand("As Kd 2c"), dealer=hand("Qs Jd 9c"))
    with pytest.raises(RulesError, match="stands"):
        tcm.round_result(
            player=hand("As Qd 2c"), dealer=hand("Ks Jd 9c"), dealer_mulligan=hand("2s 3s 4s")
        )
    with pytest.raises(RulesError, match="both hand"):
        tcm.round_result(player=hand("As Kd 2c"), dealer=hand("As Jd 9c"))


def test_paytable_override() -> None:
    tables = merge_paytables(tcm.DEFAULT_PAYTABLES, {"ante": {"straight": "2:1"}})
    result = tcm.round_result(player=hand("9h Tc Jd"), dealer=hand("Ks Qh 3d"), paytables=tables)
    assert result.bets(tcm.Path.STAYED)["ante"].odds == 2
    assert tcm.DEFAULT_PAYTABLES["ante"]["straight"] == Fraction(3, 2)


# --------------------------------------------------------------------------------------------
# The round's state machine


def deal_all(round_: tcm.MulliganRound, text: str) -> tcm.MulliganRound:
    for card in hand(text):
        round_ = round_.deal(card)
    return round_


def test_round_with_both_mulligans() -> None:
    round_ = tcm.THREE_CARD_MULLIGAN.new_round()
    seen = []
    for card in hand("7s 5d 2c Qs Jd 9c"):
        slot = round_.next_slot
        assert slot is not None
        seen.append((slot.name, slot.face))
        round_ = round_.deal(card)
    assert seen == [
        ("P1", Face.UP), ("P2", Face.UP), ("P3", Face.UP),
        ("D1", Face.HIDDEN), ("D2", Face.HIDDEN), ("D3", Face.HIDDEN),
    ]  # fmt: skip
    assert round_.step is tcm.Step.DECIDE
    assert round_.next_slot is None
    with pytest.raises(IllegalAction, match="decision"):
        round_.deal(Card.parse("Ah"))
    round_ = round_.decide(True)
    assert not round_.dealer_revealed
    names = []
    for card in hand("9h Tc Jh As Ad Kc"):
        slot = round_.next_slot
        assert slot is not None
        names.append((slot.name, slot.hand, slot.face))
        round_ = round_.deal(card)
        if slot.name == "PM3":
            assert round_.dealer_revealed
    assert [name for name, _, _ in names] == ["PM1", "PM2", "PM3", "DM1", "DM2", "DM3"]
    assert all(face is Face.UP for _, _, face in names)
    assert round_.step is tcm.Step.COMPLETE
    with pytest.raises(IllegalAction, match="every card"):
        round_.deal(Card.parse("2h"))
    result = round_.result()
    assert result.dealer_final == "DM"
    assert result.winner(tcm.Path.STAYED) == "dealer"  # 7-5-2 against a pair of aces
    assert result.bets(tcm.Path.MULLIGANED)["ante"].outcome is BetOutcome.WIN  # straight
    assert len(round_.plan()) == 12


def test_round_nobody_mulligans_dealer_stands() -> None:
    round_ = deal_all(tcm.MulliganRound(), "As Kd 2c Ks 3d 2h")
    with pytest.raises(IllegalAction, match="waits for decide"):
        round_.result()
    round_ = round_.decide(False)
    assert round_.dealer_revealed
    assert round_.step is tcm.Step.COMPLETE
    assert [slot.name for slot in round_.plan().slots] == ["P1", "P2", "P3", "D1", "D2", "D3"]
    assert round_.result().bets(tcm.Path.STAYED)["ante"].outcome is BetOutcome.WIN


def test_round_nobody_mulligans_dealer_mulligans() -> None:
    round_ = deal_all(tcm.MulliganRound(), "As Kd 2c Qs 3d 2h").decide(False)
    slot = round_.next_slot
    assert slot is not None
    assert slot.name == "DM1"
    round_ = deal_all(round_, "4s 5s 6s")
    assert round_.hands()["DM"] == tuple(hand("4s 5s 6s"))
    assert round_.result().winner(tcm.Path.STAYED) == "dealer"


def test_round_refuses_duplicates_and_early_decisions() -> None:
    round_ = deal_all(tcm.MulliganRound(), "As Kd")
    with pytest.raises(PieceRefused, match="duplicate"):
        round_.deal(Card.parse("As"))
    with pytest.raises(PieceRefused):
        round_.deal(Tile(3))
    with pytest.raises(IllegalAction, match="after six cards"):
        round_.decide(True)
    full = deal_all(round_, "2c Ks 3d 2h").decide(True)
    with pytest.raises(IllegalAction, match="already"):
        full.decide(False)


def test_next_slot_function_and_plans() -> None:
    assert tcm.next_slot([], None) == tcm.PLAYER_SLOTS[0]
    six = hand("As Kd 2c Qs 3d 2h")
    assert tcm.next_slot(six, None) is tcm.Step.DECIDE
    assert tcm.next_slot(six, True) == tcm.PLAYER_MULLIGAN_SLOTS[0]
    with pytest.raises(RulesError):
        tcm.next_slot(six[:3], True)
    assert len(tcm.deal_plan(False, False)) == 6
    assert tcm.deal_plan(True, True).hands == ("P", "D", "PM", "DM")


# --------------------------------------------------------------------------------------------
# Par sheets


@pytest.mark.slow
def test_pair_plus_exact_against_brute_force() -> None:
    counts = Counter(
        naive_key(cards)[0]
        for cards in itertools.combinations([Card(code) for code in range(52)], 3)
    )
    names = {5: "straight_flush", 4: "three_of_a_kind", 3: "straight", 2: "flush", 1: "pair",
             0: "high_card"}  # fmt: skip
    pays = {5: 40, 4: 30, 3: 6, 2: 3, 1: 1, 0: -1}
    found = par.count_pair_plus()
    assert {hand.value: number for hand, number in found.items()} == {
        names[level]: number for level, number in counts.items()
    }
    report = par.analyze(method=Method.EXACT, samples=0, seed=0, progress=False)
    expected_rtp = sum(Fraction(counts[level] * (1 + pays[level]), 22_100) for level in counts)
    assert report.bets["pair_plus"].rtp == expected_rtp
    ante = report.bets["ante"]
    assert sum(row.probability for row in ante.outcomes) == 1
    assert isinstance(ante.rtp, Fraction)
    # Cross-check the exact ante against an independent, naive Monte Carlo.
    rng = random.Random(20240611)
    deck = [Card(code) for code in range(52)]
    total = square = 0.0
    rounds = 60_000
    for _ in range(rounds):
        cards = rng.sample(deck, 12)
        player, dealer = tuple(cards[0:3]), tuple(cards[3:6])
        stays = naive_stays(player)
        final = player if stays else tuple(cards[6:9])
        second = tuple(cards[6:9]) if stays else tuple(cards[9:12])
        theirs = dealer if naive_dealer_stands(dealer) else second
        stake = 1 if stays else 2
        mine_key, their_key = naive_key(final), naive_key(theirs)
        if mine_key > their_key:
            odds = {5: 6, 4: 4, 3: 1.5}.get(mine_key[0], 1)
            value = stake * odds
        elif mine_key == their_key:
            value = 0.0
        else:
            value = -stake
        total += value
        square += value * value
    mean = total / rounds
    se = math.sqrt((square / rounds - mean * mean) / rounds)
    assert abs(float(ante.rtp) - (1 + mean)) < 4.5 * se


def _suit_class(cards: list[Card] | tuple[Card, ...]) -> tuple[tuple[int, int], ...]:
    """The cards up to a permutation of the suits (the least of their relabellings)."""
    return min(
        tuple(sorted((card.rank, perm[card.code % 4]) for card in cards))
        for perm in SUIT_PERMUTATIONS
    )


class _BruteForceAnte:
    """Every deal of a small deck, played by the naive rules, counted by path and outcome."""

    def __init__(self, ranks: tuple[int, ...]) -> None:
        self.deck = [Card.of(rank, suit) for rank in sorted(ranks) for suit in range(4)]
        self.size = len(self.deck)
        self.keys: dict[tuple[Card, ...], tuple[int, tuple[int, ...]]] = {
            cards: naive_key(cards) for cards in itertools.combinations(self.deck, 3)
        }
        self.counts: Counter[tuple[str, str]] = Counter()
        self.both_weak_cache: dict[tuple[tuple[int, int], ...], Counter[tuple[str, str]]] = {}

    def record(
        self, path: str, mine: tuple[Card, ...], theirs: tuple[Card, ...], weight: int
    ) -> None:
        a, b = self.keys[mine], self.keys[theirs]
        if a > b:
            self.counts[path, f"win {NAIVE_GROUP.get(a[0], 'other')}"] += weight
        elif a == b:
            self.counts[path, "push"] += weight
        else:
            self.counts[path, "lose"] += weight

    def deal(
        self, player: tuple[Card, ...], stays: bool, rest: list[Card], dealer: tuple[Card, ...]
    ) -> None:
        """Every way on from this player hand and this dealer hand."""
        left = [card for card in rest if card not in dealer]
        stands = naive_dealer_stands(dealer)
        size = self.size
        if stays and stands:
            self.record("stay", player, dealer, math.comb(size - 6, 3) * math.comb(size - 9, 3))
        elif stays:
            for second in itertools.combinations(left, 3):
                self.record("stay", player, second, math.comb(size - 9, 3))
        elif stands:
            for mulligan in itertools.combinations(left, 3):
                self.record("mulligan", mulligan, dealer, math.comb(size - 9, 3))
        else:
            self.both_weak(left)

    def both_weak(self, left: list[Card]) -> None:
        """Both mulligan: every new player hand against every second dealer hand (cached)."""
        canon = _suit_class(left)
        if canon in self.both_weak_cache:
            self.counts.update(self.both_weak_cache[canon])
            return
        before = Counter(self.counts)
        for mulligan in itertools.combinations(left, 3):
            last = [card for card in left if card not in mulligan]
            for second in itertools.combinations(last, 3):
                self.record("mulligan", mulligan, second, 1)
        self.both_weak_cache[canon] = Counter(self.counts)
        self.both_weak_cache[canon].subtract(before)


def brute_force_ante(ranks: tuple[int, ...]) -> tuple[dict[tuple[str, str], int], int]:
    ante = _BruteForceAnte(ranks)
    # One player hand per suit class (suit permutations change no count), with its class size.
    classes: dict[tuple[tuple[int, int], ...], list[tuple[Card, ...]]] = {}
    for cards in itertools.combinations(ante.deck, 3):
        classes.setdefault(_suit_class(cards), []).append(cards)
    for members in classes.values():
        player: tuple[Card, ...] = members[0]
        multiplicity = len(members)
        before_player = Counter(ante.counts)
        rest = [card for card in ante.deck if card not in player]
        stays = naive_stays(player)
        for dealer in itertools.combinations(rest, 3):
            ante.deal(player, stays, rest, dealer)
        for key, value in (ante.counts - before_player).items():
            ante.counts[key] += (multiplicity - 1) * value
    size = ante.size
    total = math.comb(size, 3) * math.comb(size - 3, 3) * math.comb(size - 6, 3)
    total *= math.comb(size - 9, 3)
    return {key: value for key, value in ante.counts.items() if value}, total


@pytest.mark.parametrize(
    "ranks",
    [
        (2, 3, 5, 14),  # A-2-3 straights and straight flushes, trips, a weak-weak case
        (7, 9, 10, 13),  # the K-10-x / K-9-x boundary
    ],
)
def test_ante_exact_against_brute_force_on_small_decks(ranks: tuple[int, ...]) -> None:
    expected, total = brute_force_ante(ranks)
    found = par.count_ante_outcomes(ranks)
    assert found.total == total
    assert {key: value for key, value in found.counts.items() if value} == expected
    # Every case of the house-way round happened in this deck.
    assert expected["mulligan", "lose"] > 0
    assert expected["stay", "push"] > 0


def test_monte_carlo_report() -> None:
    report = par.analyze(method=Method.MONTE_CARLO, samples=50_000, seed=3, progress=False)
    assert report.samples == 50_000
    ante = report.bets["ante"]
    assert ante.rtp_se is not None
    assert abs(sum(float(row.probability) for row in ante.outcomes) - 1) < 1e-9
    again = par.analyze(method=Method.MONTE_CARLO, samples=50_000, seed=3, progress=False)
    assert again.bets["ante"].rtp == ante.rtp
    with pytest.raises(RulesError, match="at least 2"):
        par.analyze(method=Method.MONTE_CARLO, samples=1, seed=3, progress=False)
