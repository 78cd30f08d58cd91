"""``tablectl pit resume|void|enter-card``, ``tablectl replay``: send a command, print the answer.

Exit status: 0 accepted, 1 refused, 2 no answer in time (or no connection). The client is
:mod:`controller.pitcli`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from controller.broker import DEFAULT_LOCAL_URL
from controller.cli.run import SIM_TABLE_ID

if TYPE_CHECKING:
    from controller.messages import Role


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, metavar="FILE", help="a table config (TOML)")
    parser.add_argument(
        "--broker",
        action="append",
        metavar="URL",
        help="broker URL (repeat to fail over; default: the config's, else the local broker "
        f"{DEFAULT_LOCAL_URL}, as tablectl run --simulate uses)",
    )
    parser.add_argument(
        "--table-id",
        metavar="ID",
        help=f"the table (default: the config's, else {SIM_TABLE_ID}, the simulated table's)",
    )
    parser.add_argument("--username", help="broker user name (e.g. pitboss)")
    parser.add_argument(
        "--password",
        help="broker password (prefer the TABLECTL_PIT_PASSWORD environment variable)",
    )
    parser.add_argument("--ca-file", type=Path, metavar="FILE", help="CA of mqtts:// brokers")
    parser.add_argument("--protocol", choices=("5", "3.1.1"), help="MQTT version (default 5)")
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="seconds to wait (default 10)"
    )
    parser.add_argument("--command-id", metavar="ID", help="command id (default: random)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl pit resume``, ``tablectl pit void`` and ``tablectl replay``."""
    pit = subparsers.add_parser(
        "pit",
        help="pit-boss commands to a table (resume, void, enter-card)",
        description="Send a pit-boss command to a table's controller and print its answer. "
        "Exit 0 accepted, 1 refused, 2 no answer.",
    )
    actions = pit.add_subparsers(dest="pit_command", required=True, metavar="ACTION")
    resume = actions.add_parser("resume", help="continue a halted round")
    _connection_arguments(resume)
    resume.add_argument("--round", metavar="ID", help="the round meant (refused if not current)")
    resume.set_defaults(func=_run_resume)
    void = actions.add_parser("void", help="void the current round (every bet refunded)")
    _connection_arguments(void)
    void.add_argument("--reason", required=True, help="why (journalled and published)")
    void.add_argument("--round", metavar="ID", help="the round meant (refused if not current)")
    void.set_defaults(func=_run_void)
    enter = actions.add_parser(
        "enter-card",
        help="enter the card of the slot the round waits for (a dead reader)",
        description="Enter by hand the card of the slot the table waits for, when its reader "
        "is dead: checked like a read card (in the deck, not dealt yet), journalled with "
        "who and why, and published as manual. Refused when no slot waits.",
    )
    _connection_arguments(enter)
    enter.add_argument("--card", required=True, help="the card, e.g. Qh (tiles: their notation)")
    enter.add_argument("--reason", required=True, help="why (journalled)")
    enter.add_argument(
        "--operator", required=True, metavar="NAME", help="who enters it (journalled)"
    )
    enter.add_argument("--slot", help="the slot meant (refused if the table waits for another)")
    enter.add_argument("--round", metavar="ID", help="the round meant (refused if not current)")
    enter.set_defaults(func=_run_enter_card)

    replay = subparsers.add_parser(
        "replay",
        help="ask a table to re-send its results from a sequence number",
        description="Ask a table's controller to re-send round_result and round_voided "
        "messages with FROM <= seq <= TO on its results topic (flagged replayed). "
        "Exit 0 accepted, 1 refused, 2 no answer.",
    )
    _connection_arguments(replay)
    replay.add_argument("--from-seq", type=int, required=True, metavar="N")
    replay.add_argument("--to-seq", type=int, metavar="M", help="default: up to the last")
    replay.add_argument(
        "--as",
        dest="role",
        choices=("pit", "betting"),
        default="pit",
        help="send as the pit boss (cmd/pit/replay, default) or the betting system (cmd/replay)",
    )
    replay.set_defaults(func=_run_replay)


def target_defaults(
    config: Path | None, brokers: list[str] | None, table_id: str | None
) -> tuple[list[str] | None, str | None]:
    """The brokers and table a pit command goes to when options are left out.

    With a config, its own (``None`` here: :func:`controller.pitcli.resolve_target` reads
    it). Without one, the defaults of ``tablectl run --simulate``: the local broker
    (``mqtt://127.0.0.1:1883``) and the table ``sim-1``, so ``tablectl pit resume`` works
    beside ``make run`` as written.
    """
    if config is not None:
        return brokers, table_id
    return brokers or [DEFAULT_LOCAL_URL], table_id or SIM_TABLE_ID


def _run(args: argparse.Namespace, role: Role, name: str, body: dict[str, Any]) -> int:
    from controller.errors import TablectlError
    from controller.pitcli import EXIT_ACCEPTED, EXIT_NO_ANSWER, resolve_target, send_command

    out: TextIO = sys.stdout
    if args.command_id:
        body = {"command_id": args.command_id, **body}
    brokers, table_id = target_defaults(args.config, args.broker, args.table_id)
    try:
        target = resolve_target(
            config=args.config,
            brokers=brokers,
            table_id=table_id,
            username=args.username,
            password=(
                args.password
                if args.password is not None
                else os.environ.get("TABLECTL_PIT_PASSWORD")
            ),
            ca_file=args.ca_file,
            protocol=args.protocol,
        )
        outcome = asyncio.run(send_command(target, role, name, body, timeout=args.timeout))
    except TablectlError as exc:
        command = "replay" if name == "replay" else f"pit {name}"
        print(f"tablectl {command}: {exc}", file=sys.stderr)
        return EXIT_NO_ANSWER
    print(outcome.text, file=out if outcome.code == EXIT_ACCEPTED else sys.stderr)
    return outcome.code


def _run_resume(args: argparse.Namespace) -> int:
    return _run(args, "pit", "resume", {"round": args.round})


def _run_void(args: argparse.Namespace) -> int:
    return _run(args, "pit", "void", {"round": args.round, "reason": args.reason})


def _run_enter_card(args: argparse.Namespace) -> int:
    body = {
        "round": args.round,
        "card": args.card,
        "reason": args.reason,
        "operator": args.operator,
        "slot": args.slot,
    }
    return _run(args, "pit", "enter-card", body)


def _run_replay(args: argparse.Namespace) -> int:
    body = {"round": None, "from_seq": args.from_seq, "to_seq": args.to_seq}
    return _run(args, args.role, "replay", body)
