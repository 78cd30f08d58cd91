"""Break Poker: settings, the semi-wild joker, Lucky Break, the house way, side bets.

The rules are those of docs/rules/break-poker.md (restated from a game-analysis page, with the
team's binding Decisions). In short: player and dealer each get seven cards from a 53-card deck
(52 + one semi-wild joker) and set a two-card low hand and a three-card high hand, discarding
two; the low hand may not outrank the high hand. A Lucky Break (pair low, three of a kind or
straight high) beats anything that is not one. The dealer sets by the house way and must
qualify with at least K-3-2 high; the main bet pays even money.

Live-dealer form: one player hand is dealt on the felt and shared by every online player. The
result lists the main bet's outcome for **every legal setting** of that hand
(:attr:`BreakPokerRound.main`, keyed by :attr:`Setting.id`), the house-way setting flagged as
the default, and both side bets.

Everything here is pure: no I/O, no clock; the par sheet (:func:`analyze`) takes its seed from
the caller.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from controller.cards import Card, Deck, Piece, parse_cards
from controller.errors import IllegalAction, RulesError
from controller.games.base import (
    DealPlan,
    Declared,
    Face,
    GameFacts,
    GameResult,
    HandSummary,
    Slot,
    checked_cards,
    pay_odds,
)
from controller.games.break_poker.hands import (
    ACE,
    BreakBonusHand,
    HighKey,
    HouseWayStep,
    LowKey,
    Qualifier,
    break_bonus_hand,
    describe_high,
    describe_low,
    high_category_name,
    high_key,
    house_way_step,
    low_category_name,
    low_key,
    low_outranks_high,
    qualifies,
)
from controller.games.break_poker.hands import is_lucky_break as _keys_are_lucky_break
from controller.money import BetResult, Odds, PayTables

__all__ = [
    "BET_IDS",
    "BREAK_POKER",
    "CARDS_PER_HAND",
    "DEAL_PLAN",
    "DEFAULT_PAYTABLES",
    "GAME_ID",
    "BreakBonusHand",
    "BreakPoker",
    "BreakPokerRound",
    "HouseWayStep",
    "Qualifier",
    "Setting",
    "best_lucky_break",
    "check_setting",
    "dealer_qualifies",
    "high_hand_key",
    "house_way",
    "house_way_with_step",
    "is_lucky_break",
    "judged_round",
    "legal_settings",
    "low_hand_key",
    "main_bet",
    "round_result",
    "setting_outranks",
]

GAME_ID: Final = "break-poker"
BET_IDS: Final = ("main", "break_bonus", "dealer_break_bonus")
CARDS_PER_HAND: Final = 7
HAND_LABELS: Final = ("player", "dealer")

MAIN_WIN: Final = "win"
DEALER_ONLY: Final = "dealer_lucky_break"
DEALER_AND_PLAYER: Final = "both_lucky_break"

# Reasons carried by main-bet results (BetResult.reason).
REASON_NOT_QUALIFIED: Final = "dealer_not_qualified"
REASON_PLAYER_LUCKY_BREAK: Final = "player_lucky_break"
REASON_DEALER_LUCKY_BREAK: Final = "dealer_lucky_break"
REASON_BOTH_HANDS_WIN: Final = "both_hands_win"
REASON_DEALER_BOTH: Final = "dealer_beats_or_copies_both"
REASON_SPLIT: Final = "split"


# --------------------------------------------------------------------------------------------
# Hands and settings


def low_hand_key(cards: Sequence[Card]) -> LowKey:
    """The strength key of a two-card low hand (the joker is an ace); higher beats lower.

    Raises:
        RulesError: Not two cards.
    """
    _check_count(cards, 2, "low")
    return low_key(cards[0].rank, cards[1].rank)


def high_hand_key(cards: Sequence[Card]) -> HighKey:
    """The strength key of a three-card high hand (the joker makes its best hand).

    Raises:
        RulesError: Not three cards.
    """
    _check_count(cards, 3, "high")
    return high_key(cards[0].rank, cards[1].rank, cards[2].rank)


def _check_count(cards: Sequence[Card], count: int, hand: str) -> None:
    """Refuse a ``hand`` (``low``, ``high``) that is not ``count`` cards.

    Raises:
        RulesError: Not ``count`` cards.
    """
    if len(cards) != count:
        raise RulesError(
            f"a {hand} hand has {count} cards, got {len(cards)}",
            cards=[str(card) for card in cards],
        )


def _canonical(cards: Iterable[Card]) -> tuple[Card, ...]:
    """Cards in the order ids and results list them: joker first, then by rank, then suit."""
    return tuple(sorted(cards, reverse=True))


@dataclass(frozen=True, slots=True)
class Setting:
    """One way of setting seven cards: a low hand, a high hand and two discards.

    Build settings with :meth:`of` (or take them from :func:`legal_settings`), which puts
    each hand's cards in canonical order so that equal settings compare equal.

    Attributes:
        low: The two-card low hand.
        high: The three-card high hand.
        discards: The two cards that do not play.
    """

    low: tuple[Card, Card]
    high: tuple[Card, Card, Card]
    discards: tuple[Card, ...]

    @classmethod
    def of(
        cls,
        low: Iterable[Card] | str,
        high: Iterable[Card] | str,
        discards: Iterable[Card] | str = (),
    ) -> Setting:
        """A setting with each hand's cards in canonical order; notation strings accepted.

        No check is made here that the hands have the right sizes; :func:`check_setting`
        does that against the seven dealt cards.

        Raises:
            NotationError: A string that is not cards.
        """
        low_cards = _canonical(parse_cards(low) if isinstance(low, str) else low)
        high_cards = _canonical(parse_cards(high) if isinstance(high, str) else high)
        rest = _canonical(parse_cards(discards) if isinstance(discards, str) else discards)
        return cls(low_cards, high_cards, rest)  # type: ignore[arg-type]

    @property
    def id(self) -> str:
        """A stable id: the low cards, a dash, the high cards (``"KsKd-JK7c7h"``)."""
        return "".join(map(str, self.low)) + "-" + "".join(map(str, self.high))

    @property
    def low_key(self) -> LowKey:
        """The low hand's strength key."""
        return low_hand_key(self.low)

    @property
    def high_key(self) -> HighKey:
        """The high hand's strength key."""
        return high_hand_key(self.high)

    def to_wire(self) -> dict[str, Any]:
        """JSON form: id, the three card lists and both hands' descriptions."""
        return {
            "id": self.id,
            "low": [str(card) for card in self.low],
            "high": [str(card) for card in self.high],
            "discards": [str(card) for card in self.discards],
            "low_hand": describe_low(self.low_key),
            "high_hand": describe_high(self.high_key),
            "lucky_break": is_lucky_break(self),
        }

    def __str__(self) -> str:
        low = " ".join(map(str, self.low))
        high = " ".join(map(str, self.high))
        return f"low {low} / high {high}"


def setting_outranks(setting: Setting) -> bool:
    """Whether the setting's low hand outranks its high hand (which makes it illegal)."""
    return low_outranks_high(setting.low_key, setting.high_key)


def is_lucky_break(setting: Setting) -> bool:
    """Whether a setting is a Lucky Break: a pair low and three of a kind or a straight high."""
    return _keys_are_lucky_break(setting.low_key, setting.high_key)


def _check_seven(cards: Sequence[Piece], hand: str) -> tuple[Card, ...]:
    """Check seven distinct cards of the 53-card deck.

    Raises:
        RulesError: Wrong count, a tile, or a card repeated.
    """
    return checked_cards(cards, CARDS_PER_HAND, f"the {hand} hand ", game=GAME_ID, hand=hand)


_SPLITS: Final = tuple(
    (high, tuple(index for index in range(7) if index not in high and index not in low), low)
    for high in itertools.combinations(range(7), 3)
    for low in itertools.combinations([index for index in range(7) if index not in high], 2)
)
"""For seven positions: (high positions, discard positions, low positions), 35 x 6 = 210."""


def _all_settings(cards: Sequence[Card]) -> list[Setting]:
    ordered = _canonical(cards)
    settings = []
    for high, discards, low in _SPLITS:
        settings.append(
            Setting(
                (ordered[low[0]], ordered[low[1]]),
                (ordered[high[0]], ordered[high[1]], ordered[high[2]]),
                tuple(ordered[index] for index in discards),
            )
        )
    return settings


def legal_settings(seven: Sequence[Piece]) -> list[Setting]:
    """Every legal setting of seven cards, in a stable order.

    All 210 ways (35 high hands x 6 low hands from the other four cards) are considered, one
    per choice of physical cards: settings that differ only by cards of equal rank are *not*
    merged (they always have equal results), so any setting a player submits is found by its
    :attr:`Setting.id` without normalising suits. Settings whose low hand outranks the high
    hand are left out.

    Raises:
        RulesError: Not seven distinct cards.
    """
    cards = _check_seven(seven, "player")
    return [setting for setting in _all_settings(cards) if not setting_outranks(setting)]


def check_setting(seven: Sequence[Piece], setting: Setting) -> Setting:
    """Check a setting submitted for seven cards, and return it in canonical form.

    Raises:
        RulesError: ``seven`` is not seven distinct cards.
        IllegalAction: The setting is not legal; the reason says why (wrong sizes, a card
            that is not in the hand or is used twice, or a low hand outranking the high).
    """
    cards = _check_seven(seven, "player")
    action = "set hand"
    if len(setting.low) != 2:
        raise IllegalAction(
            action,
            f"the low hand needs 2 cards, got {len(setting.low)}",
            game=GAME_ID,
            low=[str(card) for card in setting.low],
        )
    if len(setting.high) != 3:
        raise IllegalAction(
            action,
            f"the high hand needs 3 cards, got {len(setting.high)}",
            game=GAME_ID,
            high=[str(card) for card in setting.high],
        )
    used = list(setting.low) + list(setting.high)
    for card in used:
        if card not in cards:
            raise IllegalAction(
                action, f"{card} is not in the player hand", game=GAME_ID, card=str(card)
            )
        if used.count(card) > 1:
            raise IllegalAction(action, f"{card} is used twice", game=GAME_ID, card=str(card))
    discards = _canonical(card for card in cards if card not in used)
    if setting.discards and _canonical(setting.discards) != discards:
        raise IllegalAction(
            action,
            "the discards must be the two cards in neither hand: " + " ".join(map(str, discards)),
            game=GAME_ID,
            discards=[str(card) for card in setting.discards],
        )
    normal = Setting.of(setting.low, setting.high, discards)
    low, high = normal.low_key, normal.high_key
    if low_outranks_high(low, high):
        raise IllegalAction(
            action,
            f"the low hand ({describe_low(low)}) outranks the high hand ({describe_high(high)})",
            game=GAME_ID,
            setting=normal.id,
        )
    return normal


# --------------------------------------------------------------------------------------------
# The house way


def _best_high(candidates: Sequence[Setting]) -> Setting:
    """Decisions' tie rule: of several settings, the one with the highest high hand.

    Settings that still tie (same ranks, other suits) give the same results; the first in
    :func:`legal_settings` order is taken so that the choice is deterministic.
    """
    return max(candidates, key=lambda setting: setting.high_key)


def _highest_low_then_high(candidates: Sequence[Setting]) -> Setting:
    best_low = max(setting.low_key for setting in candidates)
    return _best_high([setting for setting in candidates if setting.low_key == best_low])


def house_way_with_step(seven: Sequence[Piece]) -> tuple[Setting, int]:
    """The house-way setting and the number (1-7) of the rule-page step that chose it.

    The seven steps are applied exactly as written on the rule page; where a step leaves
    several settings the one with the highest high hand is taken (Decisions).

    Raises:
        RulesError: Not seven distinct cards.
    """
    cards = _check_seven(seven, "player")
    settings = [setting for setting in _all_settings(cards) if not setting_outranks(setting)]
    by_step: dict[HouseWayStep, list[Setting]] = {}
    for setting in settings:
        step = house_way_step(setting.low_key, setting.high_key)
        by_step.setdefault(step, []).append(setting)

    # Steps 1-4: a pair (steps 1, 2) or a no-pair low hand (3, 4) with three of a kind or a
    # straight high, keeping the highest possible pair / two cards as the low hand.
    for step in (
        HouseWayStep.PAIR_TRIPS,
        HouseWayStep.PAIR_STRAIGHT,
        HouseWayStep.NO_PAIR_TRIPS,
        HouseWayStep.NO_PAIR_STRAIGHT,
    ):
        if by_step.get(step):
            return _highest_low_then_high(by_step[step]), step.number

    # Step 5: a pair and a pair, keeping the second-highest pair as the low hand.
    candidates = by_step.get(HouseWayStep.PAIR_PAIR, [])
    if candidates:
        pair_ranks = sorted(
            {setting.low_key[1] for setting in candidates}
            | {setting.high_key[1] for setting in candidates},
            reverse=True,
        )
        second = pair_ranks[1] if len(pair_ranks) > 1 else pair_ranks[0]
        keeping = [setting for setting in candidates if setting.low_key[1] == second]
        return _best_high(keeping or candidates), HouseWayStep.PAIR_PAIR.number

    step = HouseWayStep.NO_PAIR_PAIR
    if by_step.get(step):
        return _highest_low_then_high(by_step[step]), step.number

    # Step 7: the second- and third-highest cards as the low hand.
    candidates = by_step.get(HouseWayStep.HIGH_CARDS, [])
    ranks = sorted((card.rank or ACE for card in cards), reverse=True)
    wanted = ranks[1:3]
    keeping = [
        setting
        for setting in candidates
        if sorted((card.rank or ACE for card in setting.low), reverse=True) == wanted
    ]
    if not keeping:
        # Cannot happen: step 7 is reached only with seven different ranks and no joker, and
        # then the second and third cards low with the top card high is always legal.
        keeping = candidates
    return _best_high(keeping), HouseWayStep.HIGH_CARDS.number


def house_way(seven: Sequence[Piece]) -> Setting:
    """The house-way setting of seven cards (the dealer's, and the players' default).

    Raises:
        RulesError: Not seven distinct cards.
    """
    return house_way_with_step(seven)[0]


def dealer_qualifies(setting: Setting, qualifier: Qualifier = Qualifier.K32) -> bool:
    """Whether a (house-way) setting qualifies the dealer.

    Args:
        setting: The dealer's setting.
        qualifier: The reading of the rule: :attr:`Qualifier.K32` (as written: high hand at
            least K-3-2, ace high) or :attr:`Qualifier.NEEDS_KING` (the published table's: a
            high-card setting without a king does not qualify).
    """
    return qualifies(setting.high_key, setting.low_key, qualifier)


def best_lucky_break(seven: Sequence[Piece]) -> BreakBonusHand:
    """The best Lucky Break the seven cards can form, as a Break Bonus line.

    "Best" is the highest line of the Break Bonus table (five aces, five of a kind, pair with
    three of a kind, pair with Q-K-A, pair with another straight), whatever setting is played.

    Raises:
        RulesError: Not seven distinct cards.
    """
    cards = _check_seven(seven, "player")
    best = BreakBonusHand.NONE
    for setting in _all_settings(cards):
        best = max(best, break_bonus_hand(setting.low_key, setting.high_key))
    return best


# --------------------------------------------------------------------------------------------
# Settlement


def _default_paytables() -> dict[str, dict[str, Odds]]:
    return {
        "main": {MAIN_WIN: Fraction(1)},
        "break_bonus": {
            BreakBonusHand.FIVE_ACES.outcome: Fraction(200),
            BreakBonusHand.FIVE_OF_A_KIND.outcome: Fraction(100),
            BreakBonusHand.PAIR_TRIPS.outcome: Fraction(6),
            BreakBonusHand.PAIR_QKA.outcome: Fraction(3),
            BreakBonusHand.PAIR_STRAIGHT.outcome: Fraction(1),
        },
        "dealer_break_bonus": {DEALER_ONLY: Fraction(1), DEALER_AND_PLAYER: Fraction(4)},
    }


DEFAULT_PAYTABLES: Final = _default_paytables()
"""Pay tables of the rule page: bet id -> outcome -> profit per unit staked."""


def _odds(paytables: PayTables, bet: str, outcome: str) -> Odds:
    return pay_odds(GAME_ID, paytables, bet, outcome)


def main_bet(
    player: Setting,
    dealer: Setting,
    paytables: PayTables | None = None,
    *,
    dealer_qualified: bool | None = None,
) -> BetResult:
    """The main bet of one player setting against the dealer's setting.

    Non-qualifying dealer: push. Else Lucky Break rules first (one side only), then both
    hands win (even money), the dealer beats or copies both (lose), otherwise push.

    Args:
        player: The player's setting (assumed legal).
        dealer: The dealer's house-way setting.
        paytables: Pay tables (the rule page's by default); ``main`` needs ``win``.
        dealer_qualified: Whether the dealer qualified; judged from ``dealer`` when omitted.

    Raises:
        RulesError: The pay table lacks ``main``/``win``.
    """
    tables = DEFAULT_PAYTABLES if paytables is None else paytables
    if dealer_qualified is None:
        dealer_qualified = dealer_qualifies(dealer)
    if not dealer_qualified:
        return BetResult.push(REASON_NOT_QUALIFIED)
    p_low, p_high = player.low_key, player.high_key
    d_low, d_high = dealer.low_key, dealer.high_key
    player_lucky = _keys_are_lucky_break(p_low, p_high)
    dealer_lucky = _keys_are_lucky_break(d_low, d_high)
    if dealer_lucky and not player_lucky:
        return BetResult.lose(REASON_DEALER_LUCKY_BREAK)
    if player_lucky and not dealer_lucky:
        return BetResult.win(_odds(tables, "main", MAIN_WIN), REASON_PLAYER_LUCKY_BREAK)
    if p_low > d_low and p_high > d_high:
        return BetResult.win(_odds(tables, "main", MAIN_WIN), REASON_BOTH_HANDS_WIN)
    if d_low >= p_low and d_high >= p_high:
        return BetResult.lose(REASON_DEALER_BOTH)
    return BetResult.push(REASON_SPLIT)


def _break_bonus(best: BreakBonusHand, paytables: PayTables) -> BetResult:
    if best is BreakBonusHand.NONE:
        return BetResult.lose(best.outcome)
    return BetResult.win(_odds(paytables, "break_bonus", best.outcome), best.outcome)


def _dealer_break_bonus(dealer_lucky: bool, player_lucky: bool, paytables: PayTables) -> BetResult:
    if not dealer_lucky:
        return BetResult.lose("no_dealer_lucky_break")
    outcome = DEALER_AND_PLAYER if player_lucky else DEALER_ONLY
    return BetResult.win(_odds(paytables, "dealer_break_bonus", outcome), outcome)


@dataclass(frozen=True, slots=True)
class BreakPokerRound:
    """The result of a round in the shared-hand live form.

    Attributes:
        player_cards: The shared player hand, as dealt.
        dealer_cards: The dealer's seven cards, as dealt.
        dealer_setting: The dealer's house-way setting.
        dealer_step: The house-way step (1-7) that set the dealer's hand.
        dealer_qualified: Whether the dealer qualified under ``dealer_qualifier``.
        house_way: The house-way setting of the player hand (the default for players who do
            not set).
        main: For every legal setting of the player hand (by :attr:`Setting.id`, in
            :func:`legal_settings` order), the main bet's result.
        settings: Every legal setting, by id.
        player_best_lucky_break: Best Lucky Break of the player's seven cards.
        break_bonus: The Break Bonus result (the same for every player).
        dealer_break_bonus: The Dealer Break Bonus result (the same for every player).
        dealer_qualifier: The reading of the qualification rule the round was judged by.
    """

    player_cards: tuple[Card, ...]
    dealer_cards: tuple[Card, ...]
    dealer_setting: Setting
    dealer_step: int
    dealer_qualified: bool
    house_way: Setting
    main: Mapping[str, BetResult]
    settings: Mapping[str, Setting]
    player_best_lucky_break: BreakBonusHand
    break_bonus: BetResult
    dealer_break_bonus: BetResult
    dealer_qualifier: Qualifier = Qualifier.K32

    @property
    def default_setting_id(self) -> str:
        """The id of the house-way setting: the default for players who do not set."""
        return self.house_way.id

    @property
    def default_main(self) -> BetResult:
        """The main bet's result for the house-way setting."""
        return self.main[self.house_way.id]

    def main_for(self, setting: Setting | str | None) -> BetResult:
        """The main bet's result of a player's setting (``None``: the house way).

        Raises:
            IllegalAction: The setting (or id) is not a legal setting of the player hand.
        """
        if setting is None:
            return self.default_main
        if isinstance(setting, str):
            if setting not in self.main:
                raise IllegalAction(
                    "set hand",
                    f"{setting!r} is not the id of a legal setting of the player hand",
                    game=GAME_ID,
                    setting=setting,
                )
            return self.main[setting]
        return self.main[check_setting(self.player_cards, setting).id]

    def settle(self, setting: Setting | str | None = None) -> dict[str, BetResult]:
        """Every bet of one player who chose ``setting`` (``None``: the house way).

        Raises:
            IllegalAction: The setting is not legal.
        """
        return {
            "main": self.main_for(setting),
            "break_bonus": self.break_bonus,
            "dealer_break_bonus": self.dealer_break_bonus,
        }

    def to_details(self) -> dict[str, Any]:
        """JSON form for results messages."""
        return {
            "player_cards": [str(card) for card in self.player_cards],
            "dealer_cards": [str(card) for card in self.dealer_cards],
            "dealer_setting": self.dealer_setting.to_wire(),
            "dealer_house_way_step": self.dealer_step,
            "dealer_qualified": self.dealer_qualified,
            "dealer_qualifier": self.dealer_qualifier.value,
            "default_setting": self.house_way.id,
            "main_by_setting": {key: result.to_wire() for key, result in self.main.items()},
            "player_best_lucky_break": self.player_best_lucky_break.outcome,
            "break_bonus": self.break_bonus.to_wire(),
            "dealer_break_bonus": self.dealer_break_bonus.to_wire(),
        }


def round_result(
    player_seven: Sequence[Piece],
    dealer_seven: Sequence[Piece],
    paytables: PayTables | None = None,
    qualifier: Qualifier = Qualifier.K32,
) -> BreakPokerRound:
    """Judge a shared-hand round.

    The result holds the dealer's house way and qualification (read by ``qualifier``), the
    main bet of every legal setting of the player hand, the default (house-way) setting, and
    both side bets.

    Raises:
        RulesError: Either hand is not seven distinct cards, a card is in both hands, or a
            pay table lacks a needed entry.
    """
    tables = DEFAULT_PAYTABLES if paytables is None else paytables
    player = _check_seven(player_seven, "player")
    dealer = _check_seven(dealer_seven, "dealer")
    both = set(player) & set(dealer)
    if both:
        names = sorted(str(card) for card in both)
        raise RulesError(
            f"{', '.join(names)} dealt to both the player and the dealer",
            game=GAME_ID,
            cards=names,
        )
    dealer_setting, dealer_step = house_way_with_step(dealer)
    qualified = dealer_qualifies(dealer_setting, qualifier)
    settings = legal_settings(player)
    main = {
        setting.id: main_bet(setting, dealer_setting, tables, dealer_qualified=qualified)
        for setting in settings
    }
    player_best = best_lucky_break(player)
    dealer_lucky = is_lucky_break(dealer_setting)
    return BreakPokerRound(
        player_cards=player,
        dealer_cards=dealer,
        dealer_setting=dealer_setting,
        dealer_step=dealer_step,
        dealer_qualified=qualified,
        house_way=house_way(player),
        main=main,
        settings={setting.id: setting for setting in settings},
        player_best_lucky_break=player_best,
        break_bonus=_break_bonus(player_best, tables),
        dealer_break_bonus=_dealer_break_bonus(
            dealer_lucky, player_best is not BreakBonusHand.NONE, tables
        ),
        dealer_qualifier=qualifier,
    )


# --------------------------------------------------------------------------------------------
# The game object


def _deal_plan() -> DealPlan:
    player = [Slot(f"P{index}", "player") for index in range(1, CARDS_PER_HAND + 1)]
    dealer = [Slot(f"D{index}", "dealer", Face.HIDDEN) for index in range(1, CARDS_PER_HAND + 1)]
    return DealPlan(tuple(player + dealer))


DEAL_PLAN: Final = _deal_plan()
"""P1-P7 (the shared player hand, face up) then D1-D7 (the dealer's, hidden until the reveal).

The rule page lets the table deal alternately or in blocks; the controller checks the count
of each hand, not the order, so a table that deals alternately maps its reads to these slots
by hand.
"""


def _summary(setting: Setting) -> HandSummary:
    low, high = setting.low_key, setting.high_key
    if _keys_are_lucky_break(low, high):
        category = "lucky_break"
    else:
        category = f"{low_category_name(low)}+{high_category_name(high)}"
    return HandSummary(
        category=category,
        description=f"low {describe_low(low)}, high {describe_high(high)}",
    )


def judged_round(result: BreakPokerRound) -> GameResult:
    """A judged round as a :class:`GameResult` (the house-way player's winner).

    ``winner`` is ``"player"``, ``"dealer"`` or ``"tie"`` (any push, including a dealer who
    does not qualify); the hands are the house-way summaries; the details
    :meth:`BreakPokerRound.to_details`.
    """
    outcome = result.default_main.outcome.value
    return GameResult(
        winner={"win": "player", "lose": "dealer"}.get(outcome, "tie"),
        hands={"player": _summary(result.house_way), "dealer": _summary(result.dealer_setting)},
        details=result.to_details(),
    )


FACTS: Final = GameFacts(
    id=GAME_ID,
    name="Break Poker",
    new_deck=Deck.with_joker,
    bet_ids=BET_IDS,
    new_paytables=_default_paytables,
)
"""What the game is: its id, name, deck, bet types and pay tables."""


class BreakPoker(Declared):
    """Break Poker, shared-hand live form: player P1-P7 face up, dealer D1-D7 hidden.

    :meth:`resolve` judges the round with the house way for the player; the result's
    ``details`` carry the outcome of the main bet for every legal setting
    (``main_by_setting``), so each player's bet is settled by looking up that player's
    setting (:meth:`BreakPokerRound.settle`).
    """

    facts = FACTS

    @property
    def deal_plan(self) -> DealPlan:
        """P1-P7 then D1-D7 (hidden)."""
        return DEAL_PLAN

    def resolve(self, hands: Mapping[str, Sequence[Piece]]) -> GameResult:
        """Judge the round; ``winner`` is that of the house-way setting's main bet.

        Args:
            hands: ``{"player": seven cards, "dealer": seven cards}``.

        Returns:
            Winner ``"player"``, ``"dealer"`` or ``"tie"`` (push, including a dealer who does
            not qualify), each hand's house-way summary, and :meth:`BreakPokerRound.to_details`
            as details.

        Raises:
            RulesError: Hands missing or extra, a wrong count, a repeated card.
        """
        if set(hands) != set(HAND_LABELS):
            raise RulesError(
                f"Break Poker needs hands player and dealer, got {sorted(hands)}",
                game=GAME_ID,
                hands=sorted(hands),
            )
        return judged_round(round_result(hands["player"], hands["dealer"]))

    def settle(self, result: GameResult, paytables: PayTables) -> dict[str, BetResult]:
        """Settle every bet for a player who plays the house way, in :attr:`bet_ids` order.

        Raises:
            RulesError: The result does not hold the dealt cards, or a pay-table entry is
                missing.
        """
        try:
            player = parse_cards(result.details["player_cards"])
            dealer = parse_cards(result.details["dealer_cards"])
        except (KeyError, TypeError) as exc:
            raise RulesError(
                "a Break Poker result must carry player_cards and dealer_cards",
                game=GAME_ID,
            ) from exc
        try:
            qualifier = Qualifier(result.details.get("dealer_qualifier", Qualifier.K32))
        except ValueError as exc:
            raise RulesError(
                f"unknown dealer_qualifier {result.details.get('dealer_qualifier')!r}",
                game=GAME_ID,
            ) from exc
        return round_result(player, dealer, paytables, qualifier).settle(None)


BREAK_POKER: Final = BreakPoker()
