"""``tablectl simulate-scanner``: run the scanner simulator on a pty or a TCP port.

With ``--pty`` (the default) the first line on stdout is the pty's path, for
``serial:///dev/pts/N``; with ``--tcp PORT`` it is ``socket://host:port``. Ctrl-C (or
SIGTERM) stops it cleanly. Also runnable without the controller as
``python -m simulators.cli simulate-scanner ...``.

This is the simulators' command-line layer (the only simulators module that knows argparse).
It also holds the fault options shared by ``simulate-scanner`` and ``tablectl run
--simulate``: ``add_fault_arguments(parser_or_group)`` adds them; ``fault_plan_from_args(args)``
builds the :class:`~simulators.faults.FaultPlan`; with ``--scenario FILE`` the scenario's own
faults are the base and the command-line rates given explicitly are added on top, and
``scenario_from_args(args)`` gives the scenario (its ``cards`` are the deck to script).

With ``--profile NAME`` the device is a line-oriented reader of that device profile
(:class:`~simulators.line_device.LineDeviceSimulator`) on a pty: the first line is the pty's
link, then the ``profile+serial://`` URL and a ``tablectl enrol`` command line that reads it.
Without ``--cards`` or ``--seed`` it puts the game's deck on the reader in order, which is the
order ``tablectl enrol`` asks for the cards, so a deck can be enrolled against it.

The reader profiles (``drivers/profiles/readers/``) are played too, each printing its
``device:`` URL and a ``tablectl enrol`` line the same way: ``pcsc-uid`` (a virtual ACR122U on
a private pcscd), ``pepper-c1`` (an Eccel Pepper C1, ``--pty`` or ``--tcp PORT``, one card on
its antenna at a time) and ``mqtt-json`` (an ESP32 tag reader: ``--broker URL [--topic T]``
publishing to a broker, or JSON lines on a pty). A pty mode prints the pty's path first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from simulators.decks import GAME_DECKS
from simulators.faults import TIMING, FaultPlan
from simulators.scenario import Scenario, load_scenario

if TYPE_CHECKING:
    from controller.broker import BrokerAddress
    from drivers.profile import CodeTable
    from simulators.line_device import LineDeviceSimulator
    from simulators.scanner import ScannerSimulator


_N = TypeVar("_N", int, float)


def _number(text: str, convert: Callable[[str], _N], what: str) -> _N:
    try:
        return convert(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a {what}: {text!r}") from exc


def _rate(text: str) -> float:
    value = _number(text, float, "number")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a rate is between 0 and 1, not {value}")
    return value


def _fault_seconds(text: str) -> float:
    value = _number(text, float, "number of seconds")
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"seconds are between 0 and 3600, not {value}")
    return value


def _cards(text: str) -> int:
    value = _number(text, int, "whole number of cards")
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
        "--delay",
        type=_fault_seconds,
        default=None,
        metavar="S",
        help="max extra latency per frame",
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
        type=_fault_seconds,
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
        type=_fault_seconds,
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
    for name in TIMING:
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    if seed is None:
        seed = getattr(args, "fault_seed", None)
    if seed is not None:
        changes["seed"] = seed
    return replace(base, **changes)


def _seconds(text: str) -> float:
    value = _number(text, float, "number of seconds")
    if value < 0:
        raise argparse.ArgumentTypeError(f"seconds cannot be negative: {value}")
    return value


LINE_PROFILES = ("barcode-crlf", "line-shoe", "rfid-ntag")
"""The shipped line profiles (``drivers/profiles/*.toml``) ``--profile`` plays."""

READER_PROFILES = ("mqtt-json", "pcsc-uid", "pepper-c1")
"""The shipped reader profiles (``drivers/profiles/readers/*.toml``) ``--profile`` plays."""


def playable_profiles() -> tuple[list[str], list[str]]:
    """The shipped profiles ``--profile`` plays: (line profiles, reader profiles)."""
    from drivers.profile import shipped_profiles
    from drivers.reader_profile import shipped_reader_profiles

    readers = [name for name in shipped_reader_profiles() if name in READER_PROFILES]
    return shipped_profiles(), readers


def check_profile(name: str) -> None:
    """Refuse a ``--profile`` that names nothing ``simulate-scanner`` plays.

    A ``.toml`` path (or any name with a ``/``) is a line profile's file, checked when loaded.

    Raises:
        SimulatorConfigError: No shipped line or reader profile of that name; the error lists
            every profile that can be played.
    """
    from simulators.errors import SimulatorConfigError

    if name.endswith(".toml") or "/" in name:
        return
    lines, readers = playable_profiles()
    if name not in lines and name not in readers:
        raise SimulatorConfigError(
            "no profile of that name to simulate (or give a line profile's .toml path)",
            profile=name,
            line_profiles=", ".join(lines),
            reader_profiles=", ".join(readers),
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the simulate-scanner options to a parser."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--pty", action="store_true", help="serve on a new pty (default)")
    where.add_argument("--tcp", type=int, metavar="PORT", help="serve on TCP (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="TCP address (default 127.0.0.1)")
    supply = parser.add_mutually_exclusive_group()
    supply.add_argument(
        "--seed", type=int, help="shuffle a fresh deck per round from this seed (default 0)"
    )
    supply.add_argument(
        "--cards", metavar="'As Kd ...'", help="scripted values, sent in order, as written"
    )
    parser.add_argument(
        "--game",
        default="teen-patti-20-20",
        choices=sorted(GAME_DECKS),
        help="game whose deck is dealt (default teen-patti-20-20)",
    )
    add_fault_arguments(parser)
    parser.add_argument("--fault-seed", type=int, default=None, help="seed of the fault draws")
    parser.add_argument(
        "--deal-delay", type=_seconds, default=0.3, metavar="S", help="cue to scan (default 0.3)"
    )
    parser.add_argument(
        "--interval", type=_seconds, metavar="S", help="deal every S seconds without cues"
    )
    parser.add_argument(
        "--heartbeat", type=_seconds, default=1.0, metavar="S", help="heartbeat period"
    )
    parser.add_argument(
        "--ack-timeout", type=_seconds, default=0.5, metavar="S", help="retransmit after S"
    )
    parser.add_argument(
        "--positions", action="store_true", help="send the cued slot as the card's position"
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="play a reader instead of wire protocol v1 and print a `tablectl enrol` line: "
        f"a line profile ({', '.join(LINE_PROFILES)}, or a .toml path) on a pty; or a reader "
        "profile: pcsc-uid (a virtual ACR122U on a private pcscd), pepper-c1 (an Eccel Pepper "
        "C1, --pty or --tcp PORT), mqtt-json (an ESP32 tag reader: --broker URL, or JSON "
        "lines on a pty); without --cards or --seed the game's deck is put on the reader in "
        "order, as `tablectl enrol` asks for it (docs/drivers.md)",
    )
    parser.add_argument(
        "--broker",
        metavar="URL",
        help="with --profile mqtt-json: the broker the reader publishes to (mqtt://HOST[:PORT])",
    )
    parser.add_argument(
        "--topic",
        metavar="T",
        help="with --broker: the reader's topic, PREFIX/NAME (NAME its device_id; cues on "
        "T/cmd, status on T/status; default tablectl/readers/sim-XXXXXX/reader-1)",
    )
    parser.add_argument(
        "--codes", metavar="FILE", help="with --profile: a code table replacing the profile's"
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``simulate-scanner`` sub-command."""
    parser = subparsers.add_parser(
        "simulate-scanner",
        help="run a simulated card scanner on a pty or TCP port",
        description="Run a simulated card scanner (and dealer) speaking wire protocol v1 on a "
        "pseudo-terminal or a TCP port, with optional faults.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the simulator until Ctrl-C or SIGTERM."""
    from controller.logs import configure_logging
    from simulators.errors import SimulatorError

    configure_logging(level="INFO")

    if (args.broker is not None or args.topic is not None) and args.profile != "mqtt-json":
        print("tablectl simulate-scanner: --broker and --topic are for mqtt-json", file=sys.stderr)
        return 2
    if args.profile is not None:
        return _run_any_profile(args)
    if args.codes is not None:
        print("tablectl simulate-scanner: --codes needs --profile", file=sys.stderr)
        return 2
    try:
        simulator = _simulator(args)
    except SimulatorError as exc:
        print(f"tablectl simulate-scanner: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(simulator, args))
    except KeyboardInterrupt:
        pass
    except SimulatorError as exc:
        print(f"tablectl simulate-scanner: {exc}", file=sys.stderr)
        return 1
    print(
        f"dealt {len(simulator.dealt)} card(s), {simulator.stats.misreads_sent} misread(s)",
        file=sys.stderr,
    )
    return 0


def _run_any_profile(args: argparse.Namespace) -> int:
    """``--profile NAME``: the line or reader profile named, or exit status 2 naming them all."""
    from simulators.errors import SimulatorError

    try:
        check_profile(args.profile)
    except SimulatorError as exc:
        print(f"tablectl simulate-scanner: {exc}", file=sys.stderr)
        return 2
    if args.profile == "pcsc-uid":
        return _run_pcsc(args)
    if args.profile in ("pepper-c1", "mqtt-json"):
        return _run_reader(args)
    return _run_profile(args)


def _run_profile(args: argparse.Namespace) -> int:
    """``--profile NAME``: a line-oriented reader of that profile on a pty until Ctrl-C."""
    from drivers.errors import DriverError
    from simulators.errors import SimulatorError

    if args.tcp is not None:
        print("tablectl simulate-scanner: --profile serves on a pty only", file=sys.stderr)
        return 2
    try:
        simulator = _line_simulator(args)
    except (SimulatorError, DriverError) as exc:
        print(f"tablectl simulate-scanner: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve_line(simulator, args))
    except KeyboardInterrupt:
        pass
    except SimulatorError as exc:
        print(f"tablectl simulate-scanner: {exc}", file=sys.stderr)
        return 1
    print(f"put {len(simulator.drawn)} card(s) on the reader", file=sys.stderr)
    return 0


def _run_pcsc(args: argparse.Namespace) -> int:
    """``--profile pcsc-uid``: a virtual ACR122U on a private pcscd until Ctrl-C.

    The first line is the ``pcsc://`` URL (with ``pcscd=``, the private pcscd's socket: any
    process on this computer reaches it), then a ``tablectl enrol`` line. The dealer puts the
    deck's cards on the reader one by one, in the order ``tablectl enrol`` asks for them, each
    until it is read (and again every 5 s until something reads it).
    """
    from drivers.errors import DriverError
    from simulators.errors import SimulatorError

    if args.tcp is not None:
        print("tablectl simulate-scanner: pcsc-uid serves through pcscd, not TCP", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve_pcsc(args))
    except KeyboardInterrupt:
        pass
    except (SimulatorError, DriverError) as exc:
        print(f"tablectl simulate-scanner: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve_pcsc(args: argparse.Namespace) -> None:
    from urllib.parse import quote

    from drivers.reader_profile import load_reader_profile
    from simulators.decks import deck_for_game
    from simulators.pcsc_dealer import PcscDealer
    from simulators.pcscd import PrivatePcscd
    from simulators.vpcd import VirtualCard

    loaded = load_reader_profile("pcsc-uid", args.codes)
    deck = [str(piece) for piece in deck_for_game(args.game)]
    cards = args.cards.replace(",", " ").split() if args.cards is not None else None
    if cards is None and args.seed is None:
        cards = deck  # in order: the order `tablectl enrol` asks
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    daemon = PrivatePcscd("ACS ACR122U")
    await daemon.start()
    try:
        slot = daemon.slot("ACS ACR122U")
        dealer = PcscDealer(
            VirtualCard("127.0.0.1", slot.port),
            loaded.table,
            deck,
            seed=args.seed or 0,
            cards=cards,
            interval=max(args.deal_delay, 0.5),
        )
        url = f"pcsc://?reader={quote(slot.name)}&pcscd={quote(str(daemon.socket_path))}"
        print(f"device: {url}", flush=True)
        print(
            f"enrol:  tablectl enrol --device '{url}' --deck standard --out deck.toml", flush=True
        )
        task = asyncio.create_task(dealer.run(), name="pcsc-sim-dealer")
        try:
            await stop.wait()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        print(f"put {len(dealer.drawn)} card(s) on the reader", file=sys.stderr)
    finally:
        await daemon.close()


_FAULT_OPTIONS = (
    *(flag for flag, _, _ in _RATES),
    "--delay",
    "--byte-by-byte",
    "--unplug-every",
    "--unplug-seconds",
    "--heartbeat-stop-after",
    "--heartbeat-stop-seconds",
    "--fault-seed",
)
"""The fault options, as typed (each ``args.<flag without -- and - as _>``)."""


def _refusal(args: argparse.Namespace) -> str | None:
    """Why the options do not fit ``--profile pepper-c1`` / ``mqtt-json`` (``None``: they do)."""
    if args.scenario is not None:
        return "--scenario is for wire protocol v1: drop it with --profile"
    if args.interval is not None:
        return f"{args.profile} deals on the cues of `tablectl enrol` or a table: drop --interval"
    if args.profile == "pepper-c1":
        given = [
            flag
            for flag in _FAULT_OPTIONS
            if getattr(args, flag.removeprefix("--").replace("-", "_"), None) is not None
        ]
        if given:
            return (
                "pepper-c1 takes no fault options here (its faults are simulators/"
                f"pepper_reader.py's PepperFaults): drop {', '.join(given)}"
            )
        return None
    if args.tcp is not None:
        return "mqtt-json serves a broker (--broker URL) or a pty (--pty), not TCP"
    if args.broker is not None and args.pty:
        return "mqtt-json: --broker or --pty, not both"
    if args.topic is not None and args.broker is None:
        return "--topic needs --broker"
    return None


def _run_reader(args: argparse.Namespace) -> int:
    """``--profile pepper-c1`` or ``mqtt-json``: the simulated reader until Ctrl-C or SIGTERM.

    The deck's cards go on the reader one at a time, each when ``tablectl enrol`` (or a
    table) cues it; the last one is lifted as the next goes down.
    """
    from drivers.errors import DriverError
    from simulators.errors import SimulatorError

    refusal = _refusal(args)
    if refusal is not None:
        print(f"tablectl simulate-scanner: {refusal}", file=sys.stderr)
        return 2
    serve = _serve_pepper if args.profile == "pepper-c1" else _serve_json
    try:
        put = asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 0
    except (SimulatorError, DriverError) as exc:
        print(f"tablectl simulate-scanner: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1
    except TimeoutError:
        print(
            f"tablectl simulate-scanner: the broker {args.broker} did not take the reader's "
            "connection within 5 s",
            file=sys.stderr,
        )
        return 1
    print(f"put {put} card(s) on the reader", file=sys.stderr)
    return 0


def _cards_to_deal(
    args: argparse.Namespace, table: CodeTable
) -> tuple[list[str], list[str] | None]:
    """The game's deck and the script (the deck in enrol's order without --cards or --seed).

    Raises:
        SimulatorConfigError: A card to deal has no tag in the code table.
    """
    from simulators.decks import deck_for_game
    from simulators.errors import SimulatorConfigError

    deck = [str(piece) for piece in deck_for_game(args.game)]
    cards = args.cards.replace(",", " ").split() if args.cards is not None else None
    if cards is None and args.seed is None:
        cards = list(deck)  # in order: the order `tablectl enrol` asks
    for card in cards if cards is not None else deck:
        if table.code_of(card) is None:
            raise SimulatorConfigError(
                "a card to deal has no tag in the code table", card=card, table=table.name
            )
    return deck, cards


def _announce(path: str | None, url: str) -> None:
    """Print the pty's path (a pty), the device URL and a ready-to-run enrol line."""
    import shlex

    if path is not None:
        print(path, flush=True)
    print(f"device: {url}", flush=True)
    print(
        f"enrol:  tablectl enrol --device {shlex.quote(url)} --deck standard --out deck.toml",
        flush=True,
    )


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    return stop


async def _serve_pepper(args: argparse.Namespace) -> int:
    """A simulated Pepper C1 on a pty or TCP until SIGTERM; returns the cards put down."""
    from drivers.reader_profile import load_reader_profile
    from simulators.pepper_reader import PepperReaderSimulator

    loaded = load_reader_profile("pepper-c1", args.codes)
    deck, cards = _cards_to_deal(args, loaded.table)
    simulator = PepperReaderSimulator(
        loaded.table,
        cards=cards,
        deck=deck,
        seed=args.seed or 0,
        deal_delay=args.deal_delay,
        one_at_a_time=True,
    )
    stop = _stop_event()
    if args.tcp is not None:
        async with simulator.serve_tcp(args.host, args.tcp) as (host, port):
            shown = f"[{host}]" if ":" in host else host
            _announce(None, f"pepper://{shown}:{port}?cues=1")
            await stop.wait()
    else:
        async with simulator.serve_pty() as path:
            _announce(path, f"pepper+serial://{path}?cues=1")
            await stop.wait()
    return len(simulator.stats.dealt)


def _reader_topic(args: argparse.Namespace) -> tuple[str, str]:
    """The simulated reader's topic prefix and name (its device_id) from ``--topic``.

    Raises:
        SimulatorConfigError: The topic is no reader's topic.
    """
    import secrets

    from simulators.errors import SimulatorConfigError

    topic = (
        args.topic
        if args.topic is not None
        else f"tablectl/readers/sim-{secrets.token_hex(3)}/reader-1"
    )
    prefix, _, name = topic.rpartition("/")
    if not name or "/" not in topic or any(ch in topic for ch in "+#\0"):
        raise SimulatorConfigError(
            "a reader's topic is PREFIX/NAME, without wildcards (NAME is its device_id)",
            topic=topic,
        )
    if len(name) > 64 or not name.isprintable():
        raise SimulatorConfigError(
            "a reader's name (its topic's last level) is 1-64 printable characters", name=name
        )
    return prefix, name


async def _serve_json(args: argparse.Namespace) -> int:
    """A simulated ESP32 tag reader on a broker or a pty until SIGTERM; returns the cards."""
    from urllib.parse import quote

    from drivers.reader_json import load_reader_setup
    from simulators.decks import deck_for_game
    from simulators.json_reader import JsonReaderSimulator

    table, _ = load_reader_setup("mqtt-json", args.codes)
    _, cards = _cards_to_deal(args, table)
    prefix, name = _reader_topic(args) if args.broker is not None else ("", "reader-1")
    simulator = JsonReaderSimulator(
        table,
        cards=cards,
        deck=deck_for_game(args.game),
        seed=args.seed or 0,
        faults=fault_plan_from_args(args),
        deal_delay=args.deal_delay,
        pad_name=name,
    )
    stop = _stop_event()
    if args.broker is None:
        async with simulator.serve_pty() as path:
            _announce(path, f"jsonl+serial://{path}?cues=1")
            await stop.wait()
        return len(simulator.drawn)
    broker = _broker(args.broker)
    async with simulator.serve_mqtt(broker.host, broker.port, prefix) as topics:
        topic, cmd = topics[name]
        host = f"[{broker.host}]" if ":" in broker.host else broker.host
        url = (
            f"mqtt-reader://{host}:{broker.port}/{quote(topic, safe='/')}"
            f"?cmd={quote(cmd, safe='/')}&status={quote(topic + '/status', safe='/')}"
        )
        _announce(None, url)
        await stop.wait()
    return len(simulator.drawn)


def _broker(url: str) -> BrokerAddress:
    """The ``--broker`` URL, read.

    Raises:
        SimulatorConfigError: Not an ``mqtt://`` broker the simulated reader can reach.
    """
    from controller.broker import parse_broker_url
    from controller.errors import ConfigError
    from simulators.errors import SimulatorConfigError

    try:
        broker = parse_broker_url(url)
    except ConfigError as exc:
        raise SimulatorConfigError(str(exc), option="--broker") from exc
    if broker.tls or broker.port == 0:
        raise SimulatorConfigError(
            "the simulated reader connects to an mqtt:// broker (no TLS, as mqtt-reader://)",
            option="--broker",
            url=url,
        )
    return broker


def _line_simulator(args: argparse.Namespace) -> LineDeviceSimulator:
    """The line-device simulator ``--profile`` describes.

    Raises:
        ProfileError: The profile or the code table cannot be loaded (file, field, reason).
        SimulatorError: A card to deal has no code, or the options do not fit.
    """
    from drivers.profile import load_profile
    from simulators.decks import deck_for_game
    from simulators.errors import SimulatorConfigError
    from simulators.line_device import LineDeviceSimulator

    if scenario_from_args(args) is not None:
        raise SimulatorConfigError("--scenario is for wire protocol v1: drop it with --profile")
    loaded = load_profile(args.profile, args.codes)
    deck = deck_for_game(args.game)
    cards = args.cards.replace(",", " ").split() if args.cards is not None else None
    if cards is None and args.seed is None:
        cards = [str(piece) for piece in deck]  # in order: the order `tablectl enrol` asks
    return LineDeviceSimulator(
        loaded,
        cards=cards,
        deck=deck,
        seed=args.seed or 0,
        faults=fault_plan_from_args(args),
        deal_delay=args.deal_delay,
        interval=args.interval or None,
    )


async def _serve_line(simulator: LineDeviceSimulator, args: argparse.Namespace) -> None:
    """Serve the line device on its pty until SIGTERM; print the path and the URLs first."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with simulator.serve_pty() as path:
        url = f"profile+serial://{path}?profile={args.profile}"
        print(path, flush=True)
        print(f"device: {url}", flush=True)
        print(
            f"enrol:  tablectl enrol --device '{url}' --deck standard --out deck.toml",
            flush=True,
        )
        await stop.wait()


def _simulator(args: argparse.Namespace) -> ScannerSimulator:
    """The simulator the options describe."""
    from simulators.decks import deck_for_game
    from simulators.errors import SimulatorError
    from simulators.scanner import ScannerSimulator

    scenario = scenario_from_args(args)
    cards = args.cards.replace(",", " ").split() if args.cards is not None else None
    if scenario is not None:
        if cards is not None or args.seed is not None:
            raise SimulatorError("--scenario scripts the deck: drop --cards and --seed")
        cards = list(scenario.cards)
    game = args.game if scenario is None or scenario.game is None else scenario.game
    return ScannerSimulator(
        deck=deck_for_game(game),
        seed=args.seed,
        cards=cards,
        faults=fault_plan_from_args(args, scenario=scenario),
        deal_delay=args.deal_delay,
        interval=args.interval or None,
        heartbeat_interval=args.heartbeat,
        ack_timeout=args.ack_timeout,
        positions=args.positions,
    )


async def _serve(simulator: ScannerSimulator, args: argparse.Namespace) -> None:
    """Serve on the pty or the TCP port until SIGTERM (or the simulator fails)."""
    from simulators.errors import SimulatorError

    def announce(text: str) -> None:
        print(text, flush=True)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    if args.tcp is not None:
        serving = simulator.run_tcp(
            args.host, args.tcp, lambda host, port: announce(f"socket://{host}:{port}")
        )
    else:
        serving = simulator.run_pty(announce)
    task = asyncio.create_task(serving)
    waiter = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, waiter):
            pending.cancel()
        await asyncio.gather(task, waiter, return_exceptions=True)
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise SimulatorError("the simulator stopped", error=repr(task.exception()))


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m simulators.cli simulate-scanner ...``."""
    parser = argparse.ArgumentParser(prog="simulators.cli")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(subparsers)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
