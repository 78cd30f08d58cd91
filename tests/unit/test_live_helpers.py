"""A driver for live rounds (what the orchestrator does, minus the I/O), and its own checks.

Other ``test_live_*`` modules import :func:`drive` and :func:`replay`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.cards import Deck, Piece, parse_piece
from controller.errors import RulesError
from controller.games.live.base import (
    JSON,
    DealStep,
    DecisionStep,
    FinishStep,
    InfoStep,
    LiveRound,
    RevealStep,
    Step,
)

Decider = Callable[[DecisionStep], JSON | None]


@dataclass
class Trace:
    """What a driven round did.

    Attributes:
        steps: Every step taken, in order.
        applied: What was fed back, in order (``("card", index, piece)``, ``("decision",
            window, normalised)``, ``("info",)``, ``("reveal", hand)``).
        normalised: The normalised decisions, by window.
    """

    steps: list[Step] = field(default_factory=list)
    applied: list[tuple[Any, ...]] = field(default_factory=list)
    normalised: dict[str, JSON] = field(default_factory=dict)

    def of(self, kind: type) -> list[Any]:
        return [step for step in self.steps if isinstance(step, kind)]


def pieces(text: str | Iterable[str]) -> Iterator[Piece]:
    items = text.split() if isinstance(text, str) else list(text)
    return iter(parse_piece(item) for item in items)


def drive(
    rnd: LiveRound,
    cards: Iterator[Piece],
    decide: Decider | None = None,
    *,
    max_steps: int = 1000,
) -> Trace:
    """Run a round to its finish the way the orchestrator does.

    Each step is asked for twice (``next_step`` must be idempotent). A decider returning
    ``None`` lets the deadline's default apply.
    """
    trace = Trace()
    for _ in range(max_steps):
        step = rnd.next_step()
        assert rnd.next_step() == step, "next_step is not idempotent"
        trace.steps.append(step)
        if isinstance(step, DealStep):
            piece = next(cards)
            rnd.apply_card(step.index, piece)
            trace.applied.append(("card", step.index, piece))
        elif isinstance(step, DecisionStep):
            chosen = decide(step) if decide is not None else None
            decision = step.default if chosen is None else chosen
            normalised = rnd.apply_decision(step.window, decision)
            json.dumps(normalised)
            trace.applied.append(("decision", step.window, normalised))
            trace.normalised[step.window] = normalised
        elif isinstance(step, InfoStep):
            json.dumps(step.data)
            rnd.mark_info_published()
            trace.applied.append(("info",))
        elif isinstance(step, RevealStep):
            rnd.mark_revealed(step.hand)
            trace.applied.append(("reveal", step.hand))
        else:
            assert isinstance(step, FinishStep)
            return trace
    raise AssertionError(f"round did not finish in {max_steps} steps")


def replay(rnd: LiveRound, applied: list[tuple[Any, ...]]) -> None:
    """Feed a fresh round what another one was fed (journal replay)."""
    for item in applied:
        if item[0] == "card":
            rnd.apply_card(item[1], item[2])
        elif item[0] == "decision":
            rnd.apply_decision(item[1], item[2])
        elif item[0] == "info":
            rnd.mark_info_published()
        else:
            rnd.mark_revealed(item[1])


def shuffled(deck: Deck, seed: int) -> Iterator[Piece]:
    items = list(deck)
    random.Random(seed).shuffle(items)
    return iter(items)


def test_pieces_reads_cards_and_tiles() -> None:
    assert [str(p) for p in pieces("As wd 9p JK")] == ["As", "wd", "9p", "JK"]


def test_drive_refuses_a_round_that_never_finishes() -> None:
    class Stuck:
        def next_step(self) -> Step:
            return InfoStep("x", {})

        def mark_info_published(self) -> None:
            pass

    with pytest.raises(AssertionError, match="did not finish"):
        drive(Stuck(), iter(()), max_steps=3)  # type: ignore[arg-type]


def test_replay_reports_a_bad_feed() -> None:
    class Refuses:
        def apply_card(self, index: int, piece: Piece) -> None:
            raise RulesError("no")

    with pytest.raises(RulesError):
        replay(Refuses(), [("card", 0, parse_piece("As"))])  # type: ignore[arg-type]
