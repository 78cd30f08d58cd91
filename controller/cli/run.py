"""``tablectl run``: a table, real (``--config FILE``) or simulated (``--simulate``).

The options become settings overrides (command line over environment over file over
defaults); :func:`controller.app.run_table` runs the table. With ``--simulate`` the scanner
simulator (:mod:`simulators.table`) and a simulated betting system are started beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from controller.errors import ConfigError
from simulators.cli import add_fault_arguments

if TYPE_CHECKING:
    from controller.app import Companion
    from controller.mqtt.settings import MqttSettings
    from controller.settings import TableSettings

SIM_TABLE_ID = "sim-1"

_T = TypeVar("_T")

_PENDING_DEVICE = "serial:///dev/pts/pending"
"""Stands for the simulator's pty while the settings are checked, before it exists."""


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
        help="exit 0 once the journal holds N finished rounds (rounds already in the journal "
        "count: a journal with N or more plays none)",
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
    sim.add_argument(
        "--seed",
        type=int,
        default=None,
        help="shuffle and fault seed (default: from the clock, printed so the deal can be "
        "repeated)",
    )
    sim.add_argument(
        "--cards", default=None, help='scripted cards instead of shuffled decks: "As Kd 2c ..."'
    )
    sim.add_argument(
        "--profile",
        default=None,
        metavar="NAME",
        help="the simulated device speaks this device profile (drivers/profiles: "
        "line-shoe, barcode-crlf, or a .toml path) through the profile+serial:// driver",
    )
    add_fault_arguments(sim)
    sim.add_argument(
        "--archive",
        default=None,
        metavar="URL",
        help="archive the table's messages there too (default: archive.sqlite beside the "
        "journal, sqlite:///var/archive.sqlite; postgresql://... works as well; docs/archive.md)",
    )
    sim.add_argument(
        "--no-archive",
        action="store_true",
        help="do not run the archive beside the simulated table",
    )
    sim.add_argument(
        "--deal-delay",
        type=float,
        default=0.4,
        metavar="S",
        help="seconds the simulated dealer takes per card",
    )
    parser.set_defaults(func=run_command)


_OVERRIDES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("table_id", ("table_id",)),
    ("game", ("game",)),
    ("betting_seconds", ("rounds", "betting_seconds")),
    ("pause_seconds", ("rounds", "pause_seconds")),
    ("journal", ("journal", "path")),
    ("broker", ("mqtt", "urls")),
    ("protocol", ("mqtt", "protocol")),
    ("log_level", ("logging", "level")),
    ("log_format", ("logging", "format")),
)
"""Each option that overrides a setting: its ``args`` name and the setting's path."""


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for name, path in _OVERRIDES:
        value = getattr(args, name)
        # ``--broker`` collects a list: an empty one overrides nothing.
        if value is None or (name == "broker" and not value):
            continue
        *parents, leaf = path
        target = overrides
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
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
    from controller import collector
    from controller.app import run_table
    from controller.logs import configure_logging
    from controller.settings import load_settings

    if args.rounds is not None and args.rounds < 1:
        raise ConfigError("--rounds must be at least 1", field="--rounds")
    overrides = _overrides(args)
    if args.simulate:
        return asyncio.run(_run_simulated(args, overrides))
    settings = load_settings(args.config, **overrides)
    configure_logging(level=settings.logging.level, fmt=settings.logging.format)
    given = bool(settings.mqtt.urls)
    collector.take_over()  # collections between cards, not in the middle of one
    summaries = asyncio.run(
        run_table(
            settings,
            rounds=args.rounds,
            show=args.show,
            broker_urls_given=given,
            install_signal_handlers=True,
        )
    )
    _say_if_nothing_played(settings.journal.path, args.rounds, played=len(summaries))
    return 0


def _say_if_nothing_played(journal: Path, rounds: int | None, *, played: int) -> None:
    """``--rounds N`` counts the journal's finished rounds: say so when that left none to play."""
    if rounds is None or played:
        return
    from controller.journal import Journal
    from controller.orchestrator import META_FINISHED

    reader = Journal.open_readonly(journal)
    try:
        finished = int(reader.get_meta(META_FINISHED) or 0)
    finally:
        reader.close()
    if finished >= rounds:
        print(
            f"tablectl run: nothing to play: the journal {journal} already holds {finished} "
            f"finished round(s) and --rounds {rounds} counts the journal's rounds, not this "
            "run's (a larger --rounds, or another --journal, plays more)",
            file=sys.stderr,
        )


def _seed(args: argparse.Namespace) -> int:
    """The simulation's seed: ``--seed``, else one from the clock (:func:`_say_seed`)."""
    if args.seed is not None:
        seed: int = args.seed
        return seed
    return time.time_ns() // 1000 % 1_000_000


def _say_seed(args: argparse.Namespace, seed: int) -> None:
    """A seed from the clock is printed, so the deal can be repeated with ``--seed``."""
    if args.seed is None:
        print(
            f"tablectl run: simulation seed {seed} (--seed {seed} deals the same)",
            file=sys.stderr,
            flush=True,
        )


async def _run_simulated(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    from controller.app import run_table
    from controller.logs import configure_logging
    from controller.settings import load_settings
    from simulators.cli import fault_plan_from_args, scenario_from_args
    from simulators.table import Simulation, simulated_scanner

    game_id = overrides.get("game", "teen-patti-20-20")
    table_id = overrides.get("table_id", SIM_TABLE_ID)
    seed = _seed(args)
    scenario = scenario_from_args(args)
    cards = tuple(args.cards.replace(",", " ").split()) if args.cards else None
    if scenario is not None:
        cards = cards or scenario.cards
        if scenario.game and "game" not in overrides:
            game_id = scenario.game
            overrides["game"] = game_id
    sim = Simulation(
        seed=seed,
        cards=cards,
        faults=fault_plan_from_args(args, seed=seed, scenario=scenario),
        deal_delay=args.deal_delay,
        profile=args.profile,
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
    # Every setting is checked before the simulator starts (and logs that it serves): bad
    # input ends the command with its error and nothing else. The pty's path is not known
    # yet; a placeholder stands for it, replaced below.
    load_settings(None, **_merge(merged, {"device": {"url": _PENDING_DEVICE}}))
    _say_seed(args, seed)
    async with simulated_scanner(game_id, sim) as url, contextlib.AsyncExitStack() as stack:
        settings = load_settings(None, **_merge(merged, {"device": {"url": url}}))
        settings.journal.path.parent.mkdir(parents=True, exist_ok=True)
        given = bool(settings.mqtt.urls)
        if not args.no_archive:
            settings = await _with_broker(stack, settings)
            given = True
        table = run_table(
            settings,
            rounds=args.rounds,
            show=args.show,
            broker_urls_given=given,
            install_signal_handlers=True,
            companions=_simulated_betting(settings, seed),
        )
        summaries = await table if args.no_archive else await _archived(args, settings, table)
    _say_if_nothing_played(settings.journal.path, args.rounds, played=len(summaries))
    return 0


async def _with_broker(stack: contextlib.AsyncExitStack, settings: TableSettings) -> TableSettings:
    """``settings`` with the broker the table will use, chosen as ``run_table`` would.

    The configured one, else Mosquitto on 127.0.0.1:1883, else an embedded one that
    ``stack`` stops: the archive subscribes to it before the table publishes.
    """
    from controller.broker import choose_broker

    if settings.mqtt.urls:
        return settings
    urls, embedded, protocol = await choose_broker([], protocol=settings.mqtt.protocol)
    if embedded is not None:
        await stack.enter_async_context(embedded)
    mqtt = settings.mqtt.model_copy(update={"urls": urls, "protocol": protocol})
    return settings.model_copy(update={"mqtt": mqtt})


_ARCHIVE_SUBSCRIBE_SECONDS = 2.0
"""How long the table waits for the archive's subscription before it starts anyway."""


async def _archived(
    args: argparse.Namespace, settings: TableSettings, table: Coroutine[Any, Any, _T]
) -> _T:
    """Run ``table`` with the archive beside it.

    Into ``--archive URL``, by default an SQLite file beside the journal
    (``var/archive.sqlite`` for the default journal ``var/sim-1.sqlite``).

    The archive is a named task (``archive``) of a TaskGroup around the table; the table
    starts once the archive has subscribed (so it misses nothing of a first run), and the
    archive drains what is still on its way when the table stops
    (:func:`controller.archive.embedded.run_beside_table`).
    """
    from controller.archive.embedded import archive_settings, default_url, run_beside_table
    from controller.archive.ingest import TableKeys

    url = args.archive or default_url(settings.journal.path)
    config = archive_settings(settings.mqtt, url, settings.table_id)
    keys = TableKeys({settings.table_id: None}, config.mqtt.topic_prefix)
    stop, ready = asyncio.Event(), asyncio.Event()
    outcome: list[_T] = []
    failure: BaseException | None = None
    async with asyncio.TaskGroup() as group:
        group.create_task(run_beside_table(config, keys, stop, ready), name="archive")
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_ARCHIVE_SUBSCRIBE_SECONDS):
                    await ready.wait()
            outcome.append(await table)
        except BaseException as exc:  # re-raised as it is below, not in an ExceptionGroup
            failure = exc
        finally:
            table.close()  # not awaited if the wait above was interrupted; else a no-op
            stop.set()
    if failure is not None:
        raise failure
    return outcome[0]


def _simulated_betting(settings: TableSettings, seed: int) -> dict[str, Companion]:
    """The simulated betting system beside a simulated table (when it has a status topic)."""
    status_topic = settings.mqtt.betting_status_topic
    if not status_topic:
        return {}
    table_id = settings.table_id

    async def betting(mqtt: MqttSettings, stop: asyncio.Event) -> None:
        from simulators.betting import run_simulated_betting

        await run_simulated_betting(
            mqtt.urls,
            table_id,
            protocol=mqtt.protocol,
            prefix=mqtt.topic_prefix,
            seed=seed,
            stop=stop,
            status_topic=status_topic,
        )

    return {"simulated-betting": betting}
