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
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from controller import __version__, collector
from controller.broker import choose_broker
from controller.errors import ConfigError
from controller.gates import EventGate
from controller.journal import Journal, JournalEntry
from controller.logs import configure_logging
from controller.orchestrator import Gate, Orchestrator, RoundSummary
from controller.publisher import Publisher
from controller.settings import TableSettings, load_settings
from drivers.supervisor import SupervisedCardSource
from simulators.faults import add_fault_arguments, fault_plan_from_args, scenario_from_args
from simulators.scanner import FaultPlan

if TYPE_CHECKING:
    from controller.metrics import TableMetrics

log = structlog.get_logger(__name__)

SIM_TABLE_ID = "sim-1"


@dataclass(frozen=True, slots=True)
class Simulation:
    """How the simulated scanner behaves (``--simulate``).

    Attributes:
        seed: Seed of the shuffles (one fresh deck per round) and of the betting policy.
        cards: A scripted sequence of card values instead of shuffled decks.
        faults: Faults to inject on the simulated device and line.
        deal_delay: Seconds the simulated dealer takes per card.
        misreads_at: Card index -> misreads before its good read (deterministic faults),
            merged into ``faults``.
    """

    seed: int = 1
    cards: tuple[str, ...] | None = None
    faults: FaultPlan | None = None
    deal_delay: float = 0.4
    misreads_at: dict[int, int] = field(default_factory=dict)

    def fault_plan(self) -> FaultPlan:
        """The faults to inject, with ``misreads_at`` merged in."""
        plan = self.faults if self.faults is not None else FaultPlan()
        if self.misreads_at:
            plan = replace(plan, misreads_at={**plan.misreads_at, **self.misreads_at})
        return plan


@asynccontextmanager
async def simulated_scanner(game_id: str, sim: Simulation) -> AsyncIterator[str]:
    """Start the scanner simulator on a pseudo-terminal; yields the driver URL."""
    from simulators.scanner import ScannerSimulator, deck_for_game

    simulator = ScannerSimulator(
        deck=deck_for_game(game_id),
        seed=sim.seed,
        cards=list(sim.cards) if sim.cards else None,
        faults=sim.fault_plan(),
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
    simulated_betting_seed: int | None = None,
) -> list[RoundSummary]:
    """Run a table until ``rounds`` rounds are finished in its journal, or until stopped.

    Args:
        settings: The table's settings (device URL already final).
        rounds: Stop after this many finished rounds in the journal; ``None``: run on.
        show: Print, as a subscriber sees them, the table's messages on standard output.
        broker_urls_given: Whether the broker URLs were configured; if not, use Mosquitto on
            127.0.0.1:1883 when it answers, else an embedded broker.
        install_signal_handlers: Handle SIGINT/SIGTERM (the CLI does; tests don't).
        simulated_betting_seed: Run a simulated betting system (seeded policy) that answers
            the game's decision windows over MQTT, as a real one would.

    Returns:
        The rounds this run finished.
    """
    from controller import service
    from controller.commands import CommandRouter, StatusWatcher
    from controller.games.registry import make_live_game
    from controller.metrics import TableMetrics

    game = make_live_game(settings.game, settings.game_options, settings.paytables)
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
        metrics = TableMetrics(settings.table_id, version=__version__, game=game.id)
        if settings.metrics.port is not None:
            server = metrics.start_http_server(settings.metrics.host, settings.metrics.port)
            stack.callback(server.shutdown)
        source = SupervisedCardSource(settings.device.url, settings.device.driver)
        await source.open()
        stack.push_async_callback(source.close)
        signer = None
        if settings.signing.key_file is not None:
            from controller.signing import Signer

            signer = Signer.from_file(settings.signing.key_file, settings.signing.key_id)

        scan_times: dict[int, float] = {}

        def on_card(entry: JournalEntry, read_at: float) -> None:
            scan_times[entry.seq] = read_at

        def on_delivered(entry: JournalEntry) -> None:
            read_at = scan_times.pop(entry.seq, None)
            if read_at is not None:
                metrics.observe_scan_to_publish(time.monotonic() - read_at)

        def on_refused(refusal: Exception, entry: JournalEntry | None) -> None:
            metrics.publish_refused()
            tlog.error(
                "broker refused a publish: check the broker ACL for this table",
                error=str(refusal),
                seq=entry.seq if entry is not None else None,
            )

        publisher = Publisher(
            mqtt,
            settings.table_id,
            journal,
            game=game.id,
            version=__version__,
            signer=signer,
            on_delivered=on_delivered,
            on_refused=on_refused,
        )
        gates: list[Gate] = []
        if settings.rounds.wait_for_broker:
            gates.append(EventGate("broker", "broker unreachable", publisher.connected))
        watcher: StatusWatcher | None = None
        if settings.rounds.wait_for_betting_system:
            watcher = StatusWatcher(mqtt, settings.table_id)
            gates.append(EventGate("betting-system", "betting system offline", watcher.online))
        orchestrator = Orchestrator(
            table_id=settings.table_id,
            game=game,
            source=source,
            journal=journal,
            settings=settings.rounds,
            gates=gates,
            replay=publisher.replay,
            on_card=on_card,
            metrics=metrics,
            outbox_idle=publisher.wait_idle,
            between_cards=collector.collect_if_due,
        )
        router = CommandRouter(
            mqtt,
            settings.table_id,
            journal,
            orchestrator.handle_command,
            handler_timeout=mqtt.publish_timeout,
        )
        if install_signal_handlers:
            _install_signal_handlers(orchestrator)

        background: list[asyncio.Task[Any]] = []
        winding_down = False
        watch_stop = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            publisher_task = group.create_task(publisher.run(), name="publisher")
            router_task = group.create_task(router.run(), name="command-router")
            background.append(router_task)
            if watcher is not None:
                background.append(group.create_task(watcher.run(), name="betting-status"))
            background.append(
                group.create_task(
                    _housekeeping(metrics, publisher, journal, settings.journal.path),
                    name="metrics-housekeeping",
                )
            )

            def healthy() -> bool:
                alive = [t for t in background if t is not router_task or not winding_down]
                return not publisher_task.done() and all(not t.done() for t in alive)

            background.append(
                group.create_task(
                    service.run_watchdog(healthy, service.watchdog_interval()), name="watchdog"
                )
            )
            if show:
                from controller.watch import watch

                background.append(
                    group.create_task(
                        watch(
                            mqtt.urls,
                            settings.table_id,
                            protocol=mqtt.protocol,
                            prefix=mqtt.topic_prefix,
                            stop=watch_stop,
                        ),
                        name="watch",
                    )
                )
            if simulated_betting_seed is not None and mqtt.betting_status_topic:
                from simulators.betting import run_simulated_betting

                background.append(
                    group.create_task(
                        run_simulated_betting(
                            mqtt.urls,
                            settings.table_id,
                            protocol=mqtt.protocol,
                            prefix=mqtt.topic_prefix,
                            seed=simulated_betting_seed,
                            stop=watch_stop,
                            status_topic=mqtt.betting_status_topic,
                        ),
                        name="simulated-betting",
                    )
                )
            service.ready(f"table {settings.table_id}: {game.id}")
            try:
                summaries = await orchestrator.run(rounds)
                service.stopping("flushing the outbox")
                # No more commands: what the router journals from now on would not be flushed.
                winding_down = True
                router_task.cancel()
                await asyncio.gather(router_task, return_exceptions=True)
                flushed = await publisher.flush(timeout=mqtt.publish_timeout * 10)
                if not flushed:
                    tlog.warning("outbox not fully delivered at exit; it resumes on restart")
                if show:
                    # Let the terminal view print what the broker is still delivering.
                    await asyncio.sleep(0.3)
            finally:
                watch_stop.set()
                with contextlib.suppress(Exception):
                    await publisher.stop()
                publisher_task.cancel()
                for task in background:
                    task.cancel()
        return summaries


async def _housekeeping(
    metrics: TableMetrics, publisher: Publisher, journal: Journal, path: Path
) -> None:
    """Refresh the slow-moving gauges every few seconds."""
    while True:
        metrics.set_backlog(publisher.backlog())
        metrics.set_broker_connected(publisher.connected.is_set())
        size = sum(
            candidate.stat().st_size
            for candidate in (path, path.with_name(path.name + "-wal"))
            if candidate.exists()
        )
        metrics.set_journal_bytes(size)
        collector.collect_if_due()  # a table waiting for a card collects too
        await asyncio.sleep(5.0)


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
    add_fault_arguments(sim)
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
    collector.take_over()  # collections between cards, not in the middle of one
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
    scenario = scenario_from_args(args)
    cards = tuple(args.cards.replace(",", " ").split()) if args.cards else None
    if scenario is not None:
        cards = cards or scenario.cards
        if scenario.game and "game" not in overrides:
            game_id = scenario.game
            overrides["game"] = game_id
    sim = Simulation(
        seed=args.seed,
        cards=cards,
        faults=fault_plan_from_args(args, seed=args.seed, scenario=scenario),
        deal_delay=args.deal_delay,
    )
    defaults: dict[str, Any] = {
        "table_id": table_id,
        "game": game_id,
        "journal": {"path": Path("var") / f"{table_id}.sqlite"},
        "logging": {"level": "WARNING" if args.show else "INFO"},
    }
    merged = _merge(defaults, overrides)
    configure_logging(level=merged["logging"]["level"], fmt=merged["logging"].get("format", "auto"))
    from controller.games.registry import GAME_IDS as LIVE_GAME_IDS

    if game_id not in LIVE_GAME_IDS:
        raise ConfigError(
            f"unknown game {game_id!r}; games: {', '.join(LIVE_GAME_IDS)}", field="--game"
        )
    async with simulated_scanner(game_id, sim) as url:
        settings = load_settings(None, **_merge(merged, {"device": {"url": url}}))
        settings.journal.path.parent.mkdir(parents=True, exist_ok=True)
        await run_table(
            settings,
            rounds=args.rounds,
            show=args.show,
            broker_urls_given=bool(settings.mqtt.urls),
            install_signal_handlers=True,
            simulated_betting_seed=args.seed,
        )
    return 0
