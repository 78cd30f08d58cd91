"""Every game a table can run: the one list of games, and how a table's game is built.

:data:`GAMES` holds one :class:`~controller.games.spec.GameSpec` per game, one line each;
everything else (the table config, ``tablectl analyze``: :func:`analyzer_for`, the
simulators' decks) reads it.
Adding a game is one package under ``controller/games/`` and one line here.

``make_live_game(game_id, options, paytable_overrides)`` validates the table's
``game_options`` with the game's pydantic model (unknown keys are errors, every field has a
default that makes a good demo) and merges the pay-table overrides, raising
:class:`controller.errors.ConfigError` that names the field on anything wrong.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from controller.analysis import AnalysisReport, AnalyzeFunction, Method, UnknownGame
from controller.errors import ConfigError, PayTableError, RulesError
from controller.games import (
    break_poker,
    mahjong_pai_gow,
    teen_patti,
    texas_holdem,
    three_card_mulligan,
)
from controller.games.spec import OPTIONS_FIELD, GameSpec
from controller.money import PayTables, merge_paytables

if TYPE_CHECKING:
    from pydantic import ValidationError

    from controller.games.live.base import LiveGame
    from controller.games.options import GameOptions

GAMES: Final[tuple[GameSpec, ...]] = (
    teen_patti.SPEC,
    three_card_mulligan.SPEC,
    break_poker.SPEC,
    texas_holdem.SPEC,
    mahjong_pai_gow.SPEC,
)
"""Every game, in the order they are listed to people; the first is the default."""

GAME_IDS: Final[tuple[str, ...]] = tuple(spec.id for spec in GAMES)
"""Every game id a table config accepts."""

DEFAULT_GAME: Final = GAMES[0].id
"""The game of a table config that names none (Teen Patti 20-20)."""

_BY_ID: Final[dict[str, GameSpec]] = {spec.id: spec for spec in GAMES}

ANALYZERS: Final[dict[str, str]] = {spec.id: spec.par_sheet for spec in GAMES}
"""Game id -> the module of its par sheet (``tablectl analyze`` lists these)."""


def game_spec(game_id: str) -> GameSpec:
    """The spec of a game id.

    Raises:
        ConfigError: No such game (``field`` is ``game``; the message lists the known ids).
    """
    spec = _BY_ID.get(game_id)
    if spec is None:
        raise ConfigError(
            f"game {game_id!r} is not a live game; live games: {', '.join(GAME_IDS)}",
            field="game",
            value=game_id,
        )
    return spec


def analyzer_for(game: str, options: Mapping[str, Any] | None = None) -> AnalyzeFunction:
    """The ``analyze`` function of a game id (imports its par sheet: numpy).

    Args:
        game: The game id.
        options: Game options the par sheet reads (``tablectl analyze --option``), validated
            like a table's ``game_options``; only those the par sheet names in its
            ``PAR_SHEET_OPTIONS`` are accepted (the others do not change the figures).

    Raises:
        UnknownGame: No such game.
        ConfigError: An option that is unknown, wrong, or not read by the par sheet.
    """
    spec = _BY_ID.get(game)
    if spec is None:
        raise UnknownGame(f"unknown game {game!r}; known: {', '.join(ANALYZERS)}", game=game)
    analyze = spec.analyzer()
    if not options:
        return analyze
    readable: tuple[str, ...] = getattr(
        importlib.import_module(spec.par_sheet), "PAR_SHEET_OPTIONS", ()
    )
    for key in options:
        if key not in readable:
            raise ConfigError(
                f"the par sheet of {game} does not read option {key!r}; it reads: "
                f"{', '.join(readable) or 'none'}",
                field=f"{OPTIONS_FIELD}.{key}",
                game=game,
            )
    validated = validate_options(game, options)
    with_options: Callable[..., AnalysisReport] = analyze

    def bound(*, method: Method, samples: int, seed: int, progress: bool) -> AnalysisReport:
        return with_options(
            method=method, samples=samples, seed=seed, progress=progress, options=validated
        )

    return bound


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


def _paytables(spec: GameSpec, overrides: Mapping[str, Mapping[str, str]]) -> PayTables:
    if not spec.bet_ids:
        if overrides:
            raise ConfigError(
                f"{spec.name} has no house bets, so no pay tables to override",
                field="paytables",
                game=spec.id,
            )
        return spec.default_paytables
    try:
        return merge_paytables(spec.default_paytables, overrides)
    except PayTableError as exc:
        bet = exc.context.get("bet")
        where = f"paytables.{bet}" if bet else "paytables"
        if "outcome" in exc.context:
            where += f".{exc.context['outcome']}"
        raise ConfigError(exc.message, field=where, game=spec.id) from exc


def validate_options(game_id: str, options: Mapping[str, Any]) -> GameOptions:
    """The game's options, validated (defaults filled in).

    Raises:
        ConfigError: Unknown game, or an option that is unknown or wrong (``field`` names it).
    """
    from pydantic import ValidationError

    spec = game_spec(game_id)
    if not isinstance(options, Mapping):
        raise ConfigError(f"{OPTIONS_FIELD} must be a table of options", field=OPTIONS_FIELD)
    try:
        return spec.options.model_validate(dict(options))
    except ValidationError as exc:
        raise _options_error(game_id, exc) from exc


def make_live_game(
    game_id: str,
    options: Mapping[str, Any],
    paytable_overrides: Mapping[str, Mapping[str, str]],
) -> LiveGame:
    """The live game a table runs.

    Args:
        game_id: One of :data:`GAME_IDS`.
        options: The table's ``game_options`` (see each options model; ``{}`` for defaults).
        paytable_overrides: bet id -> outcome -> ratio, over the game's defaults.

    Raises:
        ConfigError: Unknown game, a bad option or pay-table override; ``field`` names it.
    """
    validated = validate_options(game_id, options)
    spec = game_spec(game_id)
    tables = _paytables(spec, paytable_overrides)
    try:
        return spec.build_live(validated, tables)
    except RulesError as exc:  # pragma: no cover - options models keep the rules' limits
        raise ConfigError(exc.message, field=OPTIONS_FIELD, game=game_id) from exc


__all__ = [
    "ANALYZERS",
    "DEFAULT_GAME",
    "GAMES",
    "GAME_IDS",
    "analyzer_for",
    "game_spec",
    "make_live_game",
    "validate_options",
]
