"""A game described once: what the registry holds for each game.

A :class:`GameSpec` is built in the game's package (``controller/games/<game>/__init__.py``)
from what its modules declare: the :class:`~controller.games.base.GameFacts` of its rules
module (id, name, deck, bet ids, pay tables), its rules object and deal plan, its live options
model and live step-machine factory (``live.py``), and the module of its par sheet
(``par_sheet.py``, imported only when a par sheet is asked for: it loads numpy).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict

from controller.games.base import DealPlan, Declared, GameFacts
from controller.money import PayTables

if TYPE_CHECKING:
    from controller.analysis import AnalyzeFunction
    from controller.games.live.base import LiveGame

OPTIONS_FIELD: Final = "game_options"
"""Where a game's live options live in a table config (named in errors)."""


class GameOptions(BaseModel):
    """Base of every game's live options: unknown keys are errors, the options are frozen.

    Every field has a default that makes a good demo, so ``{}`` is a valid table.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


LiveFactory = Callable[[Any, PayTables], "LiveGame"]
"""Builds a table's live game from its validated options and its merged pay tables."""


@dataclass(frozen=True, slots=True)
class GameSpec(Declared):
    """Everything the rest of the controller needs to know about one game.

    ``id``, ``name``, ``deck``, ``bet_ids`` and ``default_paytables`` read ``facts``.

    Attributes:
        facts: The game's id, name, deck, bet ids and default pay tables (its rules module's).
        deal_plan: The slots of a round at a table with default options (games with
            decisions deal more or fewer: their live round says which).
        rules: The game's pure rules object (judges and settles a round's hands); ``None``
            for a game played as a state machine between seats (Texas Hold'em: see its
            ``rules.HoldemState``).
        options: The pydantic model of the table's ``game_options``.
        build_live: The live step-machine factory (see :data:`LiveFactory`).
        par_sheet: The module whose ``analyze`` computes the par sheet (loaded on demand).
    """

    facts: GameFacts
    deal_plan: DealPlan
    rules: object | None
    options: type[GameOptions]
    build_live: LiveFactory
    par_sheet: str

    def analyzer(self) -> AnalyzeFunction:
        """The par sheet's ``analyze`` function (imports the par-sheet module: numpy)."""
        module = importlib.import_module(self.par_sheet)
        function: AnalyzeFunction = module.analyze
        return function


__all__ = ["OPTIONS_FIELD", "GameOptions", "GameSpec", "LiveFactory"]
