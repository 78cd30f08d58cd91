"""Scenarios: a table's incident as a file (``simulators/scenarios/*.toml``) to replay.

A scenario is a scripted deck plus faults at given cards::

    name = "worn card"
    description = "The 3rd card is worn: it misreads three times before it reads."
    game = "teen-patti-20-20"        # optional: the deck the cards must come from
    cards = ["As", "Kd", "7h", "2c", "Qs", "9d"]
    seed = 7                         # optional: seed of the random faults below

    [faults]                         # optional: random faults for the whole run
    garbage_rate = 0.05

    [[fault]]
    at_card = 3                      # 1-based: the first card dealt is card 1
    kind = "misread"
    times = 3

``kind`` is one of ``misread``, ``corrupt``, ``garbage``, ``loss`` (counted with ``times``),
``double_read``, ``delay``, ``unplug``, ``heartbeat_stop`` (timed with ``seconds``); see
:class:`simulators.faults.CardFault`. Errors name the file, the line and the field.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from drivers.codec import CardFrame
from drivers.errors import FrameError
from simulators.decks import GAME_DECKS, deck_for_game
from simulators.errors import SimulatorConfigError
from simulators.faults import FAULT_KINDS, RATES, TIMING, CardFault, FaultKind, FaultPlan

SCENARIO_DIR = Path(__file__).with_name("scenarios")
"""Where the shipped scenarios live."""

_TOP_KEYS = {"name", "description", "game", "cards", "seed", "faults", "fault"}
_RATE_KEYS = {*RATES, *TIMING}
_FAULT_KEYS = {"at_card", "kind", "times", "seconds", "note"}
_TIMED = {"delay", "unplug", "heartbeat_stop"}


class ScenarioError(SimulatorConfigError):
    """A scenario file that cannot be used.

    Attributes:
        path: The file.
        line: The line (1-based) the problem is on, when known.
        field: The field (``fault[2].kind``), when the problem is one field.
        reason: What is wrong.
    """

    def __init__(
        self, path: Path, reason: str, *, line: int | None = None, field: str = ""
    ) -> None:
        where = f"{path}" + (f":{line}" if line is not None else "")
        what = f" ({field})" if field else ""
        super().__init__(f"{where}{what}: {reason}")
        self.path = path
        self.line = line
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Scenario:
    """A loaded scenario.

    Attributes:
        name: Short name.
        description: What happened at the table.
        game: The game whose deck the cards come from, when given.
        cards: The scripted deck, in dealing order.
        faults: The fault plan (scripted faults with 0-based card indexes).
        path: The file it came from.
    """

    name: str
    description: str
    game: str | None
    cards: tuple[str, ...]
    faults: FaultPlan
    path: Path


def _lines(text: str) -> tuple[dict[str, int], list[int]]:
    """Line numbers of top-level keys and of every ``[[fault]]`` header."""
    keys: dict[str, int] = {}
    faults: list[int] = []
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("[[fault]]"):
            faults.append(number)
            table = "fault"
        elif stripped.startswith("["):
            table = stripped.strip("[]").strip()
            keys.setdefault(table, number)
        elif (match := re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*=", stripped)) and not table:
            keys.setdefault(match.group(1), number)
    return keys, faults


def _fault_key_line(text: str, start: int, key: str) -> int:
    for number, line in enumerate(text.splitlines()[start:], start=start + 1):
        stripped = line.strip()
        if stripped.startswith("["):
            break
        if re.match(rf"{key}\s*=", stripped):
            return number
    return start


_Fail = Callable[..., ScenarioError]
"""Builds the error for a reason and a field (and, optionally, a line)."""


def _read(file: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and its TOML."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(file, f"cannot read the file: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        raise ScenarioError(
            file, f"not valid TOML: {exc}", line=int(found.group(1)) if found else None
        ) from exc
    return text, data


def _checked_header(data: dict[str, Any], file: Path, fail: _Fail) -> tuple[str, str, str | None]:
    """The scenario's name, description and game."""
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise fail(f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})", unknown[0])
    name = data.get("name", file.stem)
    description = data.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise fail("must be a string", "name" if not isinstance(name, str) else "description")
    game = data.get("game")
    if game is not None and game not in GAME_DECKS:
        raise fail(f"unknown game {game!r} (known: {', '.join(sorted(GAME_DECKS))})", "game")
    return name, description, game


def _checked_cards(data: dict[str, Any], game: str | None, fail: _Fail) -> list[str]:
    """The scripted cards, each fit for a CARD frame and (with a game) in its deck."""
    cards = data.get("cards")
    if not isinstance(cards, list) or not cards or not all(isinstance(c, str) for c in cards):
        raise fail("must be a non-empty list of card values (strings)", "cards")
    deck = deck_for_game(game) if game is not None else None
    for index, value in enumerate(cards):
        try:
            CardFrame(value=value)
            if deck is not None:
                deck.parse(value)
        except (FrameError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "message", None) or str(exc)
            what = f"card {index + 1} {value!r} cannot be dealt: {reason}"
            raise fail(what, f"cards[{index}]") from exc
    return cards


def _checked_rates(data: dict[str, Any], fail: _Fail) -> tuple[int, dict[str, Any]]:
    """The fault seed and the ``[faults]`` rates."""
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise fail("must be an integer", "seed")
    rates = data.get("faults", {})
    if not isinstance(rates, dict):
        raise fail("must be a table", "faults")
    unknown = sorted(set(rates) - _RATE_KEYS)
    if unknown:
        raise fail(f"unknown fault option (known: {', '.join(sorted(_RATE_KEYS))})", "faults")
    return seed, rates


def _checked_fault(entry: dict[str, Any], n_cards: int, bad: _Fail) -> CardFault:
    """One ``[[fault]]`` table; ``bad(reason, key)`` names its line."""
    extra = sorted(set(entry) - _FAULT_KEYS)
    if extra:
        raise bad(f"unknown key (known: {', '.join(sorted(_FAULT_KEYS))})", extra[0])
    at = entry.get("at_card")
    if isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= n_cards:
        raise bad(f"must be a card number 1-{n_cards} (1 is the first card)", "at_card")
    kind = entry.get("kind")
    if kind not in FAULT_KINDS:
        raise bad(f"unknown fault kind {kind!r} (known: {', '.join(FAULT_KINDS)})", "kind")
    times = entry.get("times", 1)
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise bad("must be an integer >= 1", "times")
    seconds = entry.get("seconds", 1.0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise bad("must be a number of seconds", "seconds")
    if kind in _TIMED and not 0 < seconds <= 3600:
        raise bad("must be above 0 and at most 3600", "seconds")
    return CardFault(at=at - 1, kind=cast("FaultKind", kind), times=times, seconds=float(seconds))


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file.

    Raises:
        ScenarioError: Unreadable file, TOML syntax, unknown key, wrong type or value; the
            message names the file, the line and the field.
    """
    file = Path(path)
    text, data = _read(file)
    keys, fault_lines = _lines(text)

    def fail(reason: str, field: str, line: int | None = None) -> ScenarioError:
        top = re.split(r"[.\[]", field)[0]
        return ScenarioError(file, reason, line=line or keys.get(top), field=field)

    name, description, game = _checked_header(data, file, fail)
    cards = _checked_cards(data, game, fail)
    seed, rates = _checked_rates(data, fail)

    script: list[CardFault] = []
    entries = data.get("fault", [])
    if not isinstance(entries, list):
        raise fail("must be an array of tables: [[fault]]", "fault")
    for number, entry in enumerate(entries, start=1):
        header = fault_lines[number - 1] if number - 1 < len(fault_lines) else None
        prefix = f"fault[{number}]"

        def bad(reason: str, key: str, header: int | None = header, prefix: str = prefix) -> Any:
            line = _fault_key_line(text, header, key) if header is not None else None
            return ScenarioError(file, reason, line=line, field=f"{prefix}.{key}")

        script.append(_checked_fault(cast("dict[str, Any]", entry), len(cards), bad))
    try:
        plan = FaultPlan(**rates, script=tuple(script), seed=seed)
    except (SimulatorConfigError, TypeError) as exc:
        raise fail(str(exc), "faults") from exc
    return Scenario(name, description, game, tuple(cards), plan, file)


def shipped_scenarios() -> list[Path]:
    """The scenario files that come with tablectl."""
    return sorted(SCENARIO_DIR.glob("*.toml"))
