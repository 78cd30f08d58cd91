"""Which games a table can deal live, by game id."""

from __future__ import annotations

from controller.errors import ConfigError
from controller.games.base import TableGame

LIVE_GAMES = ("teen-patti-20-20",)
"""Games the orchestrator can run at a table today. The rules of the other games exist
(``tablectl analyze`` covers all five); their live play (decision windows, seats, banker) is
built on top of the same orchestrator."""


def live_game(game_id: str) -> TableGame:
    """The rules object of a game the table can deal live.

    Raises:
        ConfigError: Unknown game, or one that cannot yet be dealt live.
    """
    if game_id == "teen-patti-20-20":
        from controller.games.teen_patti import TEEN_PATTI_20_20

        return TEEN_PATTI_20_20
    raise ConfigError(
        f"game {game_id!r} cannot be dealt live by this controller version; "
        f"live games: {', '.join(LIVE_GAMES)}",
        field="game",
        value=game_id,
    )
