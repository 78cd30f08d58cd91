"""Helpers the live step machines share: checking what is applied, reading decisions, results.

Every live round answers ``apply_card``, ``apply_decision`` and ``mark_revealed`` by first
checking that what it is fed is what its current step waits for; the checks, their error
messages and context are the same for every game and live here. So do reading a
``{"choice": X}`` decision and the wire form of cards and hand summaries in a result.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from controller.cards import Piece
from controller.errors import IllegalAction, RulesError
from controller.games.base import HandSummary
from controller.games.live.base import JSON, DealStep, DecisionStep, RevealStep, Step
from controller.money import BetResult


class _Revealing(Protocol):
    game_id: ClassVar[str]
    revealed: set[str]

    def next_step(self) -> Step: ...


class RevealsHands:
    """For a round that reveals hidden hands with :class:`RevealStep`: checks and records them.

    The round has a ``revealed: set[str]`` field and a ``game_id`` class attribute.
    """

    def mark_revealed(self: _Revealing, hand: str) -> None:
        """The hidden cards of ``hand`` were published.

        Raises:
            RulesError: No reveal of ``hand`` is due.
        """
        expect_reveal(self.next_step(), hand, self.game_id)
        self.revealed.add(hand)


class NoCarryOver:
    """For a round with no overlay information and nothing that carries over to the next."""

    def mark_info_published(self) -> None:
        """Nothing to do: no overlay information in this game."""

    def table_state_after(self) -> JSON:
        """Nothing carries over between rounds."""
        return {}


def expect_deal(step: Step, index: int, game: str, piece: str = "card") -> DealStep:
    """The step, if it is the deal of slot ``index``.

    Args:
        step: The round's current step.
        index: The slot index the piece was accepted for.
        game: The game id (error context).
        piece: What is dealt, for the message (``"card"``, ``"tile"``).

    Raises:
        RulesError: No piece is awaited at ``index``.
    """
    if not isinstance(step, DealStep) or step.index != index:
        raise RulesError(
            f"{piece} for a slot that is not waiting",
            game=game,
            index=index,
            waiting=step.index if isinstance(step, DealStep) else type(step).__name__,
        )
    return step


def expect_window(step: Step, window: str, game: str) -> DecisionStep:
    """The step, if it is the decision window ``window``.

    Raises:
        IllegalAction: ``window`` is not the open window.
    """
    if not isinstance(step, DecisionStep) or step.window != window:
        open_window = step.window if isinstance(step, DecisionStep) else None
        raise IllegalAction(
            "decision",
            f"window {window!r} is not open (open: {open_window!r})",
            game=game,
            window=window,
        )
    return step


def expect_reveal(step: Step, hand: str, game: str) -> RevealStep:
    """The step, if it is the reveal of ``hand``.

    Raises:
        RulesError: No reveal of ``hand`` is due.
    """
    if not isinstance(step, RevealStep) or step.hand != hand:
        raise RulesError("no reveal of this hand is due", game=game, hand=hand)
    return step


def check_decision_fields(
    decision: JSON, allowed: Iterable[str], window: str, expected: str
) -> None:
    """Check that a decision is a JSON object with no field outside ``allowed``.

    Args:
        decision: The decision as received.
        allowed: The field names it may have.
        window: The window it is for (error context).
        expected: The words after ``"expected "`` in the error (``"only 'choice'"``).

    Raises:
        IllegalAction: Not an object, or an unknown field (all unknown fields are named).
    """
    if not isinstance(decision, Mapping):
        raise IllegalAction("decision", "a decision is a JSON object", window=window)
    extra = sorted(set(decision) - set(allowed))
    if extra:
        raise IllegalAction(
            "decision", f"unknown field(s) {extra}; expected {expected}", window=window
        )


def read_choice(decision: JSON, options: tuple[str, ...], window: str) -> str:
    """Read ``{"choice": X}`` with X one of ``options``; raise IllegalAction otherwise."""
    check_decision_fields(decision, ("choice",), window, "only 'choice'")
    choice = decision.get("choice")
    if choice not in options:
        raise IllegalAction(
            "decision",
            f"choice {choice!r} is not offered; options: {list(options)}",
            window=window,
            choice=choice,
        )
    return str(choice)


def cards_wire(hands: Mapping[str, Sequence[Piece]]) -> dict[str, list[str]]:
    """``{hand: [notation, ...]}``: the ``cards`` of a result."""
    return {label: [str(piece) for piece in pieces] for label, pieces in hands.items()}


def summary_wire(summary: HandSummary) -> dict[str, str]:
    """``{"category", "description"}``: one hand of a result's ``hands``."""
    return {"category": summary.category, "description": summary.description}


def summaries_wire(summaries: Mapping[str, HandSummary]) -> dict[str, Any]:
    """``{hand: {"category", "description"}}``: the ``hands`` of a result."""
    return {label: summary_wire(summary) for label, summary in summaries.items()}


def bet_lines(
    settled: Mapping[str, BetResult], *, default: bool = False, **qualifiers: str
) -> list[JSON]:
    """Lines of a result's ``bets`` list: one per bet id, with the same qualifiers.

    Args:
        settled: Each bet id's settlement (per unit staked).
        default: Mark the lines as the ones for a wager that made no choice (``stayed``, the
            house way): ``"default": true``.
        **qualifiers: ``position``, ``path`` or ``setting`` (docs/mqtt.md, "Settling bets").

    Returns:
        ``[{"bet", <qualifiers>, "outcome", "payout", "reason"?, "default"?}, ...]``.
    """
    lines: list[JSON] = []
    for bet, result in settled.items():
        line: dict[str, Any] = {"bet": bet, **qualifiers, **result.to_wire()}
        if default:
            line["default"] = True
        lines.append(line)
    return lines
