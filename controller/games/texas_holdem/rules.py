"""Texas Hold'em: one hand as an immutable state machine, its deal plan, and its par sheet.

Rules: /work/shared/rules/texas-holdem.md; the decisions taken where the page is silent are in
``docs/rules/texas-holdem.md``.

A hand starts with :func:`start_hand` (seats, stacks, button; the blinds are posted at once)
and moves on two kinds of events, both recorded in its history:

* :class:`Deal` -- the next card of the deal plan (hole cards one at a time clockwise from the
  small blind, twice around; then optional burns, flop x3, turn, river);
* :class:`Action` -- a seat's fold / check / call / bet (a pot share) / raise (a multiple of the
  current bet) / all-in.

:meth:`HoldemState.apply` checks an event completely before building the next state and never
changes the state it was called on (the state is a frozen dataclass), so a refused event --
:class:`~controller.errors.IllegalAction` for actions, :class:`~controller.errors.PieceRefused`
for cards -- leaves everything as it was. When the hand ends (all but one folded, or the river
betting closed) the state carries its :class:`Settlement`: pots by contribution level, winners,
odd chips, the uncalled part returned, and every seat's final stack. :func:`replay` rebuilds
the final state from a :class:`HandHistory`.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from controller.cards import Card, Deck
from controller.errors import ConfigError, IllegalAction, RulesError
from controller.games.base import DealPlan, Face, GameFacts, Slot
from controller.games.poker.hands import category_of, describe

GAME_ID: Final = "texas-holdem"
GAME_NAME: Final = "Texas Hold'em"
BOARD_HAND: Final = "board"
BURN_HAND: Final = "burn"
DEMO_SEATS: Final = 6
"""Seats at a table whose options name none (the live options' default)."""

FACTS: Final = GameFacts(
    id=GAME_ID,
    name=GAME_NAME,
    new_deck=Deck.standard,
    bet_ids=(),
    new_paytables=dict,
)
"""What the game is: a poker game between the seats, with no house bets (no pay tables)."""


# --------------------------------------------------------------------------------------------
# Configuration.


@dataclass(frozen=True, slots=True)
class HoldemConfig:
    """A table's Hold'em settings.

    Attributes:
        small_blind: Chips the small blind posts.
        big_blind: Chips the big blind posts; also the smallest bet.
        raise_multiples: The raises allowed, as multiples of the current bet (``2`` = "raise to
            2x"); the smallest is the minimum raise.
        bet_shares: The bets allowed when nobody has bet on the street, as percentages of the
            pot (``33``, ``50``, ``100``); the smallest is the minimum bet.
        seats: How many seats the table has, numbered 1 to ``seats`` clockwise.
        burns: Whether the dealing procedure burns a card before the flop, turn and river.
    """

    small_blind: int = 50
    big_blind: int = 100
    raise_multiples: tuple[int, ...] = (2, 3)
    bet_shares: tuple[int, ...] = (33, 50, 100)
    seats: int = 9
    burns: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.small_blind <= self.big_blind:
            raise ConfigError(
                f"blinds {self.small_blind}/{self.big_blind} must be positive with SB <= BB",
                field="small_blind/big_blind",
            )
        if not self.raise_multiples or any(
            not isinstance(m, int) or m < 2 for m in self.raise_multiples
        ):
            raise ConfigError(
                f"raise multiples {self.raise_multiples} must be whole numbers of at least 2",
                field="raise_multiples",
            )
        if not self.bet_shares or any(not isinstance(s, int) or s <= 0 for s in self.bet_shares):
            raise ConfigError(
                f"bet shares {self.bet_shares} must be positive whole percentages",
                field="bet_shares",
            )
        if not 2 <= self.seats <= 23:
            raise ConfigError(
                f"{self.seats} seats: a 52-card deck serves 2 to 23 seats", field="seats"
            )

    @property
    def min_multiple(self) -> int:
        """The smallest raise multiple: a raise to less is not a full raise."""
        return min(self.raise_multiples)

    def bet_amount(self, pot: int, share: int) -> int:
        """Chips a bet of ``share`` percent of ``pot`` puts in: rounded down, at least one BB."""
        return max(self.big_blind, pot * share // 100)


# --------------------------------------------------------------------------------------------
# Events.


class Street(enum.IntEnum):
    """Where the hand is."""

    PREFLOP = 0
    FLOP = 1
    TURN = 2
    RIVER = 3
    SHOWDOWN = 4
    """Betting is over (showdown reached, or everyone else folded)."""


class ActionKind(enum.StrEnum):
    """What a seat can do."""

    FOLD = "fold"
    CHECK = "check"
    CALL = "call"
    BET = "bet"
    RAISE = "raise"
    ALL_IN = "all-in"


@dataclass(frozen=True, slots=True)
class Action:
    """A seat's action.

    Attributes:
        seat: The seat acting.
        kind: Fold, check, call, bet, raise or all-in.
        size: For a bet the pot share in percent (one of the configured ``bet_shares``); for a
            raise the multiple of the current bet (one of ``raise_multiples``); else ``None``.
    """

    seat: int
    kind: ActionKind
    size: int | None = None

    def __str__(self) -> str:
        if self.kind is ActionKind.BET:
            return f"seat {self.seat} bet {self.size}%"
        if self.kind is ActionKind.RAISE:
            return f"seat {self.seat} raise {self.size}x"
        return f"seat {self.seat} {self.kind.value}"


@dataclass(frozen=True, slots=True)
class Deal:
    """The next card of the deal plan, as read by a scanner.

    Attributes:
        card: The card.
    """

    card: Card


Event = Action | Deal


# --------------------------------------------------------------------------------------------
# State.


@dataclass(frozen=True, slots=True)
class SeatState:
    """One seat in the hand.

    Attributes:
        seat: Seat number.
        stack: Chips behind (not yet put in).
        committed: Chips put in during this hand (blinds included).
        street_bet: Chips put in on the current street.
        folded: Whether the seat has folded.
        hole: The hole cards dealt so far.
    """

    seat: int
    stack: int
    committed: int = 0
    street_bet: int = 0
    folded: bool = False
    hole: tuple[Card, ...] = ()

    @property
    def all_in(self) -> bool:
        """Whether the seat has no chips behind but is still in the hand."""
        return self.stack == 0 and not self.folded

    @property
    def can_act(self) -> bool:
        """Whether the seat still takes part in betting."""
        return not self.folded and self.stack > 0


@dataclass(frozen=True, slots=True)
class Pot:
    """One pot of the settlement.

    Attributes:
        amount: Chips in the pot.
        level: The contribution level that closes it (each eligible seat put in at least this).
        eligible: Seats that contributed to it and did not fold, clockwise from the button.
        winners: The seats it went to (the only eligible seat, or the best hands).
        shares: Chips each winner received from it (odd chips already placed).
    """

    amount: int
    level: int
    eligible: tuple[int, ...]
    winners: tuple[int, ...]
    shares: Mapping[int, int]


@dataclass(frozen=True, slots=True)
class Settlement:
    """How a finished hand's chips were distributed.

    Attributes:
        pots: The contested pots, from the smallest contribution level.
        returned: The uncalled part of a bet, by seat (nobody matched it).
        payouts: Everything each seat received (pots and returns).
        stacks: Each seat's stack after the hand.
        strengths: Hand strength of each seat shown down (none when all but one folded).
        descriptions: The shown hands for people.
    """

    pots: tuple[Pot, ...]
    returned: Mapping[int, int]
    payouts: Mapping[int, int]
    stacks: Mapping[int, int]
    strengths: Mapping[int, int] = field(default_factory=dict)
    descriptions: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HandHistory:
    """Everything needed to replay a hand.

    Attributes:
        config: The table's settings.
        stacks: Each seat's stack before the blinds.
        button: The button's seat.
        events: Every card and action, in order.
    """

    config: HoldemConfig
    stacks: Mapping[int, int]
    button: int
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class HoldemState:
    """A hand of Hold'em at one moment. Immutable: :meth:`apply` returns a new state.

    Attributes:
        config: The table's settings.
        button: The button's seat.
        small_blind_seat: The seat that posted the small blind.
        big_blind_seat: The seat that posted the big blind.
        seats: The seats in the hand, clockwise from the first seat left of the button (so the
            button is last).
        street: The current street (``SHOWDOWN`` once betting is over).
        plan: The full deal plan of this hand.
        dealt: How many cards of the plan have been dealt.
        board: Community cards dealt so far.
        burned: Burn cards dealt so far.
        level: The highest street bet (what a call matches).
        acted: Seats that have acted since the last full bet or raise (and so may not re-raise
            an incomplete all-in raise).
        to_act: The seat whose turn it is, or ``None`` while a card is awaited or when over.
        initial_stacks: Stacks before the blinds.
        events: The history so far.
        settlement: How the chips went, once the hand is over.
    """

    config: HoldemConfig
    button: int
    small_blind_seat: int
    big_blind_seat: int
    seats: tuple[SeatState, ...]
    street: Street
    plan: DealPlan
    dealt: int
    board: tuple[Card, ...]
    burned: tuple[Card, ...]
    level: int
    acted: frozenset[int]
    to_act: int | None
    initial_stacks: Mapping[int, int]
    events: tuple[Event, ...] = ()
    settlement: Settlement | None = None

    # ---- reading ---------------------------------------------------------------------------

    def seat(self, number: int) -> SeatState:
        """The state of one seat.

        Raises:
            RulesError: The seat is not in this hand.
        """
        for seat in self.seats:
            if seat.seat == number:
                return seat
        raise RulesError(f"seat {number} is not in this hand", seat=number)

    @property
    def pot(self) -> int:
        """All chips put in so far."""
        return sum(seat.committed for seat in self.seats)

    @property
    def is_complete(self) -> bool:
        """Whether the hand is over and settled."""
        return self.settlement is not None

    @property
    def next_slot(self) -> Slot | None:
        """The slot the next card fills, or ``None`` when no card is awaited now."""
        if self.is_complete or self.to_act is not None or self.dealt >= len(self.plan):
            return None
        return self.plan.slots[self.dealt]

    @property
    def history(self) -> HandHistory:
        """The hand's history so far, for :func:`replay`."""
        return HandHistory(self.config, dict(self.initial_stacks), self.button, self.events)

    def legal_actions(self) -> list[Action]:
        """Every action the seat to act may take now (empty when nobody is to act)."""
        if self.to_act is None:
            return []
        seat = self.to_act
        candidates = [
            Action(seat, ActionKind.FOLD),
            Action(seat, ActionKind.CHECK),
            Action(seat, ActionKind.CALL),
            *(Action(seat, ActionKind.BET, share) for share in self.config.bet_shares),
            *(Action(seat, ActionKind.RAISE, m) for m in self.config.raise_multiples),
            Action(seat, ActionKind.ALL_IN),
        ]
        legal = []
        for action in candidates:
            try:
                self._check_action(action)
            except IllegalAction:
                continue
            legal.append(action)
        return legal

    # ---- changing --------------------------------------------------------------------------

    def apply(self, event: Event) -> HoldemState:
        """The state after ``event``; this state is left unchanged.

        Raises:
            IllegalAction: The action is not legal now (the reason says why), or a card came
                when an action was awaited, or the hand is over.
            PieceRefused: The card cannot be in this hand (a duplicate or the joker).
        """
        if isinstance(event, Deal):
            return self._deal(event)
        return self._act(event)

    def _deal(self, event: Deal) -> HoldemState:
        slot = self.next_slot
        if slot is None:
            if self.is_complete:
                reason = "the hand is over"
            elif self.to_act is not None:
                reason = f"waiting for seat {self.to_act} to act"
            else:  # pragma: no cover - every other state awaits a card or an action
                reason = "no card expected"
            raise IllegalAction(f"deal {event.card}", reason, card=str(event.card))
        seen = [card for seat in self.seats for card in seat.hole] + [*self.board, *self.burned]
        Deck.standard().check_can_add(seen, event.card)
        seats, board, burned = self.seats, self.board, self.burned
        if slot.hand == BOARD_HAND:
            board = (*board, event.card)
        elif slot.hand == BURN_HAND:
            burned = (*burned, event.card)
        else:
            number = _seat_of_hand(slot.hand)
            seats = tuple(
                replace(s, hole=(*s.hole, event.card)) if s.seat == number else s for s in seats
            )
        state = replace(
            self,
            seats=seats,
            board=board,
            burned=burned,
            dealt=self.dealt + 1,
            events=(*self.events, event),
        )
        return state._after_cards()

    def _after_cards(self) -> HoldemState:
        """Open betting when the cards a street needs are all dealt."""
        needed = _cards_before_betting(self.plan, self.street)
        if self.dealt < needed:
            return self
        return self._open_street(self.street)

    def _open_street(self, street: Street) -> HoldemState:
        """Start the betting of ``street`` (its cards are dealt); skip it if nobody can bet."""
        if street is Street.PREFLOP:
            state = self
            start_after = self.big_blind_seat
        else:
            state = replace(
                self,
                seats=tuple(replace(s, street_bet=0) for s in self.seats),
                level=0,
                acted=frozenset(),
                street=street,
            )
            start_after = self.button
        first = state._next_to_act(start_after)
        if first is not None:
            return replace(state, to_act=first)
        return state._close_street()

    def _close_street(self) -> HoldemState:
        """Betting on this street is over: settle, or wait for the next street's cards."""
        in_hand = [s for s in self.seats if not s.folded]
        if len(in_hand) == 1 or self.street is Street.RIVER:
            return self._settle()
        next_street = Street(self.street + 1)
        state = replace(
            self,
            street=next_street,
            to_act=None,
            seats=tuple(replace(s, street_bet=0) for s in self.seats),
            level=0,
            acted=frozenset(),
        )
        return state._after_cards()

    def _needs_action(self, seat: SeatState) -> bool:
        if not seat.can_act:
            return False
        if seat.street_bet < self.level:
            return True
        if seat.seat in self.acted:
            return False
        return any(other.can_act for other in self.seats if other.seat != seat.seat)

    def _next_to_act(self, after: int) -> int | None:
        """The first seat clockwise after seat ``after`` that has to act, if any."""
        for seat in _clockwise(self.seats, after):
            if self._needs_action(seat):
                return seat.seat
        return None

    def _check_action(self, action: Action) -> int:
        """Check an action; return the chips it puts in. Raises IllegalAction."""
        label = str(action)

        def refuse(reason: str) -> IllegalAction:
            return IllegalAction(
                label,
                reason,
                seat=action.seat,
                kind=action.kind.value,
                size=action.size,
                street=self.street.name.lower(),
            )

        self._check_turn(action, refuse)
        kind, size = action.kind, action.size
        seat = self.seat(action.seat)
        if kind not in (ActionKind.BET, ActionKind.RAISE):
            return self._checked_passive(kind, seat, refuse)
        if not any(o.can_act for o in self.seats if o.seat != seat.seat):
            raise refuse("no other seat can call a bet or raise: call or check")
        assert size is not None
        if kind is ActionKind.BET:
            amount = self._checked_bet(size, refuse)
        else:
            amount = self._checked_raise(seat, size, refuse)
        if amount > seat.stack:
            raise refuse(
                f"{kind.value} needs {amount} chips but the stack is {seat.stack}: "
                "less than the minimum is only allowed all-in"
            )
        if amount == seat.stack:
            raise refuse(f"{kind.value} of {amount} takes the whole stack: go all-in")
        return amount

    def _check_turn(self, action: Action, refuse: Callable[[str], IllegalAction]) -> None:
        """Refuse an action out of turn, or with a size where none goes (or none where one must)."""
        if self.is_complete:
            raise refuse("the hand is over")
        if self.to_act is None:
            slot = self.next_slot
            where = f" ({slot.name})" if slot is not None else ""
            raise refuse(f"waiting for a card{where}, not for an action")
        if action.seat != self.to_act:
            raise refuse(f"not seat {action.seat}'s turn: seat {self.to_act} acts")
        kind, size = action.kind, action.size
        if kind in (ActionKind.BET, ActionKind.RAISE):
            if size is None:
                raise refuse(f"a {kind.value} needs a size")
        elif size is not None:
            raise refuse(f"a {kind.value} takes no size")

    def _checked_passive(
        self, kind: ActionKind, seat: SeatState, refuse: Callable[[str], IllegalAction]
    ) -> int:
        """The chips a fold, check, call or all-in puts in."""
        to_call = self.level - seat.street_bet
        if kind is ActionKind.FOLD:
            if to_call == 0:
                raise refuse("nothing to call: check instead of folding")
            return 0
        if kind is ActionKind.CHECK:
            if to_call > 0:
                raise refuse(f"cannot check facing a bet: {to_call} to call")
            return 0
        if kind is ActionKind.CALL:
            if to_call == 0:
                raise refuse("nothing to call: check instead")
            if to_call >= seat.stack:
                raise refuse(f"calling {to_call} takes the whole stack of {seat.stack}: go all-in")
            return to_call
        if seat.street_bet + seat.stack > self.level and seat.seat in self.acted:
            raise refuse(
                "the betting was not reopened (the last all-in was not a full raise): call or fold"
            )
        return seat.stack

    def _checked_bet(self, size: int, refuse: Callable[[str], IllegalAction]) -> int:
        """The chips a bet of ``size`` percent of the pot puts in."""
        if self.level > 0:
            raise refuse(f"there is already a bet of {self.level}: call or raise")
        if size < min(self.config.bet_shares):
            raise refuse(
                f"a bet of {size}% of the pot is below the minimum of "
                f"{min(self.config.bet_shares)}%; only an all-in may be smaller"
            )
        if size not in self.config.bet_shares:
            raise refuse(f"a bet is one of the pot shares {list(self.config.bet_shares)} (percent)")
        return self.config.bet_amount(self.pot, size)

    def _checked_raise(
        self, seat: SeatState, size: int, refuse: Callable[[str], IllegalAction]
    ) -> int:
        """The chips a raise to ``size`` times the current bet puts in."""
        if self.level == 0:
            raise refuse("nothing to raise: bet instead")
        if size < self.config.min_multiple:
            raise refuse(
                f"a raise to {size}x the current bet is below the minimum of "
                f"{self.config.min_multiple}x; only an all-in may be smaller"
            )
        if size not in self.config.raise_multiples:
            raise refuse(
                f"a raise is one of the multiples {list(self.config.raise_multiples)} "
                "of the current bet"
            )
        if seat.seat in self.acted:
            raise refuse(
                "the betting was not reopened (the last all-in was not a full raise): call or fold"
            )
        return size * self.level - seat.street_bet

    def _act(self, action: Action) -> HoldemState:
        amount = self._check_action(action)
        assert self.to_act is not None
        old = self.seat(action.seat)
        new_bet = old.street_bet + amount
        level, acted = self.level, self.acted | {old.seat}
        if new_bet > self.level:
            full = (
                self.level == 0
                or action.kind in (ActionKind.BET, ActionKind.RAISE)
                or new_bet >= self.config.min_multiple * self.level
            )
            level = new_bet
            if full:
                acted = frozenset({old.seat})
        updated = replace(
            old,
            stack=old.stack - amount,
            committed=old.committed + amount,
            street_bet=new_bet,
            folded=action.kind is ActionKind.FOLD,
        )
        state = replace(
            self,
            seats=tuple(updated if s.seat == old.seat else s for s in self.seats),
            level=level,
            acted=acted,
            events=(*self.events, action),
        )
        if sum(1 for s in state.seats if not s.folded) == 1:
            return state._settle()
        following = state._next_to_act(old.seat)
        if following is not None:
            return replace(state, to_act=following)
        return replace(state, to_act=None)._close_street()

    # ---- settling --------------------------------------------------------------------------

    def _settle(self) -> HoldemState:
        in_hand = [s for s in self.seats if not s.folded]
        strengths: dict[int, int] = {}
        descriptions: dict[int, str] = {}
        if len(in_hand) > 1:
            # The evaluator's tables are built with numpy: imported here so that the rules
            # module loads none (a live table has it loaded already: see ``live.build``).
            from controller.games.poker.evaluator import hand_strength

            for seat in in_hand:
                strengths[seat.seat] = hand_strength([*seat.hole, *self.board])
                descriptions[seat.seat] = describe(strengths[seat.seat])
        pots, returned = split_pots(
            [(s.seat, s.committed, s.folded) for s in self.seats], strengths
        )
        payouts = Counter(returned)
        for pot in pots:
            payouts.update(pot.shares)
        stacks = {s.seat: s.stack + payouts.get(s.seat, 0) for s in self.seats}
        settlement = Settlement(
            pots=tuple(pots),
            returned=dict(returned),
            payouts=dict(payouts),
            stacks=stacks,
            strengths=strengths,
            descriptions=descriptions,
        )
        return replace(self, street=Street.SHOWDOWN, to_act=None, settlement=settlement)


def split_pots(
    contributions: Sequence[tuple[int, int, bool]], strengths: Mapping[int, int]
) -> tuple[list[Pot], dict[int, int]]:
    """Form the pots by contribution level and award them.

    Args:
        contributions: ``(seat, chips put in, folded)`` for every seat of the hand, clockwise
            from the first seat left of the button (odd chips go in this order).
        strengths: Hand strength of each seat at showdown; empty when one seat is left.

    Returns:
        The contested pots (smallest level first; adjacent levels with the same eligible seats
        form one pot) and the uncalled chips returned by seat (a level only one seat reached).
    """
    order = [seat for seat, _, _ in contributions]
    levels = sorted({chips for _, chips, _ in contributions if chips > 0})
    pots: list[Pot] = []
    returned: dict[int, int] = {}
    floor = 0
    pending = 0
    for level in levels:
        contributors = [seat for seat, chips, _ in contributions if chips >= level]
        amount = sum(min(chips, level) - min(chips, floor) for _, chips, _ in contributions)
        eligible = tuple(
            seat for seat, chips, folded in contributions if chips >= level and not folded
        )
        floor = level
        if len(contributors) == 1 and eligible:
            returned[eligible[0]] = returned.get(eligible[0], 0) + amount
            continue
        if not eligible:
            # Only folded seats reached this level; its chips join the pot below.
            pending += amount
            continue
        if pots and pots[-1].eligible == eligible:
            last = pots.pop()
            amount += last.amount
        pots.append(_award(amount + pending, level, eligible, strengths, order))
        pending = 0
    if pending and pots:
        last = pots.pop()
        pots.append(_award(last.amount + pending, last.level, last.eligible, strengths, order))
    return pots, returned


def _award(
    amount: int,
    level: int,
    eligible: tuple[int, ...],
    strengths: Mapping[int, int],
    order: Sequence[int],
) -> Pot:
    winners: tuple[int, ...]
    if len(eligible) == 1 or not strengths:
        winners = eligible if len(eligible) == 1 else (eligible[0],)
    else:
        best = max(strengths[seat] for seat in eligible)
        winners = tuple(seat for seat in eligible if strengths[seat] == best)
    share, odd = divmod(amount, len(winners))
    shares = dict.fromkeys(winners, share)
    ranked = [seat for seat in order if seat in shares]
    for seat in ranked[:odd]:
        shares[seat] += 1
    return Pot(amount, level, eligible, winners, shares)


# --------------------------------------------------------------------------------------------
# Seats, button, plan.


def _clockwise(seats: Sequence[SeatState], after: int) -> list[SeatState]:
    """The seats clockwise starting with the first one after seat number ``after``."""
    ordered = sorted(seats, key=lambda s: s.seat)
    later = [s for s in ordered if s.seat > after]
    earlier = [s for s in ordered if s.seat <= after]
    return later + earlier


def next_button(button: int, occupied: Iterable[int]) -> int:
    """The button's seat for the next hand: the next occupied seat clockwise (to the left).

    Seats are numbered clockwise, so this is the smallest occupied seat number above
    ``button``, wrapping around; empty seats are skipped.

    Raises:
        RulesError: No seat is occupied.
    """
    seats = sorted(set(occupied))
    if not seats:
        raise RulesError("no occupied seat to move the button to", button=button)
    for seat in seats:
        if seat > button:
            return seat
    return seats[0]


def _hand_of_seat(seat: int) -> str:
    return f"seat{seat}"


def _seat_of_hand(hand: str) -> int:
    return int(hand.removeprefix("seat"))


def deal_plan(seats_from_sb: Sequence[int], burns: bool = False) -> DealPlan:
    """The order a hand's cards are dealt in.

    Hole cards one at a time clockwise starting with the small blind, twice around (hidden,
    slots ``S{seat}-1`` / ``S{seat}-2`` of hand ``seat{seat}``); then the flop ``F1``-``F3``,
    turn ``T`` and river ``R`` face up (hand ``board``), each street preceded by a hidden burn
    (``B1``-``B3``, hand ``burn``) when the table burns.

    Args:
        seats_from_sb: The seats in the hand clockwise from the small blind.
        burns: Whether a card is burned before each street.
    """
    slots = [
        Slot(f"S{seat}-{round_}", _hand_of_seat(seat), Face.HIDDEN)
        for round_ in (1, 2)
        for seat in seats_from_sb
    ]
    for number, names in enumerate((("F1", "F2", "F3"), ("T",), ("R",)), start=1):
        if burns:
            slots.append(Slot(f"B{number}", BURN_HAND, Face.HIDDEN))
        slots.extend(Slot(name, BOARD_HAND, Face.UP) for name in names)
    return DealPlan(tuple(slots))


def _cards_before_betting(plan: DealPlan, street: Street) -> int:
    """How many cards of the plan are dealt before betting on ``street`` can start."""
    board_needed = {Street.PREFLOP: 0, Street.FLOP: 3, Street.TURN: 4, Street.RIVER: 5}.get(
        street, 5
    )
    count = 0
    board = 0
    for slot in plan.slots:
        if slot.hand == BOARD_HAND:
            if board == board_needed:
                break
            board += 1
        elif slot.hand == BURN_HAND and board == board_needed:
            break
        count += 1
    return count


def start_hand(config: HoldemConfig, stacks: Mapping[int, int], button: int) -> HoldemState:
    """Start a hand: seat the players, post the blinds, and wait for the first hole card.

    Args:
        config: The table's settings.
        stacks: Stack of every seat taking part (seats with no chips must be left out).
        button: The button's seat; it must be one of the seats taking part.

    Raises:
        RulesError: Fewer than two seats, a seat outside the table, a stack that is not a
            positive whole number, or a button not on a seat in the hand.
    """
    if len(stacks) < 2:
        raise RulesError(f"a hand needs at least two seats, got {len(stacks)}", seats=list(stacks))
    for number, chips in stacks.items():
        if not 1 <= number <= config.seats:
            raise RulesError(
                f"seat {number} is not on this table (seats 1-{config.seats})", seat=number
            )
        if not isinstance(chips, int) or chips <= 0:
            raise RulesError(
                f"seat {number} has stack {chips!r}: stacks are positive whole chips",
                seat=number,
            )
    if button not in stacks:
        raise RulesError(f"the button's seat {button} is not in the hand", button=button)
    seats = _clockwise([SeatState(n, chips) for n, chips in stacks.items()], button)
    if len(seats) == 2:
        sb, bb = seats[1].seat, seats[0].seat  # heads-up: the button is the small blind
    else:
        sb, bb = seats[0].seat, seats[1].seat
    posted = []
    for seat in seats:
        blind = {sb: config.small_blind, bb: config.big_blind}.get(seat.seat, 0)
        chips = min(blind, seat.stack)
        posted.append(replace(seat, stack=seat.stack - chips, committed=chips, street_bet=chips))
    from_sb = [s.seat for s in _clockwise(posted, button)]
    if len(seats) == 2:
        from_sb = [sb, bb]
    state = HoldemState(
        config=config,
        button=button,
        small_blind_seat=sb,
        big_blind_seat=bb,
        seats=tuple(posted),
        street=Street.PREFLOP,
        plan=deal_plan(from_sb, config.burns),
        dealt=0,
        board=(),
        burned=(),
        level=max(s.street_bet for s in posted),
        acted=frozenset(),
        to_act=None,
        initial_stacks=dict(stacks),
    )
    return state


def replay(history: HandHistory) -> HoldemState:
    """Rebuild a hand's state from its history.

    Raises:
        IllegalAction: An action of the history is not legal at its point.
        PieceRefused: A card of the history cannot be in the hand.
    """
    state = start_hand(history.config, history.stacks, history.button)
    for event in history.events:
        state = state.apply(event)
    return state


__all__ = [
    "Action",
    "ActionKind",
    "Deal",
    "HandHistory",
    "HoldemConfig",
    "HoldemState",
    "Pot",
    "SeatState",
    "Settlement",
    "Street",
    "category_of",
    "deal_plan",
    "next_button",
    "replay",
    "split_pots",
    "start_hand",
]
