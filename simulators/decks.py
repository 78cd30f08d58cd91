"""Which deck each game is dealt from (the registry's decks)."""

from __future__ import annotations

from collections.abc import Callable

from controller.cards import Deck
from controller.games.registry import GAMES
from simulators.errors import SimulatorConfigError

GAME_DECKS: dict[str, Callable[[], Deck]] = {spec.id: spec.facts.new_deck for spec in GAMES}
"""The deck each game is dealt from, by game id."""


def deck_for_game(game_id: str) -> Deck:
    """The deck a game is dealt from.

    Raises:
        SimulatorConfigError: Unknown game id.
    """
    try:
        return GAME_DECKS[game_id]()
    except KeyError:
        raise SimulatorConfigError(
            "unknown game id", game=game_id, known=", ".join(sorted(GAME_DECKS))
        ) from None
