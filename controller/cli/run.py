"""``tablectl run``: a table, real (``--config FILE``) or simulated (``--simulate``).

The options become settings overrides (command line over environment over file over
defaults); :func:`controller.app.run_table` runs the table. With ``--simulate`` the scanner
simulator (:mod:`simulators.table`) and a simulated betting system are started beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import os
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from controller.errors import ConfigError
from simulators.cli import add_fault_arguments

if TYPE_CHECKING:
    from controller.app import Companion
    from controller.mqtt.settings import MqttSettings
    from controller.settings import TableSettings
    from controller.studio.pit.settings import PitSettings
    from controller.studio.server import StudioAddress

SIM_TABLE_ID = "sim-1"

DEFAULT_HID_PROFILE = "barcode-crlf"
"""The profile of ``--hid`` without ``--profile``: a USB HID barcode scanner's records."""

_T = TypeVar("_T")

SIM_THINK_SECONDS = 1.0
"""The simulated players' longest think time: each answers a decision window after a random
(seeded) quarter to whole of it, never after half of what is left of the window."""

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
    parser.add_argument(
        "--betting-seconds", type=float, default=None, metavar="S", help="betting window"
    )
    parser.add_argument(
        "--decision-seconds",
        type=float,
        default=None,
        metavar="S",
        help="each decision window of the game (Hold'em's actions, Break Poker's setting, the "
        "Mulligan's choice, Mahjong's bank offers; default: the game's own, 10-20 s)",
    )
    parser.add_argument("--pause-seconds", type=float, default=None, metavar="S")
    parser.add_argument(
        "--show", action="store_true", help="print the table's messages as a subscriber sees them"
    )
    parser.add_argument("--log-level", default=None, choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--log-format",
        default=None,
        choices=["auto", "json", "console"],
        help="the log lines (standard error): console (for people), json (one object a line, "
        "for a log collector); default auto: console on a terminal, json when captured",
    )
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
        "line-shoe, barcode-crlf, rfid-ntag, or a .toml path) through the profile+serial:// "
        "driver; a position reader's profile (rfid-ntag) makes a table of one reader a hand; "
        "mqtt-json: one simulated ESP32 RFID reader a hand publishing to the table's broker "
        "(mqtt-reader://); pcsc-uid: a virtual ACR122U on a private pcscd (vsmartcard-vpcd), "
        "read through pyscard (pcsc://); pepper-c1: a simulated Eccel Pepper C1, an antenna "
        "a hand, polled through pepper+serial://",
    )
    sim.add_argument(
        "--codes",
        default=None,
        metavar="FILE",
        help="with --profile: a code table replacing the profile's (an enrolled deck; "
        "codes/rfid-demo-tiles.toml for mahjong-pai-gow on rfid-ntag)",
    )
    sim.add_argument(
        "--hid",
        choices=["pos", "kbd"],
        default=None,
        help="the device is a USB HID scanner (HID POS or keyboard mode) on the simulated "
        f"pyusb backend, read through hidpos:// or hidkbd:// (profile {DEFAULT_HID_PROFILE} "
        "unless --profile names another)",
    )
    sim.add_argument(
        "--wrong-reader-at",
        default=None,
        metavar="N[,N...]",
        help="with a position reader's profile: the N-th card dealt (1-based) is first put "
        "on the wrong reader (refused: read from the wrong position; rescanned at the right one)",
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
        "--sign",
        action="store_true",
        help="sign the results as TABLECTL_SIGNING__KEY_FILE does, with an Ed25519 key kept "
        "beside the journal (var/keys/<table-id>.key, made on first use), and print the "
        "command that verifies what the table sent (docs/security.md, 'Signing in the "
        "simulator')",
    )
    sim.add_argument(
        "--deal-delay",
        type=float,
        default=0.4,
        metavar="S",
        help="seconds the simulated dealer takes per card",
    )
    studio = parser.add_argument_group("studio (with --simulate: docs/studio.md)")
    studio.add_argument(
        "--no-studio",
        action="store_true",
        help="do not start the studio (dealer screen, stream overlay) beside the table",
    )
    studio.add_argument(
        "--studio-port",
        type=int,
        default=None,
        metavar="PORT",
        help="the studio's port on 127.0.0.1 (default 8080, or TABLECTL_STUDIO_HTTP__PORT as "
        "for tablectl studio; taken: an error naming the process holding it; 0: a free port)",
    )
    studio.add_argument(
        "--linger",
        action="store_true",
        help="once the table has stopped (--rounds N reached, or Ctrl-C), keep the studio "
        "serving until Ctrl-C, so the secure-delay overlay shows the last result (make run "
        "passes it; nothing to keep with --no-studio)",
    )
    studio.add_argument(
        "--studio-secure-delay",
        type=float,
        default=10.0,
        metavar="S",
        help="the overlay's secure-delay mode holds the secure feed back this long "
        "(default 10; 0: no secure-delay mode)",
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


def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl run``."""
    from controller import collector
    from controller.app import run_table
    from controller.logs import configure_logging
    from controller.settings import deep_merge, load_settings

    if args.rounds is not None and args.rounds < 1:
        raise ConfigError("--rounds must be at least 1", field="--rounds")
    overrides = _overrides(args)
    if args.simulate:
        return asyncio.run(_run_simulated(args, overrides))
    settings = load_settings(args.config, **overrides)
    if args.decision_seconds is not None:
        decisions = decision_overrides(settings.game, args.decision_seconds)
        settings = load_settings(args.config, **deep_merge(overrides, decisions))
    configure_logging(level=settings.logging.level, fmt=settings.logging.format)
    given = bool(settings.mqtt.urls)
    with collector.taken_over():  # collections between cards, not in the middle of one
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


def decision_overrides(game_id: str, seconds: float) -> dict[str, Any]:
    """``--decision-seconds S`` as a settings override: the game's decision-window option.

    Raises:
        ConfigError: ``S`` is not above 0, or the game has no decision windows.
    """
    from controller.games.registry import GAME_IDS, game_spec

    if not seconds > 0:
        raise ConfigError(
            f"--decision-seconds must be more than 0, not {seconds:g}", field="--decision-seconds"
        )
    option = game_spec(game_id).decision_seconds_option if game_id in GAME_IDS else None
    if option is None:
        raise ConfigError(
            f"--decision-seconds: {game_id} has no decision windows (games with them: "
            f"{', '.join(g for g in GAME_IDS if game_spec(g).decision_seconds_option)})",
            field="--decision-seconds",
        )
    return {"game_options": {option: seconds}}


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
    from controller.settings import deep_merge, load_settings
    from simulators.cli import fault_plan_from_args, scenario_from_args
    from simulators.table import Simulation, simulated_devices

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
    if args.hid and args.profile is None:
        args.profile = DEFAULT_HID_PROFILE  # a USB barcode scanner, as --hid's help says
    if (args.codes or args.wrong_reader_at) and args.profile is None:
        raise ConfigError("--codes and --wrong-reader-at need --profile", field="--profile")
    sim = Simulation(
        seed=seed,
        cards=cards,
        faults=fault_plan_from_args(args, seed=seed, scenario=scenario),
        deal_delay=args.deal_delay,
        profile=args.profile,
        codes=args.codes,
        hid=args.hid,
        wrong_reader_at=_card_numbers(args.wrong_reader_at),
    )
    defaults: dict[str, Any] = {
        "table_id": table_id,
        "game": game_id,
        "journal": {"path": Path("var") / f"{table_id}.sqlite"},
        "logging": {"level": "WARNING" if args.show else "INFO"},
    }
    merged, signing = _SimulationKey.asked(args, deep_merge(defaults, overrides), table_id)
    sim = dataclasses.replace(sim, broker_urls=tuple(merged.get("mqtt", {}).get("urls") or ()))
    configure_logging(level=merged["logging"]["level"], fmt=merged["logging"].get("format", "auto"))
    from controller.games.registry import GAME_IDS as LIVE_GAME_IDS

    if game_id not in LIVE_GAME_IDS:
        raise ConfigError(
            f"unknown game {game_id!r}; games: {', '.join(LIVE_GAME_IDS)}", field="--game"
        )
    if args.decision_seconds is not None:
        merged = deep_merge(merged, decision_overrides(game_id, args.decision_seconds))
    # Every setting is checked before the simulator starts (and logs that it serves): bad
    # input ends the command with its error and nothing else. The pty's path is not known
    # yet; a placeholder stands for it, replaced below.
    load_settings(None, **deep_merge(merged, {"device": {"url": _PENDING_DEVICE}}))
    _companions_checked(args)
    _say_seed(args, seed)
    _SimulationKey.make_if_asked(signing)
    async with simulated_devices(game_id, sim) as devices, contextlib.AsyncExitStack() as stack:
        settings = load_settings(None, **deep_merge(merged, devices.settings))
        settings.journal.path.parent.mkdir(parents=True, exist_ok=True)
        given = bool(settings.mqtt.urls)
        linger = _Linger() if args.linger and not args.no_studio else None
        studio = _studio(
            args,
            settings,
            on_ready=linger.on_ready if linger else None,
            announce_after=linger.table_started if linger else None,
        )
        if not args.no_archive or linger is not None:
            # The broker outlives the table: the archive subscribes before it starts, and a
            # lingering studio still reads from it after it stopped.
            settings = await _with_broker(stack, settings)
            given = True
        if linger is not None:
            await stack.enter_async_context(linger.running(studio["studio"], settings.mqtt))
        table = run_table(
            settings,
            rounds=args.rounds,
            show=args.show,
            broker_urls_given=given,
            install_signal_handlers=True,
            companions={
                **_simulated_betting(settings, seed),
                **({} if linger is not None else studio),
                **(linger.companions() if linger is not None else {}),
            },
            usb_backend=devices.usb_backend,
        )
        summaries = await _played(args, settings, table)
        _say_if_nothing_played(settings.journal.path, args.rounds, played=len(summaries))
        _say_how_to_verify(args, settings, signing)
        if linger is not None:
            await linger.serve_until_stopped(settings.table_id, args.studio_secure_delay > 0)
    return 0


async def _played(
    args: argparse.Namespace, settings: TableSettings, table: Coroutine[Any, Any, _T]
) -> _T:
    """The simulated table's rounds (with the archive beside it unless ``--no-archive``).

    Its garbage is collected between cards, as ``tablectl run --config``'s
    (:func:`controller.collector.taken_over`); the automatic collector is back afterwards,
    for a lingering studio or the program that ran the command.
    """
    from controller import collector

    with collector.taken_over():
        return await table if args.no_archive else await _archived(args, settings, table)


class _SimulationKey:
    """``run --simulate --sign``: the table's Ed25519 key pair, kept beside its journal.

    ``<journal's folder>/keys/<table id>.key`` (mode 0600) and ``.pub`` (``var/keys/sim-1.key``
    for ``make run``), made by :func:`controller.signing.generate_keypair` on first use and
    kept between runs, so every run of the table signs with the same key (key id: the table
    id). The table signs as with ``TABLECTL_SIGNING__KEY_FILE`` (``signing.key_file``).

    Args:
        journal: The table's journal file.
        table_id: The table id (the key id and the files' stem).
    """

    def __init__(self, journal: Path, table_id: str) -> None:
        self.folder = journal.parent / "keys"
        self.key_id = table_id
        self.private = self.folder / f"{table_id}.key"
        self.public = self.folder / f"{table_id}.pub"

    @classmethod
    def asked(
        cls, args: argparse.Namespace, merged: dict[str, Any], table_id: str
    ) -> tuple[dict[str, Any], _SimulationKey | None]:
        """The merged settings with the ``signing`` of ``--sign``, and its key (else ``None``)."""
        if not args.sign:
            return merged, None
        key = cls(Path(merged["journal"]["path"]), table_id)
        signing = {"key_file": key.private, "key_id": key.key_id}
        return {**merged, "signing": {**merged.get("signing", {}), **signing}}, key

    @staticmethod
    def make_if_asked(key: _SimulationKey | None) -> None:
        """:meth:`make` the key of ``--sign`` (nothing without it)."""
        if key is not None:
            key.make()

    def make(self) -> None:
        """Make the key pair unless it exists (its public key again if only that is lost).

        Raises:
            SignatureError: The key cannot be written or read (names the file).
        """
        from controller.signing import Signer, generate_keypair

        if not self.private.exists():
            generate_keypair(self.folder, self.key_id)
            made = "made now"
        else:
            made = "kept from an earlier run"
            if not self.public.exists():
                from cryptography.hazmat.primitives import serialization

                key = Signer.from_file(self.private, self.key_id).public_key
                self.public.write_bytes(
                    key.public_bytes(
                        serialization.Encoding.PEM,
                        serialization.PublicFormat.SubjectPublicKeyInfo,
                    )
                )
        print(
            f"tablectl run: results signed with {self.private} (key id {self.key_id!r}, "
            f"{made}; its public key {self.public})",
            file=sys.stderr,
            flush=True,
        )


def _say_how_to_verify(
    args: argparse.Namespace, settings: TableSettings, signing: _SimulationKey | None
) -> None:
    """After a signing run: the command lines that check what the table sent."""
    if settings.signing.key_file is None:
        return

    table, journal = settings.table_id, settings.journal.path
    lines = []
    if not args.no_archive:  # (the archive's modules only when it ran: tablectl[archive])
        from controller.archive.embedded import default_url

        url = args.archive or default_url(journal)
        lines.append(
            f"tablectl archive verify --database {url} --table {table} --journal {journal}"
            "  (every signature checked on arrival, the entries under the signed chain "
            "heads, and the journal against them)"
        )
    if signing is not None:
        lines.append(
            f"tablectl verify --public-key {signing.public} MESSAGE_FILE  (one result as a "
            f"subscriber received it, from {settings.mqtt.topic_prefix}/{table}/results)"
        )
    if lines:
        print(
            "tablectl run: the results were signed; check what the table sent with:\n  "
            + "\n  ".join(lines),
            file=sys.stderr,
            flush=True,
        )


def _card_numbers(text: str | None) -> tuple[int, ...]:
    """``--wrong-reader-at 3,7`` (1-based, as people count cards) as 0-based indices."""
    if not text:
        return ()
    numbers = []
    for part in text.replace(",", " ").split():
        if not part.isdigit() or int(part) < 1:
            raise ConfigError(
                f"--wrong-reader-at takes card numbers from 1, not {part!r}",
                field="--wrong-reader-at",
            )
        numbers.append(int(part) - 1)
    return tuple(numbers)


def _companions_checked(args: argparse.Namespace) -> None:
    """The studio and the archive beside the table, checked before the simulator starts.

    Each left out when its extra is not installed (:func:`_leave_out_missing_extras`); the
    studio's options and its port (a taken port ends the run here, naming who holds it).
    """
    _leave_out_missing_extras(args)
    if not args.no_studio:
        _check_studio_options(args)


def _leave_out_missing_extras(args: argparse.Namespace) -> None:
    """Without the studio or the archive extra installed, run the table without that part.

    A table computer's ``pip install tablectl`` has neither (docs/operations.md, "Installing");
    its simulated table still plays, and says what it left out and how to install it. An
    archive asked for by URL (``--archive URL``) without the extra is an error.

    Raises:
        MissingExtra: ``--archive URL`` was given and the archive extra is not installed.
    """
    from controller.extras import MissingExtra, missing_modules

    for extra, option in (("studio", "no_studio"), ("archive", "no_archive")):
        missing = missing_modules(extra)
        if getattr(args, option) or not missing:
            continue
        if extra == "archive" and args.archive:
            raise MissingExtra(extra, missing[0])
        setattr(args, option, True)
        print(
            f"tablectl run: the {extra} is not installed (no module {missing[0]!r}): running "
            f"without it, as with --{option.replace('_', '-')}; pip install "
            f"'tablectl[{extra}]' adds it",
            file=sys.stderr,
            flush=True,
        )


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
    public_key = None
    if settings.signing.key_file is not None:  # --sign, or TABLECTL_SIGNING__KEY_FILE
        from controller.signing import Signer

        signer = Signer.from_file(settings.signing.key_file, settings.signing.key_id)
        public_key = signer.public_key
    keys = TableKeys({settings.table_id: public_key}, config.mqtt.topic_prefix)
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
            think_seconds=SIM_THINK_SECONDS,
        )

    return {"simulated-betting": betting}


def _studio(
    args: argparse.Namespace,
    settings: TableSettings,
    *,
    on_ready: Callable[[StudioAddress], None] | None = None,
    announce_after: asyncio.Event | None = None,
) -> dict[str, Companion]:
    """The studio beside a simulated table (``--no-studio``: none), on the table's broker.

    ``on_ready`` is called with its address once it listens (after its pages are printed).
    ``announce_after``: the pages are printed once it is set too (a lingering studio starts
    before the table: its pages are printed once the table handles Ctrl-C, so a Ctrl-C
    after them stops the table, not the process).
    """
    if args.no_studio:
        return {}
    _check_studio_options(args)
    table_id = settings.table_id
    password_file = settings.journal.path.parent / DEMO_PIT_PASSWORD_FILE
    password = _demo_password(password_file)

    async def studio(mqtt: MqttSettings, stop: asyncio.Event) -> None:
        import structlog

        from controller.studio.config import HttpSettings, SecureSettings, StudioSettings
        from controller.studio.errors import StudioError
        from controller.studio.server import run_studio

        delay = args.studio_secure_delay
        studio_settings = StudioSettings(
            http=HttpSettings(host="127.0.0.1", port=args.studio_port),
            # A client id of its own (not the table's): two `make run` on one broker coexist.
            mqtt=mqtt.model_copy(update={"client_id": None}),
            tables=[table_id],
            secure=SecureSettings(delay_seconds=delay) if delay > 0 else None,
            pit=await _demo_pit(mqtt, table_id, password, _demo_archive(args, settings)),
        )

        def ready(address: StudioAddress) -> None:
            if announce_after is not None and not announce_after.is_set():
                asyncio.get_running_loop().create_task(
                    _when_set(announce_after, functools.partial(announce, address)),
                    name="studio-announce",
                )
                return
            announce(address)

        def announce(address: StudioAddress) -> None:
            dealer, overlay = address.pages(table_id)
            secure = f" {overlay}?mode=secure-delay" if delay > 0 else ""
            print(f"studio: {dealer} {overlay}{secure}", file=sys.stderr, flush=True)
            print(
                f"pit console: {address.url}/pit/ (sign in as {DEMO_PIT_USER!r}, "
                f"password {password!r}, kept in {password_file})",
                file=sys.stderr,
                flush=True,
            )
            if on_ready is not None:
                on_ready(address)

        try:
            await run_studio(studio_settings, stop, on_ready=ready)
        except StudioError as exc:  # the table plays on without its studio
            structlog.get_logger("studio").warning("studio not started", error=str(exc))

    return {"studio": studio}


def _check_studio_options(args: argparse.Namespace) -> None:
    """The studio's options, and its port free when one is asked for.

    Raises:
        ConfigError: A port or a delay out of range.
        StudioError: The port asked for is taken (naming who holds it, when that is known):
            an OBS browser source set up on :8080 must not follow a studio moved elsewhere.
    """
    if args.studio_port is None:
        args.studio_port = _default_studio_port()
    if not 0 <= args.studio_port <= 65535:
        raise ConfigError("--studio-port must be 0-65535", field="--studio-port")
    if args.studio_secure_delay < 0:
        raise ConfigError("--studio-secure-delay must be 0 or more", field="--studio-secure-delay")
    if args.studio_port != 0:
        from controller.studio.server import bind

        bind("127.0.0.1", args.studio_port).close()


def _default_studio_port() -> int:
    """The studio's port when ``--studio-port`` is not given: 8080, or the environment's.

    ``TABLECTL_STUDIO_HTTP__PORT`` is the variable ``tablectl studio`` reads for its
    ``[http] port``: one name for one thing. For a machine where 8080 is someone else's (and
    the test suite, whose tables each take a free port: 0).

    Raises:
        ConfigError: The variable is not a whole number.
    """
    text = os.environ.get("TABLECTL_STUDIO_HTTP__PORT", "").strip()
    if not text:
        return 8080
    if not text.isdigit():
        raise ConfigError(
            f"TABLECTL_STUDIO_HTTP__PORT must be a port number (0-65535), not {text!r}",
            field="TABLECTL_STUDIO_HTTP__PORT",
        )
    return int(text)


async def _when_set(event: asyncio.Event, then: Callable[[], None]) -> None:
    """``then()`` once ``event`` is set."""
    await event.wait()
    then()


_STUDIO_STOP_SECONDS = 10.0
"""How long a lingering studio may take to stop (its pages' sockets closed) after Ctrl-C."""


class _Linger:
    """``--linger``: the studio outlives the table and serves until Ctrl-C (or SIGTERM).

    Without it the studio is one of the table's companions and stops with it. With it, it
    runs beside the table in a task of its own (started by :meth:`running`, on the broker the
    table uses), and once the table has stopped :meth:`serve_until_stopped` keeps the process
    up until a stop signal: the secure-delay overlay, ``--studio-secure-delay`` behind, shows
    the last round's result.
    """

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._address: StudioAddress | None = None
        self.table_started = asyncio.Event()
        """Set once the table runs (its stop signals handled): the studio's pages are
        printed then."""

    def companions(self) -> dict[str, Companion]:
        """A companion that sets :attr:`table_started` and lives as long as the table.

        The table starts its companions once it handles its stop signals.
        """

        async def started(mqtt: MqttSettings, stop: asyncio.Event) -> None:
            self.table_started.set()
            await stop.wait()

        return {"linger-table-started": started}

    def on_ready(self, address: StudioAddress) -> None:
        """The studio listens at ``address`` (named when the table has stopped)."""
        self._address = address

    @contextlib.asynccontextmanager
    async def running(self, studio: Companion, mqtt: MqttSettings) -> AsyncIterator[None]:
        """The studio runs until the block ends (then it is stopped and awaited)."""

        async def serve() -> None:
            await studio(mqtt, self._stop)

        self._task = asyncio.create_task(serve(), name="studio")
        try:
            yield
        finally:
            self._stop.set()
            try:
                async with asyncio.timeout(_STUDIO_STOP_SECONDS):
                    await asyncio.shield(self._task)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task

    async def serve_until_stopped(self, table_id: str, secure: bool) -> None:
        """Once the table has stopped: serve until SIGINT/SIGTERM (nothing if no studio runs)."""
        task = self._task
        if task is None or task.done():
            return  # the studio did not start (logged): nothing to keep the process for
        loop = asyncio.get_running_loop()
        signalled = asyncio.Event()
        # These replace the table's handlers (a second Ctrl-C there means "stop at once").
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, signalled.set)
        where = "the studio"
        if self._address is not None:
            overlay = self._address.pages(table_id)[1]
            where = f"{overlay}?mode=secure-delay" if secure else overlay
        print(
            f"tablectl run: the table has stopped; --linger keeps the studio serving "
            f"({where} shows the last result) until Ctrl-C",
            file=sys.stderr,
            flush=True,
        )
        waiter = asyncio.create_task(signalled.wait(), name="linger-signal")
        try:
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        if task.done():
            task.result()  # the studio ended by itself: raise what ended it


DEMO_PIT_USER = "pit"
"""The simulated table's pit-console user (its password is kept in the run directory)."""

DEMO_SCRYPT_N = 2**10
"""scrypt's cost for the demo pit password's in-memory hash (the default is 2**15)."""

DEMO_PIT_PASSWORD_FILE = "studio-pit-password"
"""The demo pit password's file, beside the journal (``make run``: ``var/``)."""


def _demo_password(path: Path) -> str:
    """The demo pit console's password: the one kept in ``path``, else a new one saved there.

    Kept between runs of one run directory, so a browser's saved sign-in keeps working; the
    file is the user's only (mode 0600). A file that cannot be read as a password (empty,
    not text, too short) is replaced by a new one.
    """
    from controller.studio.pit.passwords import MIN_PASSWORD_LENGTH

    try:
        kept = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        kept = ""
    if len(kept) >= MIN_PASSWORD_LENGTH and kept.isprintable():
        return kept
    password = secrets.token_urlsafe(12)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(password + "\n")
    return password


def _demo_archive(args: argparse.Namespace, settings: TableSettings) -> str | None:
    """The archive beside the simulated table (``None`` with ``--no-archive``).

    The demo pit console reads it: recall of any round, and "today against the par sheet"
    (``/pit/today``).
    """
    if args.no_archive:
        return None
    from controller.archive.embedded import default_url

    url: str = args.archive or default_url(settings.journal.path)
    return url


async def _demo_pit(
    mqtt: MqttSettings, table_id: str, password: str, archive: str | None = None
) -> PitSettings:
    """The pit console of a simulated table: one ``pitboss`` user, a fresh password.

    With ``archive`` (the archive beside the table), recall and ``/pit/today`` read it.
    """
    from controller.studio.pit.passwords import hash_password
    from controller.studio.pit.settings import PitSettings

    # The hash never leaves this process (no config file holds it), so scrypt's stretching
    # protects nothing here: a cheap cost (1 MiB, ~2 ms) instead of the default's 32 MiB and
    # 0.19 s of CPU at every start (docs/performance.md, "The demo"); the login still checks
    # the password with scrypt, and wrong attempts are still delayed.
    stored = hash_password(password, n=DEMO_SCRYPT_N)
    return PitSettings.model_validate(
        {
            "users": [{"name": DEMO_PIT_USER, "role": "pitboss", "password_hash": stored}],
            "session_secret": secrets.token_urlsafe(32),
            "mqtt": mqtt.model_copy(update={"client_id": None}),
            "tables": [table_id],
            **({"archive_url": archive} if archive is not None else {}),
        }
    )
