"""Three Card Mulligan par sheet: exact counting of the house-way round and Monte Carlo (numpy)."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from controller.analysis import (
    AnalysisReport,
    BetReport,
    Method,
    chunk_sizes,
    exact_or_sampled,
    exact_row,
    iterate_with_progress,
    sampled_bet,
)
from controller.errors import RulesError
from controller.games.three_card import counting
from controller.games.three_card import hands as three_card
from controller.games.three_card_mulligan.rules import (
    _LEVEL_SHIFT,
    CARDS_PER_HAND,
    DEALER_STANDS_THRESHOLD,
    DEFAULT_PAYTABLES,
    GAME_ID,
    STAY_THRESHOLD,
    MulliganHand,
    _strength_table,
)

IntArray = npt.NDArray[np.int64]
UIntArray = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

_strength_array: Final = counting.lazy_strength_array(_strength_table)
"""The strength table as a numpy array (for vectorised lookups)."""


# --------------------------------------------------------------------------------------------
# Exact counting for the par sheet
#
# The house-way round, seen as four hands drawn in order from one deck: P (player), D
# (dealer), PM (player's mulligan hand), DM (dealer's mulligan hand). Whichever of PM and DM
# are not used, the counts are taken over the "universe" of every ordered sequence of four
# disjoint hands; an unused hand multiplies a count by the number of ways to draw it.
#
# Case 1  P stays, D stands:        P vs D.
# Case 2  P stays, D mulligans:     P vs DM.  Sum over DM of #{D weak, avoiding P and DM}.
# Case 3a P mulligans, D stands:    PM vs D.  Sum over PM of #{P weak, avoiding D and PM}.
# Case 3b P mulligans, D mulligans: PM vs DM, sum over (PM, DM) of K(PM | DM), where K(U) is
#         the number of (P, D) pairs of weak hands avoiding U. (PM, DM) is exchangeable, so
#         wins and losses are equal in number: only ties and the wins with a bonus category
#         (straight or better, whose beaters are straights or better too) need pair lists.
#
# "How many hands of a set avoid a few cards" is inclusion-exclusion with tables of how many
# hands of the set hold one, two or three given cards. Outer hands are taken one per suit
# class (suit permutations change no count).

_SUIT_BITS: Final = sum(1 << (4 * rank) for rank in range(13))
_WIN_GROUPS: Final = ("straight_flush", "three_of_a_kind", "straight", "other")
_BONUS_LEVEL: Final = MulliganHand.STRAIGHT.level


def _win_group(level: int) -> str:
    hand = MulliganHand.from_level(level)
    return hand.value if hand.level >= _BONUS_LEVEL else "other"


@dataclass(frozen=True, slots=True)
class _Space:
    """Every three-card hand of a deck, with masks and lookups for counting."""

    cards: IntArray
    strength: IntArray
    level: IntArray
    masks: UIntArray
    has: BoolArray
    """``has[c, h]``: hand h holds card code c."""

    @classmethod
    def of(cls, codes: Sequence[int]) -> _Space:
        hands, strength = counting.hands_and_strengths(codes, _strength_array())
        bits = np.left_shift(np.uint64(1), hands.astype(np.uint64))
        masks = np.asarray(bits[:, 0] | bits[:, 1] | bits[:, 2], dtype=np.uint64)
        has = np.zeros((52, len(hands)), dtype=np.bool_)
        for column in range(3):
            has[hands[:, column], np.arange(len(hands))] = True
        return cls(hands, strength, strength >> _LEVEL_SHIFT, masks, has)

    def avoiding(self, cards: Iterable[int]) -> BoolArray:
        """Which hands hold none of ``cards``."""
        hit = np.zeros(len(self.cards), dtype=np.bool_)
        for card in cards:
            hit |= self.has[card]
        return ~hit


class _AvoidCounter:
    """Counts the hands of one set (e.g. the dealer's mulligan hands) that avoid given cards."""

    def __init__(self, space: _Space, members: BoolArray) -> None:
        self.space = space
        self.size = int(members.sum())
        chosen = space.cards[members]
        self.one = np.bincount(chosen.ravel(), minlength=52).astype(np.int64)
        self.two = np.zeros((52, 52), dtype=np.int64)
        for i, j in ((0, 1), (0, 2), (1, 2)):
            np.add.at(self.two, (chosen[:, i], chosen[:, j]), 1)
            np.add.at(self.two, (chosen[:, j], chosen[:, i]), 1)
        self.three = np.zeros((52, 52, 52), dtype=np.int64)
        for i, j, k in itertools.permutations(range(3)):
            self.three[chosen[:, i], chosen[:, j], chosen[:, k]] = 1
        a, b, c = space.cards[:, 0], space.cards[:, 1], space.cards[:, 2]
        # Signed sum over the non-empty subsets T of each hand h of #{members holding T}.
        self.own = (
            -(self.one[a] + self.one[b] + self.one[c])
            + (self.two[a, b] + self.two[a, c] + self.two[b, c])
            - self.three[a, b, c]
        )

    def avoiding(self, removed: Sequence[int]) -> IntArray:
        """For every hand h of the space: members avoiding both ``removed`` and h.

        Meaningful only where h itself avoids ``removed``.
        """
        cards = list(removed)
        const = self.size
        const -= sum(int(self.one[u]) for u in cards)
        const += sum(int(self.two[u, v]) for u, v in itertools.combinations(cards, 2))
        const -= sum(int(self.three[u, v, w]) for u, v, w in itertools.combinations(cards, 3))
        result: IntArray = self.own + const
        if not cards:
            return result
        across_one = self.two[cards].sum(axis=0)
        across_pairs = np.zeros(52, dtype=np.int64)
        for u, v in itertools.combinations(cards, 2):
            across_pairs += self.three[u, v]
        across_two = self.three[cards].sum(axis=0)
        a, b, c = self.space.cards[:, 0], self.space.cards[:, 1], self.space.cards[:, 2]
        result = result + across_one[a] + across_one[b] + across_one[c]
        result = result - across_pairs[a] - across_pairs[b] - across_pairs[c]
        result = result - across_two[a, b] - across_two[a, c] - across_two[b, c]
        return np.asarray(result, dtype=np.int64)


def _canonical(masks: UIntArray) -> UIntArray:
    """The least image of each card mask under the 24 suit permutations."""
    parts = [(masks >> np.uint64(suit)) & np.uint64(_SUIT_BITS) for suit in range(4)]
    best: UIntArray | None = None
    for perm in itertools.permutations(range(4)):
        image = parts[0] << np.uint64(perm[0])
        for suit in range(1, 4):
            image = image | (parts[suit] << np.uint64(perm[suit]))
        best = image if best is None else np.minimum(best, image)
    assert best is not None
    return best


def _cards_of(mask: int) -> list[int]:
    return [code for code in range(52) if mask >> code & 1]


def _classes(space: _Space, members: BoolArray) -> list[tuple[int, int]]:
    """One representative hand index per suit class of ``members``, with the class size."""
    indices = np.flatnonzero(members)
    canon = _canonical(space.masks[indices])
    _, first, counts = np.unique(canon, return_index=True, return_counts=True)
    return [(int(indices[i]), int(n)) for i, n in zip(first, counts, strict=True)]


@dataclass(frozen=True, slots=True)
class AnteCounts:
    """House-way Ante outcomes over every ordered draw of four disjoint hands.

    Attributes:
        counts: ``(path, result)`` -> count; path ``stay``/``mulligan``, result ``win <group>``
            (group ``straight_flush``, ``three_of_a_kind``, ``straight``, ``other``),
            ``push`` or ``lose``.
        total: Every ordered draw of four disjoint hands (P, D, PM, DM).
    """

    counts: dict[tuple[str, str], int]
    total: int


def count_ante_outcomes(
    ranks: Sequence[int] = tuple(range(2, 15)), progress: bool = False
) -> AnteCounts:
    """Exact house-way Ante (and Mulligan bet) outcome counts for a deck of ``ranks`` x 4 suits.

    The full deck is ranks 2-14; a smaller deck (at least 12 cards) serves the tests.
    """
    codes = [(rank - 2) * 4 + suit for rank in sorted(set(ranks)) for suit in range(4)]
    size = len(codes)
    if size < 4 * CARDS_PER_HAND:
        raise RulesError("a deck for four hands needs at least 12 cards", cards=size)
    space = _Space.of(codes)
    strength, level = space.strength, space.level
    stays = strength >= STAY_THRESHOLD
    stands = strength >= DEALER_STANDS_THRESHOLD
    player_weak = _AvoidCounter(space, ~stays)
    dealer_weak = _AvoidCounter(space, ~stands)
    fourth = math.comb(size - 9, 3)
    third_fourth = math.comb(size - 6, 3) * fourth
    total = math.comb(size, 3) * math.comb(size - 3, 3) * third_fourth
    counts = {
        (path, result): 0
        for path in ("stay", "mulligan")
        for result in [f"win {g}" for g in _WIN_GROUPS] + ["push", "lose"]
    }

    stay_classes = _classes(space, stays)
    stand_classes = _classes(space, stands)
    steps: list[tuple[str, int, int]] = [("stay", index, n) for index, n in stay_classes]
    steps += [("stand", index, n) for index, n in stand_classes]
    steps.append(("both mulligan", -1, 0))
    for kind, index, multiplicity in iterate_with_progress(
        steps, len(steps), f"{GAME_ID} exact", progress
    ):
        if kind == "both mulligan":
            _count_both_mulligan(
                space,
                stays=stays,
                player_weak=player_weak,
                dealer_weak=dealer_weak,
                size=size,
                counts=counts,
            )
            continue
        hand = [int(card) for card in space.cards[index]]
        avoid = space.avoiding(hand)
        mine = int(strength[index])
        if kind == "stay":
            # Case 1: D stands. Case 2: D mulligans; DM weighted by the weak Ds it leaves.
            facing = avoid & stands
            weights = np.where(avoid, dealer_weak.avoiding(hand), 0)
            below = int((facing & (strength < mine)).sum()) * third_fourth
            below += int(weights[strength < mine].sum()) * fourth
            equal = int((facing & (strength == mine)).sum()) * third_fourth
            equal += int(weights[strength == mine].sum()) * fourth
            above = int((facing & (strength > mine)).sum()) * third_fourth
            above += int(weights[strength > mine].sum()) * fourth
            counts["stay", f"win {_win_group(mine >> _LEVEL_SHIFT)}"] += multiplicity * below
            counts["stay", "push"] += multiplicity * equal
            counts["stay", "lose"] += multiplicity * above
        else:
            # Case 3a: the dealer stands on this hand; PM weighted by the weak Ps it leaves.
            weights = np.where(avoid, player_weak.avoiding(hand), 0)
            wins = strength > mine
            for group_level in range(len(MulliganHand)):
                number = int(weights[wins & (level == group_level)].sum()) * fourth
                counts["mulligan", f"win {_win_group(group_level)}"] += multiplicity * number
            counts["mulligan", "push"] += (
                multiplicity * int(weights[strength == mine].sum()) * fourth
            )
            counts["mulligan", "lose"] += (
                multiplicity * int(weights[strength < mine].sum()) * fourth
            )
    return AnteCounts(counts, total)


def _count_both_mulligan(
    space: _Space,
    *,
    stays: BoolArray,
    player_weak: _AvoidCounter,
    dealer_weak: _AvoidCounter,
    size: int,
    counts: dict[tuple[str, str], int],
) -> None:
    """Case 3b: both mulligan; PM against DM, each (PM, DM) weighted by K(PM | DM)."""
    strength, level, masks = space.strength, space.level, space.masks
    weak_players = ~stays
    fourth = math.comb(size - 9, 3)

    def pairs_k(unions: UIntArray) -> IntArray:
        """K(U) for each card mask U (computed once per suit class)."""
        canon = _canonical(unions)
        unique, inverse = np.unique(canon, return_inverse=True)
        values = np.zeros(len(unique), dtype=np.int64)
        for position, mask in enumerate(unique):
            removed = _cards_of(int(mask))
            allowed = weak_players & space.avoiding(removed)
            values[position] = int(dealer_weak.avoiding(removed)[allowed].sum())
        return values[inverse.ravel()]

    pairs_total = int(pairs_k(np.zeros(1, dtype=np.uint64))[0])
    both_total = pairs_total * math.comb(size - 6, 3) * fourth

    # Ties: ordered pairs of disjoint hands of equal strength.
    order = np.argsort(strength, kind="stable")
    sorted_strength = strength[order]
    starts = np.flatnonzero(np.r_[True, sorted_strength[1:] != sorted_strength[:-1]])
    ends = np.r_[starts[1:], len(order)]
    tie_unions: list[UIntArray] = []
    for start, end in zip(starts, ends, strict=True):
        group = masks[order[start:end]]
        union = group[:, None] | group[None, :]
        disjoint = (group[:, None] & group[None, :]) == 0
        tie_unions.append(union[np.triu(disjoint, 1)])
    ties = 2 * int(pairs_k(np.concatenate(tie_unions)).sum()) if tie_unions else 0

    # Bonus wins: A of a bonus category beating B = all B minus B at least as strong as A
    # (and a B at least as strong as a straight is a straight or better itself).
    bonus = np.flatnonzero(level >= _BONUS_LEVEL)
    k_single = pairs_k(masks[bonus])
    a_masks = masks[bonus][:, None]
    b_masks = masks[bonus][None, :]
    at_least = (strength[bonus][None, :] >= strength[bonus][:, None]) & ((a_masks & b_masks) == 0)
    rows, cols = np.nonzero(at_least)
    k_pairs = pairs_k((a_masks | b_masks)[rows, cols])
    bonus_wins = 0
    for group_level in range(_BONUS_LEVEL, len(MulliganHand)):
        in_group = level[bonus] == group_level
        number = fourth * int(k_single[in_group].sum()) - int(k_pairs[in_group[rows]].sum())
        counts["mulligan", f"win {_win_group(group_level)}"] += number
        bonus_wins += number
    wins = (both_total - ties) // 2
    counts["mulligan", "win other"] += wins - bonus_wins
    counts["mulligan", "push"] += ties
    counts["mulligan", "lose"] += wins


def count_pair_plus(ranks: Sequence[int] = tuple(range(2, 15))) -> dict[MulliganHand, int]:
    """How many of the three-card hands of a ``ranks`` x 4 suits deck fall in each category."""
    codes = [(rank - 2) * 4 + suit for rank in sorted(set(ranks)) for suit in range(4)]
    space = _Space.of(codes)
    found = np.bincount(space.level, minlength=len(MulliganHand))
    return {hand: int(found[hand.level]) for hand in MulliganHand}


# --------------------------------------------------------------------------------------------
# Par sheet


def _ante_rows() -> list[tuple[str, str, Fraction]]:
    """(path, result, pays per unit of Ante, both bets on the mulligan path)."""
    rows: list[tuple[str, str, Fraction]] = []
    for path, stake in (("stay", 1), ("mulligan", 2)):
        for group in _WIN_GROUPS:
            odds = DEFAULT_PAYTABLES["ante"][group] if group != "other" else Fraction(1)
            rows.append((path, f"win {group}", stake * odds))
        rows.append((path, "push", Fraction(0)))
        rows.append((path, "lose", Fraction(-stake)))
    return rows


def _pair_plus_pays(hand: MulliganHand) -> Fraction:
    return DEFAULT_PAYTABLES["pair_plus"].get(hand.value, Fraction(-1))


def _exact_report(progress: bool) -> AnalysisReport:
    started = time.perf_counter()
    ante = count_ante_outcomes(progress=progress)
    ante_rows = [
        exact_row(f"{path} {result}", pays, ante.counts[path, result], ante.total)
        for path, result, pays in _ante_rows()
    ]
    categories = count_pair_plus()
    hands = sum(categories.values())
    pair_plus_rows = [
        exact_row(hand.value, _pair_plus_pays(hand), number, hands)
        for hand, number in categories.items()
    ]
    bets = {"ante": BetReport(ante_rows), "pair_plus": BetReport(pair_plus_rows)}
    mulligan_share = sum(
        (row.probability for row in ante_rows if row.name.startswith("mulligan")), Fraction(0)
    )
    edge = 1 - Fraction(bets["ante"].rtp or 0)
    return AnalysisReport(
        game=GAME_ID,
        method=Method.EXACT,
        bets=bets,
        seconds=time.perf_counter() - started,
        notes=[
            "ante: house way (stay with K-10-x or better, else mulligan), dealer stands on "
            "king-high or better; return per unit of Ante with the Mulligan bet's result "
            f"included (mulligan path pays both bets); all {ante.total:,} ordered draws of "
            "four hands (P, D, PM, DM), unused hands counted as drawn",
            f"ante: the player mulligans with probability {float(mulligan_share):.6f}; "
            f"house edge per unit wagered (Ante + Mulligan) "
            f"{float(edge / (1 + mulligan_share)) * 100:.4f}%",
            f"pair_plus: all {hands:,} three-card hands",
        ],
    )


def _monte_carlo_report(samples: int, seed: int, progress: bool) -> AnalysisReport:
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    table = _strength_array()
    sizes = chunk_sizes(samples)
    rows = _ante_rows()
    index_of = {(path, result): i for i, (path, result, _) in enumerate(rows)}
    ante_counts = np.zeros(len(rows), dtype=np.int64)
    pair_plus_counts = np.zeros(len(MulliganHand), dtype=np.int64)
    group_of_level = [_WIN_GROUPS.index(_win_group(lvl)) for lvl in range(len(MulliganHand))]
    win_index = {
        path: np.asarray([index_of[path, f"win {_WIN_GROUPS[g]}"] for g in group_of_level])
        for path in ("stay", "mulligan")
    }

    def strength_at(dealt: IntArray, start: int) -> IntArray:
        index = three_card.triple_index(dealt[:, start], dealt[:, start + 1], dealt[:, start + 2])
        return np.asarray(table[index], dtype=np.int64)

    for size in iterate_with_progress(sizes, len(sizes), f"{GAME_ID} monte carlo", progress):
        dealt = rng.random((size, 52)).argsort(axis=1)[:, :12].astype(np.int64)
        player, dealer = strength_at(dealt, 0), strength_at(dealt, 3)
        mulligan = player < STAY_THRESHOLD
        # The dealer's mulligan hand is the next three cards after those dealt to the player.
        dealer_second = np.where(mulligan, strength_at(dealt, 9), strength_at(dealt, 6))
        dealer_final = np.where(dealer >= DEALER_STANDS_THRESHOLD, dealer, dealer_second)
        final = np.where(mulligan, strength_at(dealt, 6), player)
        pair_plus_counts += np.bincount(player >> _LEVEL_SHIFT, minlength=len(MulliganHand))
        for path, on_path in (("stay", ~mulligan), ("mulligan", mulligan)):
            mine, theirs = final[on_path], dealer_final[on_path]
            won = mine > theirs
            ante_counts += np.bincount(
                win_index[path][mine[won] >> _LEVEL_SHIFT], minlength=len(rows)
            )
            ante_counts[index_of[path, "push"]] += int((mine == theirs).sum())
            ante_counts[index_of[path, "lose"]] += int((mine < theirs).sum())

    bets = {
        "ante": sampled_bet(
            [
                (f"{path} {result}", pays, int(ante_counts[i]))
                for i, (path, result, pays) in enumerate(rows)
            ]
        ),
        "pair_plus": sampled_bet(
            [
                (hand.value, _pair_plus_pays(hand), int(pair_plus_counts[hand.level]))
                for hand in MulliganHand
            ]
        ),
    }
    return AnalysisReport(
        game=GAME_ID,
        method=Method.MONTE_CARLO,
        bets=bets,
        seconds=time.perf_counter() - started,
        notes=[
            f"numpy default_rng(seed={seed}); house way (stay with K-10-x or better); ante "
            "per unit of Ante with the Mulligan bet's result included",
        ],
        samples=samples,
    )


def analyze(*, method: Method, samples: int, seed: int, progress: bool) -> AnalysisReport:
    """Three Card Mulligan par sheet: bets ``ante`` and ``pair_plus``.

    ``ante`` is the house way's return per unit of Ante, the Mulligan bet's result included;
    ``pair_plus`` is the bet on the original hand.

    Args:
        method: ``EXACT`` counts every ordered draw of the four hands (ante) and every
            three-card hand (Pair Plus); ``MONTE_CARLO`` deals ``samples`` rounds.
        samples: Rounds to deal for Monte Carlo (at least 2).
        seed: Seed of the Monte Carlo generator.
        progress: Show a progress bar on stderr.

    Raises:
        RulesError: Monte Carlo with fewer than two samples.
    """
    return exact_or_sampled(
        GAME_ID,
        method=method,
        samples=samples,
        seed=seed,
        progress=progress,
        exact=_exact_report,
        monte_carlo=_monte_carlo_report,
    )
