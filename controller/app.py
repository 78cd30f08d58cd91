"""``tablectl run``: a table, real (``--config FILE``) or simulated (``--simulate``).

One process per table. Everything long-lived runs as a named task inside one TaskGroup:
the publisher (outbox), the orchestrator, and in simulation the scanner simulator and the
terminal view. SIGINT/SIGTERM once: no new round opens, a round still in its betting window
is voided with a refund, a started round is completed, the outbox is flushed and the offline
status published. A second signal stops at once; the journal resumes the round on restart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from controller import __version__
from controller.broker import choose_broker
from controller.errors import ConfigError
from controller.games.registry import live_game
from controller.journal import Journal
from controller.logs import configure_logging
from controller.money import merge_paytables
from controller.orchestrator import Orchestrator, RoundSummary
from controller.publisher import Publisher
from controller.settings import TableSettings, load_settings
from drivers.source import open_card_source

log = structlog.get_logger(__name__)

SIM_TABLE_ID = "sim-1"


@dataclass(frozen=True, slots=True)
class Simulation:
    """How the simulated scanner behaves (``--simulate``).

    Attributes:
        seed: Seed of the shuffles and of the faults.
        cards: A scripted sequence of card values instead of shuffled decks.
        misread_rate: Share of scans that come out as misreads.
        garbage_rate: Share of frames preceded by garbage bytes on the line.
        corrupt_rate: Share of frames whose CRC is broken on the line.
        deal_delay: Seconds the simulated dealer takes per card.
        misreads_at: Card index -> misreads before its good read (deterministic faults).
    """

    seed: int = 1
    cards: tuple[str, ...] | None = None
    misread_rate: float = 0.0
    garbage_rate: float = 0.0
    corrupt_rate: float = 0.0
    deal_delay: float = 0.4
    misreads_at: dict[int, int] = field(default_factory=dict)


@asynccontextmanager
async def simulated_scanner(settings_game: str, sim: Simulation) -> AsyncIterator[str]:
    """Start the scanner simulator on a pseudo-terminal; yields the driver URL."""
    from simulators.scanner import FaultPlan, ScannerSimulator, deck_for_game

    simulator = ScannerSimulator(
        deck=deck_for_game(settings_game),
        seed=sim.seed,
        cards=list(sim.cards) if sim.cards else None,
        faults=FaultPlan(
            misread_rate=sim.misread_rate,
            garbage_rate=sim.garbage_rate,
            corrupt_rate=sim.corrupt_rate,
            misreads_at=dict(sim.misreads_at),
        ),
        deal_delay=sim.deal_delay,
    )
    async with simulator.serve_pty() as path:
        yield f"serial://{path}"


async def run_table(
    settings: TableSettings,
    *,
    rounds: int | None = None,
    show: bool = False,
    broker_urls_given: bool = True,
    install_signal_handlers: bool = False,
) -> list[RoundSummary]:
    """Run a table until ``rounds`` rounds are finished in its journal, or until stopped.

    Args:
        settings: The table's settings (device URL already final).
        rounds: Stop after this many finished rounds in the journal; ``None``: run on.
        show: Print, as a subscriber sees them, the table's messages on standard output.
        broker_urls_given: Whether the broker URLs were configured; if not, use Mosquitto on
            127.0.0.1:1883 when it answers, else an embedded broker.
        install_signal_handlers: Handle SIGINT/SIGTERM (the CLI does; tests don't).

    Returns:
        The rounds this run finished.
    """
    game = live_game(settings.game)
    paytables = merge_paytables(game.default_paytables, settings.paytables)
    tlog = log.bind(table=settings.table_id, game=game.id)

    async with AsyncExitStack() as stack:
        mqtt = settings.mqtt
        if not broker_urls_given:
            urls, embedded, protocol = await choose_broker([])
            if embedded is not None:
                await stack.enter_async_context(embedded)
                tlog.info("no broker configured: embedded broker started", url=urls[0])
            else:
                tlog.info("no broker configured: using the local Mosquitto", url=urls[0])
            mqtt = mqtt.model_copy(update={"urls": urls, "protocol": protocol})

        journal = Journal.open(settings.journal.path)
        stack.callback(journal.close)
        source = open_card_source(settings.device.url, settings.device.driver)
        await source.open()
        stack.push_async_callback(source.close)
        publisher = Publisher(mqtt, settings.table_id, journal, game=game.id, version=__version__)
        orchestrator = Orchestrator(
            table_id=settings.table_id,
            game=game,
            paytables=paytables,
            source=source,
            journal=journal,
            settings=settings.rounds,
        )
        if install_signal_handlers:
            _install_signal_handlers(orchestrator)

        watch_stop = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            publisher_task = group.create_task(publisher.run(), name="publisher")
            watch_task = None
            if show:
                from controller.watch import watch

                watch_task = group.create_task(
                    watch(
                        mqtt.urls,
                        settings.table_id,
                        protocol=mqtt.protocol,
                        prefix=mqtt.topic_prefix,
                        stop=watch_stop,
                    ),
                    name="watch",
                )
            try:
                summaries = await orchestrator.run(rounds)
                flushed = await publisher.flush(timeout=mqtt.publish_timeout * 10)
                if not flushed:
                    tlog.warning("outbox not fully delivered at exit; it resumes on restart")
                if watch_task is not None:
                    # Let the terminal view print what the broker is still delivering.
                    await asyncio.sleep(0.3)
            finally:
                watch_stop.set()
                with contextlib.suppress(Exception):
                    await publisher.stop()
                publisher_task.cancel()
                if watch_task is not None:
                    watch_task.cancel()
        return summaries


def _install_signal_handlers(orchestrator: Orchestrator) -> None:
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()

    def on_signal(signum: int) -> None:
        if orchestrator.stopping:
            log.warning("second stop signal: stopping now; the round resumes on restart")
            if main_task is not None:
                main_task.cancel()
            return
        name = signal.Signals(signum).name
        log.warning("stop requested", signal=name)
        print(
            f"\n{name}: stopping after the current round "
            "(a round still in betting is voided and refunded; again to stop at once)",
            file=sys.stderr,
        )
        orchestrator.request_stop()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)


# ---------------------------------------------------------------------- command line


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` sub-command."""
    parser = subparsers.add_parser(
        "run",
        help="run a table (a real one from a config, or a simulated one)",
        description="Run a table. With --config FILE, the table described there; with "
        "--simulate, a table whose card scanner is simulated on a pseudo-terminal.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", type=Path, metavar="FILE", help="table config (TOML)")
    source.add_argument("--simulate", action="store_true", help="simulated scanner")
    parser.add_argument(
        "--game", default=None, help="game id (simulation default: teen-patti-20-20)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        metavar="N",
        help="exit 0 once the journal holds N finished rounds",
    )
    parser.add_argument(
        "--broker",
        action="append",
        default=None,
        metavar="URL",
        help="mqtt://HOST:PORT (repeat for fail-over); default: the config's, "
        "else Mosquitto on 127.0.0.1:1883 if it answers, else embedded",
    )
    parser.add_argument(
        "--protocol", choices=["5", "3.1.1"], default=None, help="MQTT protocol version (default 5)"
    )
    parser.add_argument(
        "--table-id", default=None, help=f"table id (simulation default {SIM_TABLE_ID})"
    )
    parser.add_argument(
        "--journal",
        type=Path,
        default=None,
        metavar="PATH",
        help="journal file (simulation default var/<table-id>.sqlite)",
    )
    parser.add_argument("--betting-seconds", type=float, default=None, metavar="S")
    parser.add_argument("--pause-seconds", type=float, default=None, metavar="S")
    parser.add_argument(
        "--show", action="store_true", help="print the table's messages as a subscriber sees them"
    )
    parser.add_argument("--log-level", default=None, choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-format", default=None, choices=["auto", "json", "console"])
    sim = parser.add_argument_group("simulation (with --simulate)")
    sim.add_argument("--seed", type=int, default=1, help="shuffle and fault seed")
    sim.add_argument(
        "--cards", default=None, help='scripted cards instead of shuffled decks: "As Kd 2c ..."'
    )
    sim.add_argument("--misread-rate", type=float, default=0.0, metavar="P")
    sim.add_argument("--garbage-rate", type=float, default=0.0, metavar="P")
    sim.add_argument("--corrupt-rate", type=float, default=0.0, metavar="P")
    sim.add_argument(
        "--deal-delay",
        type=float,
        default=0.4,
        metavar="S",
        help="seconds the simulated dealer takes per card",
    )
    parser.set_defaults(func=run_command)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.table_id is not None:
        overrides["table_id"] = args.table_id
    if args.game is not None:
        overrides["game"] = args.game
    rounds: dict[str, Any] = {}
    if args.betting_seconds is not None:
        rounds["betting_seconds"] = args.betting_seconds
    if args.pause_seconds is not None:
        rounds["pause_seconds"] = args.pause_seconds
    if rounds:
        overrides["rounds"] = rounds
    if args.journal is not None:
        overrides["journal"] = {"path": args.journal}
    mqtt: dict[str, Any] = {}
    if args.broker:
        mqtt["urls"] = args.broker
    if args.protocol is not None:
        mqtt["protocol"] = args.protocol
    if mqtt:
        overrides["mqtt"] = mqtt
    logging: dict[str, Any] = {}
    if args.log_level is not None:
        logging["level"] = args.log_level
    if args.log_format is not None:
        logging["format"] = args.log_format
    if logging:
        overrides["logging"] = logging
    return overrides


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl run``."""
    if args.rounds is not None and args.rounds < 1:
        raise ConfigError("--rounds must be at least 1", field="--rounds")
    overrides = _overrides(args)
    if args.simulate:
        return asyncio.run(_run_simulated(args, overrides))
    settings = load_settings(args.config, **overrides)
    configure_logging(level=settings.logging.level, fmt=settings.logging.format)
    given = bool(settings.mqtt.urls)
    asyncio.run(
        run_table(
            settings,
            rounds=args.rounds,
            show=args.show,
            broker_urls_given=given,
            install_signal_handlers=True,
        )
    )
    return 0


async def _run_simulated(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    game_id = overrides.get("game", "teen-patti-20-20")
    table_id = overrides.get("table_id", SIM_TABLE_ID)
    sim = Simulation(
        seed=args.seed,
        cards=tuple(args.cards.replace(",", " ").split()) if args.cards else None,
        misread_rate=args.misread_rate,
        garbage_rate=args.garbage_rate,
        corrupt_rate=args.corrupt_rate,
        deal_delay=args.deal_delay,
    )
    defaults: dict[str, Any] = {
        "table_id": table_id,
        "game": game_id,
        "journal": {"path": Path("var") / f"{table_id}.sqlite"},
        "logging": {"level": "WARNING" if args.show else "INFO"},
    }
    live_game(game_id)  # refuse a game that cannot be played live before starting anything
    async with simulated_scanner(game_id, sim) as url:
        settings = load_settings(
            None, **_merge(_merge(defaults, overrides), {"device": {"url": url}})
        )
        configure_logging(level=settings.logging.level, fmt=settings.logging.format)
        settings.journal.path.parent.mkdir(parents=True, exist_ok=True)
        await run_table(
            settings,
            rounds=args.rounds,
            show=args.show,
            broker_urls_given=bool(settings.mqtt.urls),
            install_signal_handlers=True,
        )
    return 0
