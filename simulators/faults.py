"""Fault options shared by ``tablectl simulate-scanner`` and ``tablectl run --simulate``.

``add_fault_arguments(parser_or_group)`` adds them; ``fault_plan_from_args(args)`` builds the
:class:`~simulators.scanner.FaultPlan`; with ``--scenario FILE`` the scenario's own faults are
the base and the command-line rates given explicitly are added on top, and
``scenario_from_args(args)`` gives the scenario (its ``cards`` are the deck to script).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulators.scanner import FaultPlan
from simulators.scenario import Scenario, load_scenario


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a rate is between 0 and 1, not {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from exc
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"seconds are between 0 and 3600, not {value}")
    return value


def _cards(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a whole number of cards: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"a number of cards is at least 1, not {value}")
    return value


_RATES = (
    ("--misread-rate", "misread_rate", "share of scans that misread"),
    ("--garbage-rate", "garbage_rate", "share of frames preceded by line garbage"),
    ("--corrupt-rate", "corrupt_rate", "share of transmissions with a flipped bit"),
    ("--double-read-rate", "double_read_rate", "share of cards read twice (a bounce)"),
    ("--loss-rate", "loss_rate", "share of transmissions lost on the line (seeded)"),
    ("--repeat-rate", "duplicate_rate", "share of frames sent twice with the same seq"),
)


def add_fault_arguments(parser: argparse.ArgumentParser | Any) -> None:
    """Add the fault options to a parser or an argument group.

    Every option defaults to ``None`` (not given), so that ``--scenario`` values are only
    overridden by options actually typed.
    """
    for flag, _, text in _RATES:
        parser.add_argument(flag, type=_rate, default=None, metavar="P", help=f"{text} (0-1)")
    parser.add_argument(
        "--delay", type=_seconds, default=None, metavar="S", help="max extra latency per frame"
    )
    parser.add_argument(
        "--byte-by-byte",
        action="store_true",
        default=None,
        help="send one byte at a time (115,200-baud byte time apart)",
    )
    parser.add_argument(
        "--unplug-every",
        type=_cards,
        default=None,
        metavar="N",
        help="pull the cable as every N-th card is dealt (pty/TCP close and come back)",
    )
    parser.add_argument(
        "--unplug-seconds",
        type=_seconds,
        default=None,
        metavar="S",
        help="how long the cable stays out (default 1)",
    )
    parser.add_argument(
        "--heartbeat-stop-after",
        type=_cards,
        default=None,
        metavar="N",
        help="heartbeats stop once N cards were dealt",
    )
    parser.add_argument(
        "--heartbeat-stop-seconds",
        type=_seconds,
        default=None,
        metavar="S",
        help="how long they stay stopped (default 10)",
    )
    parser.add_argument(
        "--scenario",
        type=Path,
        default=None,
        metavar="FILE",
        help="scripted deck and faults (simulators/scenarios/*.toml)",
    )


def scenario_from_args(args: argparse.Namespace) -> Scenario | None:
    """The ``--scenario`` file, loaded (``None`` without one).

    Raises:
        ScenarioError: The file is not a usable scenario (file, line, field, reason).
    """
    path = getattr(args, "scenario", None)
    return load_scenario(path) if path is not None else None


def fault_plan_from_args(
    args: argparse.Namespace, *, seed: int | None = None, scenario: Scenario | None = None
) -> FaultPlan:
    """The fault plan the options describe.

    Args:
        args: Parsed options (from :func:`add_fault_arguments`).
        seed: Seed of the fault draws (default: ``args.fault_seed``, or the scenario's, or 0).
        scenario: An already loaded scenario (default: loaded from ``args.scenario``).

    Raises:
        ScenarioError: The scenario file is not usable.
        SimulatorConfigError: The options do not make a plan (a rate of 1 for misreads).
    """
    if scenario is None:
        scenario = scenario_from_args(args)
    base = scenario.faults if scenario is not None else FaultPlan()
    changes: dict[str, Any] = {}
    for _, name, _ in _RATES:
        value = getattr(args, name if name != "duplicate_rate" else "repeat_rate", None)
        if value is not None:
            changes[name] = value
    for name in (
        "delay",
        "byte_by_byte",
        "unplug_every",
        "unplug_seconds",
        "heartbeat_stop_after",
        "heartbeat_stop_seconds",
    ):
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    if seed is None:
        seed = getattr(args, "fault_seed", None)
    if seed is not None:
        changes["seed"] = seed
    return replace(base, **changes)
