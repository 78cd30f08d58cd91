"""Run one table: :func:`run_table` (the command line is :mod:`controller.cli.run`).

One process per table. Everything long-lived runs as a named task inside one TaskGroup:
the publisher (outbox), the orchestrator, the command router, the terminal view with
``--show``, and any companions the caller adds (the simulated betting system).
SIGINT/SIGTERM once: no new round opens, a round still in its betting window is voided with
a refund, a started round is completed, the outbox is flushed and the offline status
published. A second signal stops at once; the journal resumes the round on restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from controller import __version__, collector
from controller.broker import choose_broker
from controller.gates import EventGate
from controller.journal import Journal, JournalEntry, PitAlertData
from controller.orchestrator import Gate, Orchestrator, RoundSummary
from controller.publisher import Publisher
from controller.settings import TableSettings
from drivers.supervisor import SupervisedCardSource

if TYPE_CHECKING:
    from controller.metrics import TableMetrics
    from controller.mqtt.settings import MqttSettings

log = structlog.get_logger(__name__)

Companion = Callable[["MqttSettings", asyncio.Event], Coroutine[Any, Any, object]]
"""A task that runs beside a table (e.g. a simulated betting system): called with the
table's effective MQTT settings (brokers resolved) and an event set when the table stops."""


async def run_table(
    settings: TableSettings,
    *,
    rounds: int | None = None,
    show: bool = False,
    broker_urls_given: bool = True,
    install_signal_handlers: bool = False,
    companions: Mapping[str, Companion] | None = None,
) -> list[RoundSummary]:
    """Run a table until ``rounds`` rounds are finished in its journal, or until stopped.

    Args:
        settings: The table's settings (device URL already final).
        rounds: Stop after this many finished rounds in the journal; ``None``: run on.
        show: Print, as a subscriber sees them, the table's messages on standard output.
        broker_urls_given: Whether the broker URLs were configured; if not, use Mosquitto on
            127.0.0.1:1883 when it answers, else an embedded broker.
        install_signal_handlers: Handle SIGINT/SIGTERM (the CLI does; tests don't).
        companions: Named tasks to run beside the table until it stops (the simulated
            betting system of ``tablectl run --simulate``), each started in the table's
            TaskGroup once the outbox, the command router and the orchestrator exist.

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

        def on_takeover(url: str) -> None:
            # Journalled (published once a connection is made again, e.g. after the
            # operator stopped the other client and restarted this controller).
            journal.record(
                PitAlertData.model_construct(
                    slot=None,
                    reason=f"MQTT session taken over at {url}: another client uses this "
                    "table's client id (a second controller?); this table stopped publishing",
                )
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
            on_takeover=on_takeover,
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
            for name, companion in (companions or {}).items():
                background.append(group.create_task(companion(mqtt, watch_stop), name=name))
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
