"""Which deck each game is dealt from (light: imported by the CLI at start-up)."""

from __future__ import annotations

from collections.abc import Callable

from controller.cards import Deck
from simulators.errors import SimulatorConfigError

GAME_DECKS: dict[str, Callable[[], Deck]] = {
    "teen-patti-20-20": Deck.standard,
    "three-card-mulligan": Deck.standard,
    "texas-holdem": Deck.standard,
    "break-poker": Deck.with_joker,
    "mahjong-pai-gow": Deck.mahjong_pai_gow,
}
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
