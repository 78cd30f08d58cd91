"""Prometheus metrics of one table controller.

Each table process owns a :class:`TableMetrics` with its own ``CollectorRegistry`` (never the
library's global one, so tests and several tables in one process do not collide). Every
sample carries the ``table`` label, so a studio-wide Prometheus can aggregate 200 tables.

The orchestrator, the driver supervisor and the publisher call the small methods
(:meth:`TableMetrics.round_finished`, :meth:`~TableMetrics.misread`, ...); the process
serves them over HTTP on ``/metrics`` with :meth:`TableMetrics.start_http_server`.

Metrics (all names prefixed ``tablectl_``):

=================================  =========  ==========================================
name                               type       labels / meaning
=================================  =========  ==========================================
``rounds_total``                   counter    ``outcome`` = ``settled`` | ``voided``
``misreads_total``                 counter    unreadable scans (a rescan was requested)
``rescans_total``                  counter    rescan requests sent to the device
``cards_refused_total``            counter    ``reason`` (short code: ``duplicate``...)
``device_reconnects_total``        counter    the card source was reopened
``messages_rejected_total``        counter    ``reader``, ``code``: messages read and rejected
``publish_refused_total``          counter    publishes the broker refused (alarm)
``outbox_backlog``                 gauge      journal entries not yet acknowledged
``scan_to_publish_seconds``        histogram  card read -> PUBACK of its event
``journal_bytes``                  gauge      size of the journal file(s)
``device_connected``               gauge      1 while the card source is open
``broker_connected``               gauge      1 while the publisher is connected
``build_info``                     info       ``version``, ``game``
=================================  =========  ==========================================
"""

from __future__ import annotations

import re
import threading
from typing import Literal
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)
from prometheus_client import start_http_server as _start_http_server

from controller.errors import TablectlError

RoundOutcome = Literal["settled", "voided"]

SCAN_TO_PUBLISH_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
)
"""Histogram buckets, seconds: the floor on this hardware is about 1 ms (DESIGN.md section 8)."""

MAX_REFUSAL_REASONS = 32
"""Distinct ``reason`` label values kept; later new ones are counted as ``other``."""

_REASON_CLEAN = re.compile(r"[^a-z0-9]+")


class MetricsError(TablectlError):
    """A metric call with a value that cannot be recorded, or a server that cannot start."""


class MetricsServer:
    """The running ``/metrics`` HTTP server (a daemon thread). Call :meth:`shutdown` to stop.

    Attributes:
        host: The address it listens on.
        port: The port it listens on (the real one when 0 was asked for).
    """

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self._closed = False
        address = server.server_address
        self.host = str(address[0])
        self.port = int(address[1])

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop serving, close the socket and wait for the thread (at most ``timeout`` s)."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout)


class TableMetrics:
    """The metrics of one table, in a registry of their own.

    Args:
        table_id: The table id, the ``table`` label of every sample.
        version: Controller version for ``tablectl_build_info``.
        game: Game id for ``tablectl_build_info``.
        registry: A registry to use (a new one if not given).
    """

    def __init__(
        self,
        table_id: str,
        *,
        version: str = "",
        game: str = "",
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.table_id = table_id
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        reg = self.registry
        self._rounds = Counter(
            "tablectl_rounds_total",
            "Rounds finished, by outcome (settled or voided with a refund).",
            ["table", "outcome"],
            registry=reg,
        )
        self._misreads = Counter(
            "tablectl_misreads_total", "Unreadable scans.", ["table"], registry=reg
        )
        self._rescans = Counter(
            "tablectl_rescans_total", "Rescan requests sent to the device.", ["table"], registry=reg
        )
        self._refused = Counter(
            "tablectl_cards_refused_total",
            "Well-formed cards refused for this round, by reason.",
            ["table", "reason"],
            registry=reg,
        )
        self._reconnects = Counter(
            "tablectl_device_reconnects_total",
            "Times the card source was reopened after a failure.",
            ["table"],
            registry=reg,
        )
        self._rejected = Counter(
            "tablectl_messages_rejected_total",
            "Messages read from MQTT and rejected (controller.inbound), by reader and code.",
            ["table", "reader", "code"],
            registry=reg,
        )
        self._publish_refused = Counter(
            "tablectl_publish_refused_total",
            "Publishes the broker refused (MQTT 5 PUBACK reason code >= 0x80).",
            ["table"],
            registry=reg,
        )
        self._backlog = Gauge(
            "tablectl_outbox_backlog",
            "Journal entries not yet acknowledged by the broker.",
            ["table"],
            registry=reg,
        )
        self._latency = Histogram(
            "tablectl_scan_to_publish_seconds",
            "Seconds from a card read to the broker's acknowledgement of its event.",
            ["table"],
            buckets=SCAN_TO_PUBLISH_BUCKETS,
            registry=reg,
        )
        self._journal_bytes = Gauge(
            "tablectl_journal_bytes",
            "Size of the journal on disk (database plus WAL), bytes.",
            ["table"],
            registry=reg,
        )
        self._device_connected = Gauge(
            "tablectl_device_connected", "1 while the card source is open.", ["table"], registry=reg
        )
        self._broker_connected = Gauge(
            "tablectl_broker_connected",
            "1 while the publisher is connected to a broker.",
            ["table"],
            registry=reg,
        )
        self._info = Info("tablectl_build", "Controller version and game.", ["table"], registry=reg)
        self._info.labels(table=table_id).info({"version": version, "game": game})
        self._reasons: set[str] = set()
        self._reasons_lock = threading.Lock()
        # Create every fixed series at 0 so dashboards and rate() see them from the start.
        for outcome in ("settled", "voided"):
            self._rounds.labels(table=table_id, outcome=outcome)
        for metric in (
            self._misreads,
            self._rescans,
            self._reconnects,
            self._backlog,
            self._latency,
            self._journal_bytes,
            self._device_connected,
            self._broker_connected,
        ):
            metric.labels(table=table_id)

    # -- what the table calls ---------------------------------------------------------------

    def round_finished(self, outcome: RoundOutcome) -> None:
        """Count a finished round: ``"settled"`` or ``"voided"``."""
        if outcome not in ("settled", "voided"):
            raise MetricsError(
                f"round outcome {outcome!r} is not 'settled' or 'voided'",
                table=self.table_id,
                outcome=outcome,
            )
        self._rounds.labels(table=self.table_id, outcome=outcome).inc()

    def misread(self) -> None:
        """Count an unreadable scan."""
        self._misreads.labels(table=self.table_id).inc()

    def rescan(self) -> None:
        """Count a rescan request sent to the device."""
        self._rescans.labels(table=self.table_id).inc()

    def card_refused(self, reason: str) -> None:
        """Count a refused card.

        Args:
            reason: A short reason code (``duplicate``, ``joker``, ``too_many``...). It is
                normalised to ``[a-z0-9_]``, at most 40 characters; past
                :data:`MAX_REFUSAL_REASONS` distinct codes, new ones count as ``other`` so a
                free-text reason cannot explode the number of series.
        """
        label = _REASON_CLEAN.sub("_", reason.lower()).strip("_")[:40] or "unknown"
        with self._reasons_lock:
            if label not in self._reasons:
                if len(self._reasons) >= MAX_REFUSAL_REASONS:
                    label = "other"
                self._reasons.add(label)
        self._refused.labels(table=self.table_id, reason=label).inc()

    def message_rejected(self, reader: str, code: str) -> None:
        """Count a message a reader rejected (``code``: :data:`controller.inbound.Code`)."""
        self._rejected.labels(table=self.table_id, reader=reader, code=code).inc()

    def publish_refused(self) -> None:
        """Count a publish the broker refused (an ACL or quota problem: an alarm)."""
        self._publish_refused.labels(table=self.table_id).inc()

    def device_reconnected(self) -> None:
        """Count a reopening of the card source."""
        self._reconnects.labels(table=self.table_id).inc()

    def set_backlog(self, entries: int) -> None:
        """Set the number of journal entries waiting for the broker's acknowledgement."""
        self._backlog.labels(table=self.table_id).set(self._non_negative("backlog", entries))

    def observe_scan_to_publish(self, seconds: float) -> None:
        """Record one card's read-to-acknowledgement latency."""
        self._latency.labels(table=self.table_id).observe(
            self._non_negative("scan_to_publish", seconds)
        )

    def set_journal_bytes(self, size: int) -> None:
        """Set the journal's size on disk."""
        self._journal_bytes.labels(table=self.table_id).set(
            self._non_negative("journal_bytes", size)
        )

    def set_device_connected(self, connected: bool) -> None:
        """Whether the card source is open now."""
        self._device_connected.labels(table=self.table_id).set(1 if connected else 0)

    def set_broker_connected(self, connected: bool) -> None:
        """Whether the publisher is connected now."""
        self._broker_connected.labels(table=self.table_id).set(1 if connected else 0)

    def _non_negative(self, what: str, value: float) -> float:
        if not value >= 0:  # also refuses NaN
            raise MetricsError(
                f"{what} must be a non-negative number, got {value!r}",
                table=self.table_id,
                metric=what,
                value=value,
            )
        return float(value)

    # -- exposition --------------------------------------------------------------------------

    def render(self) -> bytes:
        """The registry in the Prometheus text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)

    def start_http_server(self, host: str = "127.0.0.1", port: int = 9464) -> MetricsServer:
        """Serve ``/metrics`` from a daemon thread.

        Args:
            host: Address to listen on (``0.0.0.0`` for all; default loopback only).
            port: TCP port; 0 picks a free one (see :attr:`MetricsServer.port`).

        Raises:
            MetricsError: The address cannot be bound (in use, not ours...).
        """
        try:
            server, thread = _start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise MetricsError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
                table=self.table_id,
                host=host,
                port=port,
            ) from exc
        return MetricsServer(server, thread)
