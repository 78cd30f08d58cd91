"""Live form of Texas Hold'em as a step machine: hole cards, actions, streets, equity, showdown.

One round is one hand. The rules (blinds, order of action, legal actions and sizes, side
pots) are :class:`controller.games.texas_holdem.rules.HoldemState`'s; this
module sequences them for the orchestrator:

* hole cards one at a time clockwise from the small blind, twice around (hidden);
* an ``equity`` :class:`InfoStep` (secure) once the hole cards are in, and after the flop, the
  turn and the river, with every live seat's chance to win and to tie
  (:func:`controller.games.texas_holdem.equity.win_probabilities`);
* a :class:`DecisionStep` ``action-<n>`` for each action, for the seat to act, offering the
  legal actions now; the default at the deadline is check if legal, else fold;
* flop, turn and river face up (with burns if the table burns);
* at showdown a :class:`RevealStep` per seat still in the hand, then the finish.

The button and every seat's stack carry over from hand to hand (``table_state_after``). Seats
are labelled ``seat<N>`` everywhere (deal slots' hands, decision seats, reveals, results).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from pydantic import Field, model_validator

from controller.cards import Card, Piece
from controller.errors import ConfigError, IllegalAction, PieceRefused, RulesError
from controller.games.base import DealPlan, Declared
from controller.games.live._common import (
    RevealsHands,
    check_decision_fields,
    expect_deal,
    expect_window,
)
from controller.games.live.base import (
    JSON,
    DealStep,
    DecisionStep,
    FinishStep,
    InfoStep,
    RevealStep,
    Step,
)
from controller.games.options import GameOptions
from controller.games.poker.hands import category_of, describe
from controller.games.spec import OPTIONS_FIELD
from controller.games.texas_holdem import rules
from controller.games.texas_holdem.rules import (
    Action,
    ActionKind,
    Deal,
    HoldemConfig,
    HoldemState,
    next_button,
    start_hand,
)
from controller.money import PayTables

ACTION_NAMES: Final = {
    ActionKind.FOLD: "fold",
    ActionKind.CHECK: "check",
    ActionKind.CALL: "call",
    ActionKind.BET: "bet",
    ActionKind.RAISE: "raise",
    ActionKind.ALL_IN: "all_in",
}
"""Wire name of each action (``all_in`` with an underscore, unlike ``ActionKind``)."""

_KINDS: Final = {name: kind for kind, name in ACTION_NAMES.items()} | {"all-in": ActionKind.ALL_IN}
_DECISION_FIELDS: Final = frozenset({"action", "share", "multiple", "seat", "amount"})
STREET_NAMES: Final = {0: "preflop", 3: "flop", 4: "turn", 5: "river"}
DECISION_SECONDS_OPTION: Final = "action_seconds"
"""The option that sets how long each decision window stays open (``run --decision-seconds``)."""
"""The equity milestone reached with this many board cards (hole cards all dealt)."""


def seat_label(seat: int) -> str:
    """``3`` -> ``"seat3"`` (the hand label of the deal plan)."""
    return f"seat{seat}"


def _seat_number(label: str) -> int:
    return int(label.removeprefix("seat"))


@dataclass(frozen=True)
class HoldemTable:
    """A Hold'em table's live settings (validated by the registry).

    Attributes:
        config: Blinds, sizes, seats, burns.
        starting_stack: Chips a seat starts with (and is topped up to).
        top_up: Whether each seat below ``starting_stack`` is topped up before every hand
            (a continuous demo); otherwise a seat that busts is out until re-stacked.
        action_seconds: How long each action window stays open.
        equity_samples: Monte Carlo run-outs for pre-flop equity (``None``: the default).
    """

    config: HoldemConfig = field(default_factory=HoldemConfig)
    starting_stack: int = 10_000
    top_up: bool = True
    action_seconds: float = 15.0
    equity_samples: int | None = None


@dataclass
class HoldemLiveRound(RevealsHands):
    """One hand at the table.

    Attributes:
        table: The table's settings.
        table_stacks: Every seat's stack before this hand (seats without chips included).
        state: The hand (rules state machine).
        equity_done: Streets whose equity was published.
        revealed: Seats whose hole cards were revealed at showdown.
        actions: The normalised decisions applied, in order.
    """

    game_id: ClassVar[str] = rules.GAME_ID

    table: HoldemTable
    table_stacks: dict[int, int]
    state: HoldemState
    equity_done: set[str] = field(default_factory=set)
    revealed: set[str] = field(default_factory=set)
    actions: list[dict[str, Any]] = field(default_factory=list)
    _equity_cache: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    # ---- steps -----------------------------------------------------------------------------

    def _hole_dealt(self) -> bool:
        return all(len(seat.hole) == 2 for seat in self.state.seats)

    def _equity_street(self) -> str | None:
        """The street whose equity is due now, if any."""
        if not self._hole_dealt():
            return None
        street = STREET_NAMES.get(len(self.state.board))
        if street is None or street in self.equity_done:
            return None
        if sum(1 for seat in self.state.seats if not seat.folded) < 2:
            return None
        return street

    def _equity(self, street: str) -> dict[str, Any]:
        cached = self._equity_cache.get(street)
        if cached is not None:
            return cached
        from controller.games.texas_holdem.equity import win_probabilities  # loaded by build()

        state = self.state
        live = {seat_label(s.seat): list(s.hole) for s in state.seats if not s.folded}
        dead = [card for s in state.seats if s.folded for card in s.hole] + list(state.burned)
        report = win_probabilities(
            live, list(state.board), dead, samples=self._samples(street), seed=None
        )
        data: dict[str, Any] = {"street": street, "board": [str(c) for c in state.board]}
        data |= report.to_wire()
        self._equity_cache[street] = data
        return data

    def _samples(self, street: str) -> int | None:
        return self.table.equity_samples if street == "preflop" else None

    def _decision(self) -> DecisionStep:
        state = self.state
        assert state.to_act is not None
        me = state.seat(state.to_act)
        legal = state.legal_actions()
        options = tuple(dict.fromkeys(ACTION_NAMES[action.kind] for action in legal))
        config = state.config
        bets: list[dict[str, Any]] = [
            {"share": f"{a.size}%", "amount": config.bet_amount(state.pot, a.size or 0)}
            for a in legal
            if a.kind is ActionKind.BET
        ]
        raises: list[dict[str, Any]] = [
            {
                "multiple": a.size,
                "to": (a.size or 0) * state.level,
                "amount": (a.size or 0) * state.level - me.street_bet,
            }
            for a in legal
            if a.kind is ActionKind.RAISE
        ]
        info = {
            "street": state.street.name.lower(),
            "to_call": state.level - me.street_bet,
            "pot": state.pot,
            "current_bet": state.level,
            "stack": me.stack,
            "stacks": {seat_label(s.seat): s.stack for s in state.seats},
            "street_bets": {seat_label(s.seat): s.street_bet for s in state.seats},
            "folded": [seat_label(s.seat) for s in state.seats if s.folded],
            "all_in": [seat_label(s.seat) for s in state.seats if s.all_in],
            "board": [str(card) for card in state.board],
            "button": seat_label(state.button),
            "bets": bets,
            "raises": raises,
            "min_bet": min((b["amount"] for b in bets), default=None),
            "min_raise_to": min((r["to"] for r in raises), default=None),
            "bet_shares": list(config.bet_shares),
            "raise_multiples": list(config.raise_multiples),
        }
        default = {"action": "check"} if "check" in options else {"action": "fold"}
        # As on RFID poker tables: the seat's two cards leaving its antenna (or reaching a
        # muck antenna) during its action fold the hand.
        folds = "fold" in options and len(me.hole) == 2
        return DecisionStep(
            window=f"action-{len(self.actions) + 1}",
            kind="action",
            seconds=self.table.action_seconds,
            seat=seat_label(me.seat),
            options=options,
            info=info,
            default=default,
            removal_cards=tuple(str(card) for card in me.hole) if folds else (),
            removal_decision={"action": "fold"} if folds else None,
        )

    def _showdown_seats(self) -> list[int]:
        settlement = self.state.settlement
        if settlement is None:
            return []
        return [s.seat for s in self.state.seats if s.seat in settlement.strengths]

    def next_step(self) -> Step:
        """Equity due, the next reveal, the seat to act, the next card, or the finish."""
        street = self._equity_street()
        if street is not None:
            return InfoStep("equity", self._equity(street), secure=True)
        state = self.state
        if state.is_complete:
            for seat in self._showdown_seats():
                label = seat_label(seat)
                if label not in self.revealed:
                    return RevealStep(label, tuple(str(c) for c in state.seat(seat).hole))
            return FinishStep()
        if state.to_act is not None:
            return self._decision()
        slot = state.next_slot
        assert slot is not None
        return DealStep(state.dealt, slot)

    # ---- applying --------------------------------------------------------------------------

    def apply_card(self, index: int, piece: Piece) -> None:
        """Accept a card for the waiting slot.

        Raises:
            RulesError: No card is awaited at ``index``, or the piece cannot be in the hand.
        """
        expect_deal(self.next_step(), index, rules.GAME_ID)
        if not isinstance(piece, Card):
            raise RulesError("a tile cannot be in Hold'em", game=rules.GAME_ID, index=index)
        try:
            self.state = self.state.apply(Deal(piece))
        except PieceRefused as exc:
            raise RulesError(exc.message, game=rules.GAME_ID, index=index) from exc

    def apply_decision(self, window: str, decision: JSON) -> JSON:
        """Apply the acting seat's action.

        ``decision``: ``{"action": "fold"|"check"|"call"|"bet"|"raise"|"all_in", "share":
        "50%" (bet only), "multiple": 3 (raise only)}``; ``seat`` and ``amount`` may be given
        (they must then match the seat to act and the chips the action puts in), so the
        normalised form this returns is accepted again on replay.

        Returns:
            ``{"action", "seat", "amount"}`` plus ``share`` / ``multiple`` for a bet / raise.

        Raises:
            IllegalAction: Not the open window, the wrong seat, malformed, an action not
                offered, a size not allowed or below the minimum. Nothing changes.
        """
        step = expect_window(self.next_step(), window, rules.GAME_ID)
        assert step.seat is not None
        action = _parse_action(decision, step, window)
        name = ACTION_NAMES[action.kind]

        def refused(reason: str) -> IllegalAction:
            return IllegalAction(name, reason, game=rules.GAME_ID, window=window, seat=step.seat)

        if name not in step.options:
            raise refused(f"{name} is not possible now; options: {list(step.options)}")
        try:
            after = self.state.apply(action)
        except IllegalAction as exc:
            raise refused(exc.reason) from exc
        amount = after.seat(action.seat).committed - self.state.seat(action.seat).committed
        if "amount" in decision and decision["amount"] != amount:
            raise refused(
                f"amount {decision['amount']!r} does not match the {amount} chips it puts in"
            )
        normalised: dict[str, Any] = {"action": name, "seat": step.seat, "amount": amount}
        if action.kind is ActionKind.BET:
            normalised["share"] = f"{action.size}%"
        elif action.kind is ActionKind.RAISE:
            normalised["multiple"] = action.size
        self.state = after
        self.actions.append({"window": window, **normalised})
        return normalised

    def mark_info_published(self) -> None:
        """The equity of the current street was published.

        Raises:
            RulesError: No information step is due.
        """
        street = self._equity_street()
        if street is None:
            raise RulesError("no equity step is due", game=rules.GAME_ID)
        self.equity_done.add(street)

    # ---- results ---------------------------------------------------------------------------

    def result(self) -> JSON:
        """The ``round_result`` body (see ``docs/live-play.md``).

        Raises:
            RulesError: The hand is not finished.
        """
        if not isinstance(self.next_step(), FinishStep):
            raise RulesError("the hand is not finished", game=rules.GAME_ID)
        state = self.state
        settlement = state.settlement
        assert settlement is not None
        shown = self._showdown_seats()
        cards: dict[str, list[str]] = {
            seat_label(seat): [str(c) for c in state.seat(seat).hole] for seat in shown
        }
        cards[rules.BOARD_HAND] = [str(card) for card in state.board]
        main = settlement.pots[0] if settlement.pots else None
        winners = main.winners if main is not None else ()
        committed = {s.seat: s.committed for s in state.seats}
        return {
            "cards": cards,
            "winner": "+".join(seat_label(seat) for seat in winners),
            "hands": {
                seat_label(seat): {
                    "category": category_of(settlement.strengths[seat]).id,
                    "description": describe(settlement.strengths[seat]),
                }
                for seat in shown
            },
            "bets": [],
            "details": {
                "ended": "showdown" if shown else "folds",
                "button": seat_label(state.button),
                "small_blind": seat_label(state.small_blind_seat),
                "big_blind": seat_label(state.big_blind_seat),
                "blinds": [state.config.small_blind, state.config.big_blind],
                "board": [str(card) for card in state.board],
                "pots": [
                    {
                        "amount": pot.amount,
                        "level": pot.level,
                        "eligible": [seat_label(s) for s in pot.eligible],
                        "winners": [seat_label(s) for s in pot.winners],
                        "shares": {seat_label(s): chips for s, chips in pot.shares.items()},
                    }
                    for pot in settlement.pots
                ],
                "returned": {seat_label(s): c for s, c in settlement.returned.items()},
                "payouts": {seat_label(s): c for s, c in settlement.payouts.items()},
                "chips_won": {
                    seat_label(s): settlement.payouts.get(s, 0) - committed[s] for s in committed
                },
                "stacks_before": {seat_label(s): c for s, c in state.initial_stacks.items()},
                "stacks_after": {seat_label(s): c for s, c in settlement.stacks.items()},
                "actions": list(self.actions),
            },
        }

    def table_state_after(self) -> JSON:
        """``{"button": seat number, "stacks": {"<seat>": chips}}`` for the next hand.

        Raises:
            RulesError: The hand is not finished.
        """
        settlement = self.state.settlement
        if settlement is None:
            raise RulesError("the hand is not finished", game=rules.GAME_ID)
        stacks = dict(self.table_stacks)
        stacks.update(settlement.stacks)
        return {
            "button": self.state.button,
            "stacks": {str(seat): chips for seat, chips in sorted(stacks.items())},
        }


def _parse_size(value: object, suffix: str, what: str, window: str) -> int:
    if isinstance(value, bool):
        value = None
    if isinstance(value, str):
        text = value.strip().removesuffix(suffix).strip()
        value = int(text) if text.isdigit() else None
    if not isinstance(value, int):
        raise IllegalAction(
            what, f"{what} must be a whole number (like 50{suffix} or 50)", window=window
        )
    return value


def _parse_action(decision: JSON, step: DecisionStep, window: str) -> Action:
    """Read an action decision; IllegalAction on anything malformed or out of turn."""
    check_decision_fields(
        decision, _DECISION_FIELDS, window, "action, share, multiple (seat, amount)"
    )
    name = decision.get("action")
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise IllegalAction(
            "decision",
            f"action {name!r} is not one of {sorted(ACTION_NAMES.values())}",
            window=window,
        )
    seat = decision.get("seat", step.seat)
    if seat != step.seat:
        raise IllegalAction(
            ACTION_NAMES[kind],
            f"not {seat!r}'s turn: {step.seat} acts",
            window=window,
            seat=seat,
        )
    size: int | None = None
    if kind is ActionKind.BET:
        if "multiple" in decision or "share" not in decision:
            raise IllegalAction("bet", "a bet names a pot share ('share': '50%')", window=window)
        size = _parse_size(decision["share"], "%", "share", window)
    elif kind is ActionKind.RAISE:
        if "share" in decision or "multiple" not in decision:
            raise IllegalAction(
                "raise",
                "a raise names a multiple of the current bet ('multiple': 3)",
                window=window,
            )
        size = _parse_size(decision["multiple"], "x", "multiple", window)
    elif "share" in decision or "multiple" in decision:
        raise IllegalAction(
            ACTION_NAMES[kind], f"a {ACTION_NAMES[kind]} takes no size", window=window
        )
    assert step.seat is not None
    return Action(_seat_number(step.seat), kind, size)


@dataclass(frozen=True)
class HoldemLiveGame(Declared):
    """Texas Hold'em as a :class:`controller.games.live.base.LiveGame`.

    Attributes:
        table: The table's live settings.
    """

    facts = rules.FACTS

    table: HoldemTable = field(default_factory=HoldemTable)

    def _stacks(self, table_state: JSON) -> dict[int, int]:
        seats = range(1, self.table.config.seats + 1)
        raw = table_state.get("stacks")
        if raw is None:
            return dict.fromkeys(seats, self.table.starting_stack)
        if not isinstance(raw, Mapping):
            raise RulesError("table state 'stacks' must be an object", game=rules.GAME_ID)
        stacks = dict.fromkeys(seats, 0)
        for key, chips in raw.items():
            try:
                seat = int(key)
            except (TypeError, ValueError):
                seat = 0
            if seat not in stacks or not isinstance(chips, int) or chips < 0:
                raise RulesError(
                    f"table state has stack {chips!r} for seat {key!r}",
                    game=rules.GAME_ID,
                    seat=key,
                )
            stacks[seat] = chips
        return stacks

    def new_round(self, table_state: JSON) -> HoldemLiveRound:
        """The next hand: top up (if configured), move the button, post the blinds.

        Args:
            table_state: ``{}`` for the first hand, then the previous hand's
                ``table_state_after()``.

        Raises:
            IllegalAction: Fewer than two seats have chips.
            RulesError: ``table_state`` is malformed.
        """
        stacks = self._stacks(table_state)
        if self.table.top_up:
            stacks = {seat: max(chips, self.table.starting_stack) for seat, chips in stacks.items()}
        playing = {seat: chips for seat, chips in stacks.items() if chips > 0}
        if len(playing) < 2:
            raise IllegalAction(
                "new hand",
                f"only {len(playing)} seat(s) have chips; re-stack seats to play",
                game=rules.GAME_ID,
            )
        previous = table_state.get("button")
        if previous is None:
            button = min(playing)
        elif isinstance(previous, int) and not isinstance(previous, bool):
            button = next_button(previous, playing)
        else:
            raise RulesError(
                f"table state has button {previous!r}", game=rules.GAME_ID, button=previous
            )
        state = start_hand(self.table.config, playing, button)
        return HoldemLiveRound(self.table, stacks, state)


class Options(GameOptions):
    """Texas Hold'em.

    Attributes:
        seats: Seats at the table, numbered 1..seats clockwise (all occupied).
        small_blind: Small blind, chips.
        big_blind: Big blind, chips (also the smallest bet).
        starting_stack: Each seat's stack at the start, and what it is topped up to.
        top_up: Top every seat up to ``starting_stack`` before each hand (continuous demo);
            ``false``: a seat that busts is out until re-stacked.
        raise_multiples: The raises allowed, as multiples of the current bet.
        bet_shares: The bets allowed, as percentages of the pot.
        burns: Whether the dealer burns a card before the flop, turn and river.
        action_seconds: How long each action window stays open.
        equity_samples: Monte Carlo run-outs for pre-flop equity.
    """

    seats: int = Field(rules.DEMO_SEATS, ge=2, le=10)
    small_blind: int = Field(50, gt=0)
    big_blind: int = Field(100, gt=0)
    starting_stack: int = Field(10_000, gt=0)
    top_up: bool = True
    raise_multiples: tuple[int, ...] = Field((2, 3), min_length=1)
    bet_shares: tuple[int, ...] = Field((33, 50, 100), min_length=1)
    burns: bool = False
    action_seconds: float = Field(15.0, gt=0, le=600)
    equity_samples: int = Field(20_000, ge=1_000, le=1_000_000)

    @model_validator(mode="after")
    def _check(self) -> Options:
        if self.small_blind > self.big_blind:
            raise ValueError("small_blind must not exceed big_blind")
        if self.starting_stack < self.big_blind:
            raise ValueError("starting_stack must cover at least the big blind")
        if any(m < 2 for m in self.raise_multiples):
            raise ValueError("raise_multiples must all be at least 2")
        if any(s <= 0 for s in self.bet_shares):
            raise ValueError("bet_shares must all be positive percentages")
        return self


def deal_plan_for(options: Options) -> DealPlan:
    """Every slot a hand at this table can deal (the seats, the board, the burns if any).

    Which seats are dealt depends on the hand (folded-out stacks, the button); the slots
    that exist do not: what a multi-reader table binds its readers to.
    """
    return rules.deal_plan(range(1, options.seats + 1), burns=options.burns)


def build(options: Options, paytables: PayTables) -> HoldemLiveGame:
    """The table's live game (the registry's live factory; Hold'em has no pay tables).

    Raises:
        ConfigError: The blinds and sizes do not make a table (``field`` names the option).
    """
    try:
        config = HoldemConfig(
            small_blind=options.small_blind,
            big_blind=options.big_blind,
            raise_multiples=options.raise_multiples,
            bet_shares=options.bet_shares,
            seats=options.seats,
            burns=options.burns,
        )
    except ConfigError as exc:
        where = f"{OPTIONS_FIELD}.{exc.context.get('field', '')}".rstrip(".")
        raise ConfigError(exc.message, field=where, game=rules.GAME_ID) from exc
    # Equity is vectorised with numpy (and the evaluator's tables are built with it): loaded
    # here, when a Hold'em table starts, not on the first hand's way; importing the registry
    # (every game) loads no numpy.
    import controller.games.texas_holdem.equity  # noqa: F401

    table = HoldemTable(
        config=config,
        starting_stack=options.starting_stack,
        top_up=options.top_up,
        action_seconds=options.action_seconds,
        equity_samples=options.equity_samples,
    )
    return HoldemLiveGame(table)


__all__ = [
    "ACTION_NAMES",
    "HoldemLiveGame",
    "HoldemLiveRound",
    "HoldemTable",
    "seat_label",
]


def page_hands(
    hands: list[tuple[str, list[str]]], seats: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    """The hands a page shows: the table's seats once seen (two hole cards each), the board.

    (:meth:`controller.games.spec.GameSpec.page_hands`; without seats the default plan's.)
    """
    if not seats:
        return hands
    board = [(hand, slots) for hand, slots in hands if not hand.startswith("seat")]
    seated = [
        (seat, [f"S{seat.removeprefix('seat')}-1", f"S{seat.removeprefix('seat')}-2"])
        for seat in seats
    ]
    return seated + board
