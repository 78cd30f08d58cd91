"""Each journalled result re-evaluated from its cards with the game's rules (``journal verify``).

The journal's own checks (docs/journal.md) see that a round's entries come in a legal order
and that its result names only cards dealt in it; they cannot see that the result *follows*
from those cards. :class:`RulesCheck` can. Given to :meth:`controller.journal.Journal.verify`
(as its :class:`~controller.journal.verify.RoundCheck`), it takes each settled round's
entries and

* replays them through the game's live state machine: the replay a restarted orchestrator
  uses (:meth:`controller.round.Round.replay` for the ``round_opened``, then
  :meth:`~controller.round.Round.apply` for each entry, so the entry that does not replay is
  named), with the game built through the registry
  (:func:`controller.games.registry.make_live_game`): every card and every decision
  (Hold'em's actions, the mulligan, Break Poker's setting, Mahjong Pai Gow's bank offers) goes
  through the rules that refused them live;
* asks the rules for the result (``live.result()``, the body the orchestrator journals) and
  compares it with the ``round_result`` the journal holds: the game and round number, the
  winner, every hand, the cards, every settlement line (outcome and payout, as exact
  fractions; lines matched by their bet id and qualifiers) and the details (Hold'em's pots,
  shares and stacks). Each difference is a :class:`~controller.journal.verify.Problem` at the
  result's ``seq``, saying what the journal says and what the rules give;
* checks what each round opened with (``round_opened``'s ``table_state``: Hold'em's button
  and stacks, Mahjong Pai Gow's banker) against what the previous settled round's rules left
  (``live.table_state_after()``; ``{}`` before the first; a void leaves it unchanged, as the
  orchestrator does).

A voided or unfinished round has no result to re-evaluate: only its table state is checked.
Pure: no I/O, no clock. It never raises on what it reads: a body the rules cannot take is a
problem naming the entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

from controller.errors import ConfigError
from controller.games.live.base import DealStep, DecisionStep, FinishStep, LiveGame, Step
from controller.games.registry import make_live_game
from controller.journal import QUALIFIERS, EntryKind
from controller.journal.verify import Problem, RoundEntries
from controller.round import Round

MAX_DIFFERENCES: Final = 20
"""A round's differences reported one by one; beyond this many, one line counts the rest."""

SHOWN_CHARS: Final = 160
"""How much of a differing value a problem quotes."""

_MISSING: Final = object()
"""Stands for a key one side does not have."""

_FIELD_ORDER: Final = ("game", "round_no", "winner", "hands", "cards", "bets", "details")
"""The result's fields in the order their differences are reported."""


class RulesCheck:
    """Re-evaluates every settled round of a journal with its game's rules.

    One instance checks one journal, its rounds in the order they end (it keeps what each
    settled round left for the next).

    Args:
        games: The live game of each game id the table ran, built with the table's options
            and pay tables (:meth:`for_table`). A game id not given is built with the game's
            default options and pay tables.
    """

    def __init__(self, games: Mapping[str, LiveGame] | None = None) -> None:
        self._games: dict[str, LiveGame] = dict(games or {})
        self._refused: dict[str, str] = {}
        # What the last settled round left the next (canonical JSON); ``None`` once a round
        # could not be re-evaluated (what it left is unknown, so the next is not judged).
        self._carry: str | None = _canonical({})
        self._carried_from: str | None = None

    @classmethod
    def for_table(
        cls,
        game_id: str,
        options: Mapping[str, Any],
        paytables: Mapping[str, Mapping[str, str]],
    ) -> RulesCheck:
        """The check of a table that runs ``game_id`` with these options and pay tables.

        Raises:
            ConfigError: Unknown game, a bad option or pay-table override (``field`` names it).
        """
        return cls({game_id: make_live_game(game_id, options, paytables)})

    def _game(self, game_id: str) -> LiveGame | str:
        """The live game of ``game_id``, or why there is none."""
        game = self._games.get(game_id)
        if game is not None:
            return game
        refused = self._refused.get(game_id)
        if refused is not None:
            return refused
        try:
            game = make_live_game(game_id, {}, {})
        except ConfigError as exc:
            self._refused[game_id] = exc.message
            return exc.message
        self._games[game_id] = game
        return game

    def check_round(
        self, round_id: str, entries: RoundEntries, *, finished: bool
    ) -> Iterable[Problem]:
        """The problems of one round: its table state, and its result against the rules.

        Args:
            round_id: The round.
            entries: Its entries, ``(seq, kind, body)`` from its ``round_opened`` on.
            finished: Whether the round has its result or void (the last entry).
        """
        if not entries or entries[0][1] != EntryKind.ROUND_OPENED:
            return []
        problems = self._check_table_state(round_id, entries[0])
        if finished and entries[-1][1] == EntryKind.ROUND_RESULT:
            problems.extend(self._reevaluate(round_id, entries))
        return problems

    def _check_table_state(
        self, round_id: str, opened: tuple[int, str, Mapping[str, Any]]
    ) -> list[Problem]:
        seq, _, body = opened
        state = body.get("table_state")
        if state is None:
            state = {}
        carried = _canonical(state)
        if self._carry is None or carried == self._carry:
            return []
        after = (
            f"round {self._carried_from} left"
            if self._carried_from
            else "the journal's first round opens with"
        )
        return [
            Problem(
                f"round_opened carries table state {_clip(carried)}, but {after} "
                f"{_clip(self._carry)}",
                seq,
                round_id,
            )
        ]

    def _reevaluate(self, round_id: str, entries: RoundEntries) -> list[Problem]:
        """Replay the round through its game's rules and compare their result with the journal's.

        What the round leaves the next is the rules' (from the journalled table state, cards
        and decisions), or unknown when the rules cannot settle it.
        """
        self._carry, self._carried_from = None, round_id
        open_seq, _, opened = entries[0]
        result_seq, _, recorded = entries[-1]
        game_id = opened.get("game")
        game = self._game(game_id) if isinstance(game_id, str) else "no game id"
        if isinstance(game, str):
            return [
                Problem(
                    f"the result cannot be re-evaluated: round_opened names game {game_id!r} "
                    f"({game})",
                    open_seq,
                    round_id,
                )
            ]
        replayed = _replay(game, entries)
        if isinstance(replayed, Problem):
            return [Problem(replayed.what, replayed.seq, round_id)]
        try:
            step = replayed.live.next_step()
            if not isinstance(step, FinishStep):
                return [
                    Problem(
                        "round_result before the rules finished the round: they still wait "
                        f"for {_describe(step)}",
                        result_seq,
                        round_id,
                    )
                ]
            computed = json.loads(
                json.dumps(
                    {"game": game.id, "round_no": replayed.round_no, **replayed.live.result()}
                )
            )
            # Through JSON as the orchestrator keeps it (meta), so keys compare as text.
            after = _canonical(json.loads(json.dumps(dict(replayed.live.table_state_after()))))
        except Exception as exc:  # the rules on a hostile journal: a problem, never a crash
            return [
                Problem(
                    f"the rules of {game.id} cannot settle the round: {_reason(exc)}",
                    result_seq,
                    round_id,
                )
            ]
        self._carry, self._carried_from = after, round_id
        found = result_differences(recorded, computed)
        problems = [Problem(what, result_seq, round_id) for what in found[:MAX_DIFFERENCES]]
        if len(found) > MAX_DIFFERENCES:
            problems.append(
                Problem(
                    f"... and {len(found) - MAX_DIFFERENCES} more differences from the rules' "
                    "result",
                    result_seq,
                    round_id,
                )
            )
        return problems


def _replay(game: LiveGame, entries: RoundEntries) -> Round | Problem:
    """The round rebuilt through the rules, or the problem of the entry they refuse."""
    open_seq, open_kind, opened = entries[0]
    try:
        current = Round.replay([(open_kind, opened)], game)
    except Exception as exc:  # a hostile round_opened: a problem, never a crash
        return Problem(
            f"the rules of {game.id} cannot open the round as journalled: {_reason(exc)}",
            open_seq,
        )
    if current is None:  # pragma: no cover - entries[0] is a round_opened
        return Problem("the round has no round_opened", open_seq)
    for seq, kind, body in entries[1:]:
        try:
            current.apply(kind, body)
        except Exception as exc:  # an entry the rules refuse (or cannot read)
            return Problem(
                f"{kind} does not replay through the rules of {game.id}: {_reason(exc)}", seq
            )
    return current


def _describe(step: Step) -> str:
    if isinstance(step, DealStep):
        return f"card {step.index} (slot {step.slot.name})"
    if isinstance(step, DecisionStep):
        return f"the decision of window {step.window}"
    return type(step).__name__


def _reason(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) else str(exc)
    return f"{type(exc).__name__}: {_clip(text)}"


def result_differences(recorded: Mapping[str, Any], computed: Mapping[str, Any]) -> list[str]:
    """Every way a journalled ``round_result`` body differs from the rules' result.

    Args:
        recorded: The body the journal holds.
        computed: The body the rules give (``game``, ``round_no`` and ``live.result()``).

    Returns:
        One sentence per difference, naming the field (``winner``, ``hands.A.category``, a
        settlement line by its bet id and qualifiers, ``details.pots[0].shares.seat6``...),
        what the journal says and what the rules give; empty when they agree.
    """
    found: list[str] = []
    keys = [key for key in _FIELD_ORDER if key in recorded or key in computed]
    keys += sorted((set(recorded) | set(computed)) - set(_FIELD_ORDER))
    for key in keys:
        mine, theirs = recorded.get(key, _MISSING), computed.get(key, _MISSING)
        if key == "bets" and isinstance(mine, list) and isinstance(theirs, list):
            found.extend(settlement_differences(mine, theirs))
        else:
            _differences(key, mine, theirs, found)
    return found


def _differences(path: str, mine: Any, theirs: Any, found: list[str]) -> None:
    if isinstance(mine, Mapping) and isinstance(theirs, Mapping):
        for key in [*mine, *(key for key in theirs if key not in mine)]:
            _differences(f"{path}.{key}", mine.get(key, _MISSING), theirs.get(key, _MISSING), found)
        return
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for index, (left, right) in enumerate(zip(mine, theirs, strict=True)):
            _differences(f"{path}[{index}]", left, right, found)
        return
    if _canonical(mine) != _canonical(theirs):
        found.append(f"{path}: the journal says {_show(mine)}, the rules give {_show(theirs)}")


def settlement_differences(mine: Sequence[Any], theirs: Sequence[Any]) -> list[str]:
    """How the journal's settlement lines differ from the rules' (outcome, exact payout...).

    Lines are paired by their bet id and qualifiers (``position``, ``path``, ``setting``),
    the n-th line of a key in one list with the n-th of the same key in the other. Payouts
    compare as exact fractions (``"1.95"``); every other field as JSON.
    """
    found: list[str] = []
    ours = _by_key(mine)
    rules = _by_key(theirs)
    for key in [*ours, *(key for key in rules if key not in ours)]:
        left, right = ours.get(key, []), rules.get(key, [])
        for index in range(max(len(left), len(right))):
            label = _label(key, index)
            if index >= len(right):
                found.append(
                    f"settlement {label}: the journal has the line {_show(left[index])}, "
                    "the rules give no such line"
                )
            elif index >= len(left):
                found.append(
                    f"settlement {label}: the journal has no such line, the rules give "
                    f"{_show(right[index])}"
                )
            else:
                found.extend(_line_differences(label, left[index], right[index]))
    return found


def _by_key(lines: Sequence[Any]) -> dict[tuple[str, ...], list[Any]]:
    grouped: dict[tuple[str, ...], list[Any]] = {}
    for line in lines:
        grouped.setdefault(_line_key(line), []).append(line)
    return grouped


def _line_key(line: Any) -> tuple[str, ...]:
    if not isinstance(line, Mapping):
        return ("not a line",)
    key = [f"bet {_show(line.get('bet'))}"]
    key += [f"{name} {_show(line[name])}" for name in QUALIFIERS if line.get(name) is not None]
    return tuple(key)


def _label(key: tuple[str, ...], index: int) -> str:
    label = ", ".join(key)
    return f"({label}; line {index + 1} of that key)" if index else f"({label})"


def _line_differences(label: str, mine: Any, theirs: Any) -> list[str]:
    if not (isinstance(mine, Mapping) and isinstance(theirs, Mapping)):
        if _canonical(mine) == _canonical(theirs):
            return []
        return [
            f"settlement {label}: the journal says {_show(mine)}, the rules give {_show(theirs)}"
        ]
    found: list[str] = []
    for name in [*mine, *(name for name in theirs if name not in mine)]:
        left, right = mine.get(name, _MISSING), theirs.get(name, _MISSING)
        if name == "payout" and _same_amount(left, right):
            continue
        if name != "payout" and _canonical(left) == _canonical(right):
            continue
        found.append(
            f"settlement {label}: {name}: the journal says {_show(left)}, the rules give "
            f"{_show(right)}"
        )
    return found


def _same_amount(left: Any, right: Any) -> bool:
    """Whether two payouts are the same exact amount (``"1.95"`` and ``"1.950"`` are)."""
    amounts = [_amount(left), _amount(right)]
    if amounts[0] is not None and amounts[1] is not None:
        return amounts[0] == amounts[1]
    return _canonical(left) == _canonical(right)


def _amount(value: Any) -> Fraction | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return Fraction(value)
    except (ValueError, ZeroDivisionError):
        return None


def _canonical(value: Any) -> str:
    """One text per JSON value (keys sorted), so equal values compare equal."""
    if value is _MISSING:
        return "<missing>"
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _show(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    return _clip(_canonical(value))


def _clip(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 3]}..."


__all__ = ["RulesCheck", "result_differences", "settlement_differences"]
