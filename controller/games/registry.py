"""Which games a table can run live, their options, and how to build them.

``make_live_game(game_id, options, paytable_overrides)`` validates the table's
``game_options`` with the game's pydantic model (unknown keys are errors, every field has a
default that makes a good demo) and merges the pay-table overrides, raising
:class:`controller.errors.ConfigError` that names the field on anything wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from controller.errors import ConfigError, PayTableError, RulesError
from controller.live.base import LiveGame
from controller.money import PayTables, merge_paytables

TEEN_PATTI: Final = "teen-patti-20-20"
THREE_CARD_MULLIGAN: Final = "three-card-mulligan"
BREAK_POKER: Final = "break-poker"
TEXAS_HOLDEM: Final = "texas-holdem"
MAHJONG_PAI_GOW: Final = "mahjong-pai-gow"

LIVE_GAME_IDS: Final = (TEEN_PATTI, THREE_CARD_MULLIGAN, BREAK_POKER, TEXAS_HOLDEM, MAHJONG_PAI_GOW)
"""Every game a table can run live; Teen Patti 20-20 is the default."""

OPTIONS_FIELD: Final = "game_options"
"""Where the options live in a table config (named in errors)."""


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TeenPattiOptions(_Options):
    """Teen Patti 20-20 has no live options."""


class MulliganOptions(_Options):
    """Three Card Mulligan.

    Attributes:
        decision_seconds: How long the stay/mulligan window stays open.
    """

    decision_seconds: float = Field(10.0, gt=0, le=600)


class BreakPokerOptions(_Options):
    """Break Poker.

    Attributes:
        setting_seconds: How long the setting window stays open (unless closed early).
    """

    setting_seconds: float = Field(20.0, gt=0, le=600)


class HoldemOptions(_Options):
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

    seats: int = Field(6, ge=2, le=10)
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
    def _check(self) -> HoldemOptions:
        if self.small_blind > self.big_blind:
            raise ValueError("small_blind must not exceed big_blind")
        if self.starting_stack < self.big_blind:
            raise ValueError("starting_stack must cover at least the big blind")
        if any(m < 2 for m in self.raise_multiples):
            raise ValueError("raise_multiples must all be at least 2")
        if any(s <= 0 for s in self.bet_shares):
            raise ValueError("bet_shares must all be positive percentages")
        return self


class MahjongOptions(_Options):
    """Mahjong Pai Gow.

    Attributes:
        positions: Player positions ``P1``..``Pn`` (2-9; one of them banks each round).
        commission: ``per_bet`` (every winning bet paid 0.95:1) or ``on_net`` (the banker's
            side paid 1:1 per position, commission on the banker's net for the round).
        bank_seconds: How long each bank offer stays open.
        dealing_order: The positions in the order the dealer serves them (default: table
            order ``P1``..``Pn``); a permutation of every position.
    """

    positions: int = Field(4, ge=2, le=9)
    commission: Literal["per_bet", "on_net"] = "per_bet"
    bank_seconds: float = Field(10.0, gt=0, le=600)
    dealing_order: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _check(self) -> MahjongOptions:
        if self.dealing_order is not None:
            labels = [f"P{index}" for index in range(1, self.positions + 1)]
            if sorted(self.dealing_order) != sorted(labels):
                raise ValueError(f"dealing_order must list each of {labels} exactly once")
        return self


OPTION_MODELS: Final[dict[str, type[_Options]]] = {
    TEEN_PATTI: TeenPattiOptions,
    THREE_CARD_MULLIGAN: MulliganOptions,
    BREAK_POKER: BreakPokerOptions,
    TEXAS_HOLDEM: HoldemOptions,
    MAHJONG_PAI_GOW: MahjongOptions,
}


def _options_error(game_id: str, error: ValidationError) -> ConfigError:
    problems = []
    first = ""
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        where = f"{OPTIONS_FIELD}.{where}" if where else OPTIONS_FIELD
        first = first or where
        shown = "" if item["type"] == "missing" else f" (got {item.get('input')!r})"
        problems.append(f"{where}: {item['msg']}{shown}")
    return ConfigError(
        f"invalid options for {game_id}: " + "; ".join(problems),
        field=first,
        game=game_id,
        problems=problems,
    )


def _paytables(
    game_id: str, defaults: PayTables, overrides: Mapping[str, Mapping[str, str]]
) -> PayTables:
    try:
        return merge_paytables(defaults, overrides)
    except PayTableError as exc:
        bet = exc.context.get("bet")
        where = f"paytables.{bet}" if bet else "paytables"
        if "outcome" in exc.context:
            where += f".{exc.context['outcome']}"
        raise ConfigError(exc.message, field=where, game=game_id) from exc


def _teen_patti(options: Any, overrides: Mapping[str, Mapping[str, str]]) -> LiveGame:
    from controller.games.teen_patti.rules import TEEN_PATTI_20_20
    from controller.live.fixed_plan import FixedPlanGame

    tables = _paytables(TEEN_PATTI, TEEN_PATTI_20_20.default_paytables, overrides)
    return FixedPlanGame(TEEN_PATTI_20_20, tables)


def _mulligan(options: MulliganOptions, overrides: Mapping[str, Mapping[str, str]]) -> LiveGame:
    from controller.games.three_card_mulligan.live import MulliganLiveGame
    from controller.games.three_card_mulligan.rules import THREE_CARD_MULLIGAN as RULES

    tables = _paytables(THREE_CARD_MULLIGAN, RULES.default_paytables, overrides)
    return MulliganLiveGame(tables, options.decision_seconds)


def _break_poker(
    options: BreakPokerOptions, overrides: Mapping[str, Mapping[str, str]]
) -> LiveGame:
    from controller.games.break_poker.live import BreakPokerLiveGame
    from controller.games.break_poker.rules import BREAK_POKER as RULES

    tables = _paytables(BREAK_POKER, RULES.default_paytables, overrides)
    return BreakPokerLiveGame(tables, options.setting_seconds)


def _holdem(options: HoldemOptions, overrides: Mapping[str, Mapping[str, str]]) -> LiveGame:
    from controller.games.texas_holdem.live import HoldemLiveGame, HoldemTable
    from controller.games.texas_holdem.rules import HoldemConfig

    if overrides:
        raise ConfigError(
            "Texas Hold'em has no house bets, so no pay tables to override",
            field="paytables",
            game=TEXAS_HOLDEM,
        )
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
        raise ConfigError(exc.message, field=where, game=TEXAS_HOLDEM) from exc
    table = HoldemTable(
        config=config,
        starting_stack=options.starting_stack,
        top_up=options.top_up,
        action_seconds=options.action_seconds,
        equity_samples=options.equity_samples,
    )
    return HoldemLiveGame(table)


def _mahjong(options: MahjongOptions, overrides: Mapping[str, Mapping[str, str]]) -> LiveGame:
    from controller.games.mahjong_pai_gow.live import MahjongLiveGame
    from controller.games.mahjong_pai_gow.rules import MAHJONG_PAI_GOW as RULES
    from controller.games.mahjong_pai_gow.rules import CommissionMode, position_labels

    tables = _paytables(MAHJONG_PAI_GOW, RULES.default_paytables, overrides)
    return MahjongLiveGame(
        paytables=tables,
        positions=position_labels(options.positions),
        dealing_order=options.dealing_order or (),
        commission=CommissionMode(options.commission),
        bank_seconds=options.bank_seconds,
    )


_FACTORIES: Final[dict[str, Callable[[Any, Mapping[str, Mapping[str, str]]], LiveGame]]] = {
    TEEN_PATTI: _teen_patti,
    THREE_CARD_MULLIGAN: _mulligan,
    BREAK_POKER: _break_poker,
    TEXAS_HOLDEM: _holdem,
    MAHJONG_PAI_GOW: _mahjong,
}


def validate_options(game_id: str, options: Mapping[str, Any]) -> BaseModel:
    """The game's options, validated (defaults filled in).

    Raises:
        ConfigError: Unknown game, or an option that is unknown or wrong (``field`` names it).
    """
    model = OPTION_MODELS.get(game_id)
    if model is None:
        raise ConfigError(
            f"game {game_id!r} is not a live game; live games: {', '.join(LIVE_GAME_IDS)}",
            field="game",
            value=game_id,
        )
    if not isinstance(options, Mapping):
        raise ConfigError(f"{OPTIONS_FIELD} must be a table of options", field=OPTIONS_FIELD)
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        raise _options_error(game_id, exc) from exc


def make_live_game(
    game_id: str,
    options: Mapping[str, Any],
    paytable_overrides: Mapping[str, Mapping[str, str]],
) -> LiveGame:
    """The live game a table runs.

    Args:
        game_id: One of :data:`LIVE_GAME_IDS`.
        options: The table's ``game_options`` (see each options model; ``{}`` for defaults).
        paytable_overrides: bet id -> outcome -> ratio, over the game's defaults.

    Raises:
        ConfigError: Unknown game, a bad option or pay-table override; ``field`` names it.
    """
    validated = validate_options(game_id, options)
    try:
        return _FACTORIES[game_id](validated, paytable_overrides)
    except RulesError as exc:  # pragma: no cover - options models keep the rules' limits
        raise ConfigError(exc.message, field=OPTIONS_FIELD, game=game_id) from exc


__all__ = [
    "LIVE_GAME_IDS",
    "OPTION_MODELS",
    "BreakPokerOptions",
    "HoldemOptions",
    "MahjongOptions",
    "MulliganOptions",
    "TeenPattiOptions",
    "make_live_game",
    "validate_options",
]
