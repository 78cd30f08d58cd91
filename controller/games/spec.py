"""A game described once: what the registry holds for each game.

A :class:`GameSpec` is built in the game's package (``controller/games/<game>/__init__.py``)
from what its modules declare: the :class:`~controller.games.base.GameFacts` of its rules
module (id, name, deck, bet ids, pay tables), its rules object and deal plan, and the modules
of its live play (``live.py``: ``Options``, the pydantic model of its options, and ``build``,
its live factory) and of its par sheet (``par_sheet.py``: ``analyze``). Those two are imported
when first needed: the registry (read by the settings, the simulators and ``tablectl --help``)
loads neither pydantic models nor numpy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from controller.games.base import DealPlan, Declared, GameFacts
from controller.money import PayTables

PageHands = list[tuple[str, list[str]]]
"""``(hand, slots)`` in the order a page shows them."""

if TYPE_CHECKING:
    from controller.analysis import AnalyzeFunction
    from controller.games.live.base import LiveGame
    from controller.games.options import GameOptions

OPTIONS_FIELD: Final = "game_options"
"""Where a game's live options live in a table config (named in errors)."""

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
        live: The module of its live play: ``Options`` (the pydantic model of the table's
            ``game_options``) and ``build`` (the live factory, see :data:`LiveFactory`).
        par_sheet: The module whose ``analyze`` computes the par sheet (loads numpy).
    """

    facts: GameFacts
    deal_plan: DealPlan
    rules: object | None
    live: str
    par_sheet: str

    @property
    def options(self) -> type[GameOptions]:
        """The pydantic model of the table's ``game_options`` (imports the live module)."""
        model: type[GameOptions] = importlib.import_module(self.live).Options
        return model

    def plan_for(self, options: GameOptions) -> DealPlan:
        """Every slot a table with these options can deal.

        The live module's ``deal_plan_for(options)`` when the options change the slots
        (Hold'em's seats and burns, Mahjong's positions), else :attr:`deal_plan`.
        """
        plan_for = getattr(importlib.import_module(self.live), "deal_plan_for", None)
        if plan_for is None:
            return self.deal_plan
        plan: DealPlan = plan_for(options)
        return plan

    def page_hands(self, hands: PageHands, seats: tuple[str, ...]) -> PageHands:
        """The hands a page reserves room for, as ``(hand, slots)``.

        From the default plan's ``hands`` and the table's ``seats`` (Hold'em's seats,
        Mahjong's positions, once seen): the live module's ``page_hands(hands, seats)``
        when a round can show other hands than its default plan's (Hold'em's and Mahjong's
        seats, the Mulligan's redraws), else ``hands`` as they are.
        """
        shape = getattr(importlib.import_module(self.live), "page_hands", None)
        if shape is None:
            return hands
        shaped: PageHands = shape(hands, seats)
        return shaped

    @property
    def decision_seconds_option(self) -> str | None:
        """The option that sets the length of the game's decision windows, if it has any.

        The live module's ``DECISION_SECONDS_OPTION`` (Hold'em's ``action_seconds``, Break
        Poker's ``setting_seconds``...); ``None`` for a game without decisions (Teen Patti).
        """
        name = getattr(importlib.import_module(self.live), "DECISION_SECONDS_OPTION", None)
        return name if isinstance(name, str) else None

    def build_live(self, options: GameOptions, paytables: PayTables) -> LiveGame:
        """The table's live game, from its validated options and merged pay tables."""
        build: LiveFactory = importlib.import_module(self.live).build
        return build(options, paytables)

    def analyzer(self) -> AnalyzeFunction:
        """The par sheet's ``analyze`` function (imports the par-sheet module: numpy)."""
        module = importlib.import_module(self.par_sheet)
        function: AnalyzeFunction = module.analyze
        return function


__all__ = ["OPTIONS_FIELD", "GameSpec", "LiveFactory"]
