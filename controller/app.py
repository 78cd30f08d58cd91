"""Run one table: :func:`run_table` (the command line is :mod:`controller.cli.run`).

One process per table. Everything long-lived runs as a named task inside one TaskGroup:
the publisher (outbox), the orchestrator, the command router, the terminal view with
``--show``, and any companions the caller adds (the simulated betting system).
SIGINT/SIGTERM once: no new round opens, a round still in its betting window is voided with
a refund, a started round is completed, the outbox is flushed and the offline status
published. A second signal stops at once (:class:`StoppedAtOnce`: the command exits with
128 + the signal's number, docs/operations.md); the journal resumes the round on restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from controller import __version__, collector
from controller.broker import choose_broker
from controller.errors import TablectlError
from controller.gates import EventGate
from controller.journal import Journal, JournalEntry, PitAlertData
from controller.orchestrator import Gate, Orchestrator, RoundSummary
from controller.publisher import Publisher
from controller.settings import TableSettings
from drivers.source import CardSource
from drivers.supervisor import SupervisedCardSource

if TYPE_CHECKING:
    from controller.commands import CommandRouter, StatusWatcher
    from controller.games.live.base import LiveGame
    from controller.inbound import Rejection
    from controller.metrics import TableMetrics
    from controller.mqtt.settings import MqttSettings
    from controller.signing import Signer

log = structlog.get_logger(__name__)

Companion = Callable[["MqttSettings", asyncio.Event], Coroutine[Any, Any, object]]
"""A task that runs beside a table (e.g. a simulated betting system): called with the
table's effective MQTT settings (brokers resolved) and an event set when the table stops."""


STOPPED_AT_ONCE_BASE = 128
"""A second stop signal exits with ``128 + signal number`` (the shell's convention for a
process ended by a signal): 130 after SIGINT, 143 after SIGTERM (docs/operations.md)."""


class StoppedAtOnce(TablectlError):
    """A second SIGINT/SIGTERM stopped the table at once; a started round stays in the journal.

    Attributes:
        exit_status: ``128 + signal number``: the command line exits with it.
    """

    def __init__(self, signum: int, round_id: str | None) -> None:
        name = signal.Signals(signum).name
        left = (
            f"round {round_id} is left in the journal and resumes on the next start"
            if round_id
            else "no round was in play"
        )
        super().__init__(f"stopped at once by a second {name}: {left}")
        self.exit_status = STOPPED_AT_ONCE_BASE + signum


@dataclass
class _StopSignals:
    """What the signal handlers saw: the signal that asked to stop at once, if any.

    Attributes:
        at_once: The second signal's number.
        round_id: The round in play when it came (it stays in the journal).
    """

    at_once: int | None = None
    round_id: str | None = None


async def run_table(
    settings: TableSettings,
    *,
    rounds: int | None = None,
    show: bool = False,
    broker_urls_given: bool = True,
    install_signal_handlers: bool = False,
    companions: Mapping[str, Companion] | None = None,
    usb_backend: Any = None,
) -> list[RoundSummary]:
    """Run a table until ``rounds`` rounds are finished in its journal, or until stopped.

    Args:
        settings: The table's settings (device URL already final).
        rounds: Stop after this many finished rounds in the journal; ``None``: run on.
        show: Print, as a subscriber sees them, the table's messages on standard output.
            The first round opens only once the view is subscribed, and at the end the view
            waits (a few seconds at most) for the journal's last entry, so it shows every one.
        broker_urls_given: Whether the broker URLs were configured; if not, use Mosquitto on
            127.0.0.1:1883 when it answers, else an embedded broker.
        install_signal_handlers: Handle SIGINT/SIGTERM (the CLI does; tests don't).
        companions: Named tasks to run beside the table until it stops.
        usb_backend: The pyusb backend for USB devices (``None``: libusb; ``run
            --simulate`` with a HID scanner: the simulated backend).

    Returns:
        The rounds this run finished.

    Raises:
        StoppedAtOnce: A second stop signal (with ``install_signal_handlers``) cut the run
            short; the journal keeps the round to resume it on the next start.
    """
    signals = _StopSignals()
    try:
        return await _run_table(
            settings,
            rounds=rounds,
            show=show,
            broker_urls_given=broker_urls_given,
            signals=signals if install_signal_handlers else None,
            companions=companions,
            usb_backend=usb_backend,
        )
    except asyncio.CancelledError:
        if signals.at_once is None:
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        raise StoppedAtOnce(signals.at_once, signals.round_id) from None


async def _run_table(
    settings: TableSettings,
    *,
    rounds: int | None,
    show: bool,
    broker_urls_given: bool,
    signals: _StopSignals | None,
    companions: Mapping[str, Companion] | None,
    usb_backend: Any = None,
) -> list[RoundSummary]:
    """The body of :func:`run_table`.

    Args:
        settings: The table's settings (device URL already final).
        rounds: Stop after this many finished rounds in the journal; ``None``: run on.
        show: Print, as a subscriber sees them, the table's messages on standard output.
        broker_urls_given: Whether the broker URLs were configured; if not, use Mosquitto on
            127.0.0.1:1883 when it answers, else an embedded broker.
        signals: Handle SIGINT/SIGTERM and note a second one there (``None``: no handlers).
        companions: Named tasks to run beside the table until it stops (the simulated
            betting system of ``tablectl run --simulate``), each started in the table's
            TaskGroup once the outbox, the command router and the orchestrator exist.
        usb_backend: The pyusb backend for USB devices (``None``: libusb).

    Returns:
        The rounds this run finished.
    """
    from controller.games.registry import make_live_game

    game = make_live_game(settings.game, settings.game_options, settings.paytables)
    tlog = log.bind(table=settings.table_id, game=game.id)

    async with AsyncExitStack() as stack:
        mqtt = settings.mqtt
        if not broker_urls_given:
            mqtt = await _local_broker(stack, mqtt, tlog)
        table = await _assemble(stack, settings, mqtt, game, tlog, usb_backend=usb_backend)
        if signals is not None:
            _install_signal_handlers(table.orchestrator, signals)
        return await _serve(table, rounds=rounds, show=show, companions=companions or {})


@dataclass(slots=True)
class _Table:
    """The long-lived parts of a running table, assembled by :func:`_assemble`."""

    settings: TableSettings
    mqtt: MqttSettings
    game_id: str
    journal: Journal
    metrics: TableMetrics
    publisher: Publisher
    watcher: StatusWatcher | None
    orchestrator: Orchestrator
    router: CommandRouter
    log: Any


async def _local_broker(stack: AsyncExitStack, mqtt: MqttSettings, tlog: Any) -> MqttSettings:
    """No broker configured: Mosquitto on 127.0.0.1:1883 when it answers, else embedded."""
    urls, embedded, protocol = await choose_broker([])
    if embedded is not None:
        await stack.enter_async_context(embedded)
        tlog.info("no broker configured: embedded broker started", url=urls[0])
    else:
        tlog.info("no broker configured: using the local Mosquitto", url=urls[0])
    return mqtt.model_copy(update={"urls": urls, "protocol": protocol})


async def _assemble(
    stack: AsyncExitStack,
    settings: TableSettings,
    mqtt: MqttSettings,
    game: LiveGame,
    tlog: Any,
    *,
    usb_backend: Any = None,
) -> _Table:
    """Assemble a table: journal, card source, outbox, gates, orchestrator, command router.

    What needs closing is closed with ``stack``.
    """
    from controller.commands import CommandRouter, StatusWatcher
    from controller.metrics import TableMetrics

    journal = Journal.open(settings.journal.path)
    stack.callback(journal.close)
    metrics = TableMetrics(settings.table_id, version=__version__, game=game.id)
    if settings.metrics.port is not None:
        server = metrics.start_http_server(settings.metrics.host, settings.metrics.port)
        stack.callback(server.shutdown)
    source = card_source_for(settings, usb_backend=usb_backend)
    await source.open()
    stack.push_async_callback(source.close)
    scan_times = _ScanTimes(metrics, tlog)

    def on_takeover(url: str) -> None:
        # Journalled (published once a connection is made again, e.g. after the
        # operator stopped the other client and restarted this controller).
        journal.record(
            PitAlertData.model_construct(
                slot=None,
                reason=f"MQTT session taken over at {url}: another client uses this "
                "table's client id (a second controller?); this table stops publishing for "
                f"{mqtt.takeover_pause_seconds:g} s (mqtt.takeover_pause_seconds), then tries "
                "again",
            )
        )

    publisher = Publisher(
        mqtt,
        settings.table_id,
        journal,
        game=game.id,
        version=__version__,
        signer=_signer(settings),
        on_delivered=scan_times.on_delivered,
        on_refused=scan_times.on_refused,
        on_takeover=on_takeover,
    )
    gates: list[Gate] = []
    if settings.rounds.wait_for_broker:
        gates.append(EventGate("broker", "broker unreachable", publisher.connected))
    watcher: StatusWatcher | None = None
    if settings.rounds.wait_for_betting_system:
        watcher = StatusWatcher(mqtt, settings.table_id, journal=journal)
        gates.append(EventGate("betting-system", "betting system offline", watcher.online))
    orchestrator = Orchestrator(
        table_id=settings.table_id,
        game=game,
        source=source,
        journal=journal,
        settings=settings.rounds,
        gates=gates,
        replay=publisher.replay,
        on_card=scan_times.on_card,
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
        replay_limits=settings.replay,
    )
    for log in (router.rejections, *([watcher.rejections] if watcher is not None else [])):
        log.on_reject = functools.partial(_count_rejection, metrics, log.reader)
    return _Table(
        settings, mqtt, game.id, journal, metrics, publisher, watcher, orchestrator, router, tlog
    )


def _count_rejection(metrics: TableMetrics, reader: str, rejection: Rejection) -> None:
    metrics.message_rejected(reader, rejection.code)


def card_source_for(settings: TableSettings, *, usb_backend: Any = None) -> CardSource:
    """The table's card source: its device under a supervisor, or its readers (not open).

    ``[device]``: a :class:`~drivers.supervisor.SupervisedCardSource`. ``[[devices]]``: a
    :class:`~drivers.multi_reader.MultiReaderSource` of one supervised source a reader, each
    bound to its slots (hand names expanded: :func:`controller.settings.reader_bindings`).
    """
    if settings.device is not None:
        return SupervisedCardSource(
            settings.device.url, settings.device.driver, usb_backend=usb_backend
        )
    from controller.settings import reader_bindings
    from drivers.multi_reader import MultiReaderSource, ReaderBinding

    assert settings.devices is not None
    slots = reader_bindings(settings.game, settings.devices, settings.game_options)
    readers = [
        ReaderBinding(name, reader.url, slots[name], reader.driver)
        for name, reader in zip(slots, settings.devices, strict=True)
    ]
    return MultiReaderSource(readers, usb_backend=usb_backend)


def _signer(settings: TableSettings) -> Signer | None:
    """The table's message signer, when a signing key is configured."""
    if settings.signing.key_file is None:
        return None
    from controller.signing import Signer

    return Signer.from_file(settings.signing.key_file, settings.signing.key_id)


class _ScanTimes:
    """Scan-to-publish latency (a card's read time until its PUBACK) and refused publishes."""

    def __init__(self, metrics: TableMetrics, tlog: Any) -> None:
        self._metrics = metrics
        self._log = tlog
        self._read_at: dict[int, float] = {}

    def on_card(self, entry: JournalEntry, read_at: float) -> None:
        """A card was journalled (its bytes arrived at ``read_at``, monotonic)."""
        self._read_at[entry.seq] = read_at

    def on_delivered(self, entry: JournalEntry) -> None:
        """The broker acknowledged ``entry``."""
        read_at = self._read_at.pop(entry.seq, None)
        if read_at is not None:
            self._metrics.observe_scan_to_publish(time.monotonic() - read_at)

    def on_refused(self, refusal: Exception, entry: JournalEntry | None) -> None:
        """The broker refused a publish."""
        self._metrics.publish_refused()
        self._log.error(
            "broker refused a publish: check the broker ACL for this table",
            error=str(refusal),
            seq=entry.seq if entry is not None else None,
        )


async def _serve(
    table: _Table, *, rounds: int | None, show: bool, companions: Mapping[str, Companion]
) -> list[RoundSummary]:
    """Run the table's tasks in one TaskGroup until the orchestrator returns; wind down."""
    from controller import service

    background: list[asyncio.Task[Any]] = []
    winding_down = False
    watch_stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        view: _View | None = None
        if show:
            # The view subscribes before anything is published: it misses nothing.
            view = _View()
            background.append(
                group.create_task(
                    view.run(table.mqtt, table.settings.table_id, watch_stop), name="watch"
                )
            )
            await view.wait_subscribed(_VIEW_SUBSCRIBE_SECONDS)
        publisher_task = group.create_task(table.publisher.run(), name="publisher")
        router_task = group.create_task(table.router.run(), name="command-router")
        background.append(router_task)

        def healthy() -> bool:
            alive = [t for t in background if t is not router_task or not winding_down]
            return not publisher_task.done() and all(not t.done() for t in alive)

        _start_background(
            group,
            table,
            background=background,
            healthy=healthy,
            watch_stop=watch_stop,
            companions=companions,
        )
        service.ready(f"table {table.settings.table_id}: {table.game_id}")
        try:
            summaries = await table.orchestrator.run(rounds)
            service.stopping("flushing the outbox")
            # No more commands: what the router journals from now on would not be flushed.
            winding_down = True
            router_task.cancel()
            await asyncio.gather(router_task, return_exceptions=True)
            flushed = await table.publisher.flush(timeout=table.mqtt.publish_timeout * 10)
            if not flushed:
                table.log.warning("outbox not fully delivered at exit; it resumes on restart")
            if view is not None and flushed:
                # Let the terminal view print what the broker is still delivering: every
                # event, and the last round's settlement (its results message comes on a topic
                # of its own, after its events copy: issue 25, the last one was not shown).
                settled = _last_results_seq(table.journal) if summaries else None
                await view.wait_for(table.journal.last_seq, _VIEW_DRAIN_SECONDS, settled)
        finally:
            watch_stop.set()
            with contextlib.suppress(Exception):
                await table.publisher.stop()
            publisher_task.cancel()
            for task in background:
                task.cancel()
    return summaries


def _start_background(
    group: asyncio.TaskGroup,
    table: _Table,
    *,
    background: list[asyncio.Task[Any]],
    healthy: Callable[[], bool],
    watch_stop: asyncio.Event,
    companions: Mapping[str, Companion],
) -> None:
    """Start the tasks beside the orchestrator, each added to ``background``.

    The betting system's status watcher, housekeeping, the watchdog and the companions, in
    that order (the terminal view is started first, by :func:`_serve`).
    """
    from controller import service

    mqtt = table.mqtt
    if table.watcher is not None:
        background.append(group.create_task(table.watcher.run(), name="betting-status"))
    background.append(
        group.create_task(
            _housekeeping(
                table.metrics, table.publisher, table.journal, table.settings.journal.path
            ),
            name="metrics-housekeeping",
        )
    )
    background.append(
        group.create_task(
            service.run_watchdog(healthy, service.watchdog_interval()), name="watchdog"
        )
    )
    for name, companion in companions.items():
        background.append(group.create_task(companion(mqtt, watch_stop), name=name))


_VIEW_SUBSCRIBE_SECONDS = 10.0
"""How long ``--show`` holds the outbox (and so the first round) for the view's subscription;
after it the table starts anyway (a broker that does not answer holds the rounds at the gate)."""

_VIEW_DRAIN_SECONDS = 3.0
"""How long ``--show`` waits at exit for the view to receive the journal's last entry."""


class _View:
    """The terminal view of ``--show`` (:func:`controller.watch.watch`) and what it has shown."""

    def __init__(self) -> None:
        self.subscribed = asyncio.Event()
        self.shown_seq = 0
        self.shown_results = 0
        self._progress = asyncio.Event()

    def _on_seq(self, seq: int) -> None:
        self.shown_seq = max(self.shown_seq, seq)
        self._progress.set()

    def _on_results(self, seq: int) -> None:
        self.shown_results = max(self.shown_results, seq)
        self._progress.set()

    async def run(self, mqtt: MqttSettings, table_id: str, stop: asyncio.Event) -> None:
        """Subscribe and print until ``stop`` is set."""
        from controller.watch import watch

        await watch(
            mqtt.urls,
            table_id,
            protocol=mqtt.protocol,
            prefix=mqtt.topic_prefix,
            stop=stop,
            subscribed=self.subscribed,
            on_event_seq=self._on_seq,
            on_results_seq=self._on_results,
        )

    async def wait_subscribed(self, seconds: float) -> None:
        """Until the view's subscription is acknowledged, at most ``seconds``."""
        try:
            async with asyncio.timeout(seconds):
                await self.subscribed.wait()
        except TimeoutError:
            log.warning("the terminal view is not subscribed yet; starting anyway")

    async def wait_for(self, seq: int, seconds: float, results: int | None = None) -> None:
        """Until the view has shown what the table published last, at most ``seconds``.

        The ``events`` message of ``seq``, and the ``results`` message of ``results`` when one
        is given (the last round's settlement).
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while self.shown_seq < seq or (
                    results is not None and self.shown_results < results
                ):
                    self._progress.clear()
                    await self._progress.wait()


def _last_results_seq(journal: Journal) -> int | None:
    """The ``seq`` of the journal's last result or void (what the ``results`` topic carries)."""
    last = [journal.last_of_kind(kind) for kind in ("round_result", "round_voided")]
    seqs = [entry.seq for entry in last if entry is not None]
    return max(seqs) if seqs else None


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


def _first_stop_message(orchestrator: Orchestrator) -> str:
    """What a first stop signal does, as the operator reads it on the terminal."""
    current = orchestrator.current
    if current is not None and current.halted:
        limit = orchestrator.settings.halted_stop_seconds
        return (
            f"the round {current.round_id} is halted: waiting for the pit boss (resume/void) "
            f"for up to {limit:g} s, then exiting with the round left halted "
            "(again to stop at once)"
        )
    return (
        "stopping after the current round "
        "(a round still in betting is voided and refunded; again to stop at once)"
    )


def _install_signal_handlers(orchestrator: Orchestrator, signals: _StopSignals) -> None:
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if orchestrator.stopping:
            if signals.at_once is not None:
                return  # already stopping at once
            current = orchestrator.current
            signals.at_once = signum
            signals.round_id = current.round_id if current is not None else None
            log.warning("second stop signal: stopping now", signal=name, round=signals.round_id)
            if main_task is not None:
                main_task.cancel()
            return
        log.warning("stop requested", signal=name)
        print(f"\n{name}: {_first_stop_message(orchestrator)}", file=sys.stderr)
        orchestrator.request_stop()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
