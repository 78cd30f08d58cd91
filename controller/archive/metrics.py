"""Prometheus metrics of the archive (``tablectl archive run``), served on ``/metrics``.

As :mod:`controller.metrics` does for a table: a registry of the archive's own (never the
library's global one), served from a daemon thread by ``prometheus_client``. Two sources:

* every batch the consumer stores is handed to :meth:`ArchiveMetrics.batch_stored` (the
  consumer's ``on_batch`` hook): entries, duplicates, rejections by reason, statuses, and the
  lag of each live entry (its ``at``, the table's journal commit, to the archive's commit);
* gap counts, open gaps and the broker connection are read from the consumer when Prometheus
  scrapes (:meth:`ArchiveMetrics.watch`), so they cost nothing between scrapes.

Metrics (all names prefixed ``tablectl_archive_``):

===============================  =========  ====================================================
name                             type       labels / meaning
===============================  =========  ====================================================
``entries_total``                counter    ``table``: entries stored (new keys)
``duplicates_total``             counter    ``table``: copies absorbed (QoS 1, replays, results)
``rejected_total``               counter    ``reason``: ``malformed``, ``unknown_table``,
                                            ``schema_version``, ``signature``, ``conflict``,
                                            ``store_error``; the shared bounds' ``too_large``,
                                            ``too_deep``, ``not_utf8``, ``not_json``,
                                            ``not_object``, ``out_of_range``; ``seq_ahead``
``statuses_total``               counter    status messages kept
``lag_seconds``                  histogram  a live entry's ``at`` → the archive's commit
``newest_entry_timestamp``       gauge      ``table``: ``at`` of its newest entry stored (Unix s)
``gaps_open``                    gauge      gaps not filled, in the database (alerted ones included)
``gap_replays_total``            counter    replays asked of tables
``gap_alerts_total``             counter    gaps not filled in time
``gaps_filled_total``            counter    gaps filled
``broker_connected``             gauge      1 while subscribed
===============================  =========  ====================================================
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import start_http_server as _start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.archive.config import MetricsSettings
from controller.archive.errors import ArchiveError
from controller.archive.ingest import Entry, Rejected, Status
from controller.metrics import MetricsServer

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from controller.archive.consumer import ArchiveConsumer

log = structlog.get_logger("archive.metrics")

REJECTION_REASONS = (
    "malformed",
    "unknown_table",
    "schema_version",
    "signature",
    "conflict",
    "store_error",
    "too_large",
    "too_deep",
    "not_utf8",
    "not_json",
    "not_object",
    "out_of_range",
    "seq_ahead",
    "unsigned",
)
"""The ``reason`` label values (docs/archive.md, "What is rejected"); anything else: ``other``."""

LAG_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    10.0,
    60.0,
    600.0,
)
"""Seconds: the target is a p99 of 50 ms (docs/archive.md); minutes mean a backlog drained."""

_GAP_COUNTS = (
    ("gap_replays_total", "replay_requested", "Replays of gaps asked of the tables."),
    ("gap_alerts_total", "gap_alert", "Gaps not filled in time (alerts raised)."),
    ("gaps_filled_total", "gap_filled", "Gaps filled (every missing seq arrived)."),
)


class ArchiveMetrics:
    """The archive's metrics, in a registry of their own.

    Args:
        registry: A registry to use (a new one if not given).
        clock: Wall-clock seconds (lag is measured against the tables' ``at``, so the archive
            and the tables must be NTP-synchronised, as their journals' times already assume).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.clock = clock
        reg = self.registry
        self._entries = Counter(
            "tablectl_archive_entries", "Entries stored (new keys).", ["table"], registry=reg
        )
        self._duplicates = Counter(
            "tablectl_archive_duplicates",
            "Copies of stored entries absorbed (QoS 1 redelivery, replays, results copies).",
            ["table"],
            registry=reg,
        )
        self._rejected = Counter(
            "tablectl_archive_rejected",
            "Messages stored as rejected, by reason.",
            ["reason"],
            registry=reg,
        )
        self._statuses = Counter("tablectl_archive_statuses", "Status messages kept.", registry=reg)
        self._lag = Histogram(
            "tablectl_archive_lag_seconds",
            "Seconds from a live entry's time (the table's journal commit) to the archive's "
            "commit of it (delayed and replayed entries are not counted).",
            buckets=LAG_BUCKETS,
            registry=reg,
        )
        self._newest = Gauge(
            "tablectl_archive_newest_entry_timestamp",
            "Time (Unix seconds) of the newest entry stored, per table.",
            ["table"],
            registry=reg,
        )
        for reason in REJECTION_REASONS:
            self._rejected.labels(reason=reason)
        self._newest_seen: dict[str, float] = {}
        self._watch: _ConsumerCollector | None = None

    # -- the consumer's hook -----------------------------------------------------------------

    def batch_stored(
        self, found: Sequence[Entry | Status | Rejected], outcomes: Sequence[str]
    ) -> None:
        """Count a stored batch: what each message was and what became of it.

        Never raises (it runs inside the consumer's loop): a fault here is logged, the batch
        is stored all the same.
        """
        try:
            self._count(found, outcomes)
        except Exception as exc:  # a metric must never stop the archive
            log.error("archive metrics: batch not counted", error=repr(exc))

    def _count(self, found: Sequence[Entry | Status | Rejected], outcomes: Sequence[str]) -> None:
        now = self.clock()
        newest: dict[str, float] = {}
        for item, outcome in zip(found, outcomes, strict=True):
            if outcome == "new" and isinstance(item, Entry):
                self._entries.labels(table=item.table).inc()
                at = item.at.timestamp()
                if not (item.delayed or item.replayed):
                    self._lag.observe(max(0.0, now - at))
                newest[item.table] = max(at, newest.get(item.table, at))
            elif outcome == "duplicate" and isinstance(item, Entry):
                self._duplicates.labels(table=item.table).inc()
            elif outcome == "status":
                self._statuses.inc()
            elif outcome == "conflict" or outcome.startswith("rejected:"):
                reason = outcome.removeprefix("rejected:")
                self._rejected.labels(
                    reason=reason if reason in REJECTION_REASONS else "other"
                ).inc()
        for table, at in newest.items():
            # Only forward: a replayed old entry does not move it back.
            if at > self._newest_seen.get(table, 0.0):
                self._newest_seen[table] = at
                self._newest.labels(table=table).set(at)

    # -- read at scrape time -----------------------------------------------------------------

    def watch(
        self,
        counts: Mapping[str, int],
        *,
        open_gaps: Callable[[], int],
        connected: Callable[[], bool],
    ) -> None:
        """Read gap counts, open gaps and the connection from the consumer at each scrape.

        Args:
            counts: The consumer's counts (``replay_requested``, ``gap_alert``, ``gap_filled``).
            open_gaps: How many gaps are open now.
            connected: Whether the consumer is subscribed now.
        """
        if self._watch is not None:
            self.registry.unregister(self._watch)
        self._watch = _ConsumerCollector(counts, open_gaps, connected)
        self.registry.register(self._watch)

    def watch_consumer(self, consumer: ArchiveConsumer) -> None:
        """Hook into a consumer: its batches (``on_batch``) and its state at scrape time."""
        consumer.on_batch = self.batch_stored
        self.watch(
            consumer.counts,
            open_gaps=lambda: consumer.open_gaps,
            connected=consumer.subscribed.is_set,
        )

    # -- exposition --------------------------------------------------------------------------

    def render(self) -> bytes:
        """The registry in the Prometheus text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)

    def serve(self, settings: MetricsSettings) -> MetricsServer | None:
        """Serve ``/metrics`` from a daemon thread (``None`` when no port is configured).

        Raises:
            ArchiveError: The address cannot be bound.
        """
        if settings.port is None:
            return None
        try:
            server, thread = _start_http_server(
                settings.port, addr=settings.host, registry=self.registry
            )
        except OSError as exc:
            raise ArchiveError(
                f"cannot serve the archive's metrics on {settings.host}:{settings.port} "
                f"(config [metrics]): {exc.strerror or exc}",
                host=settings.host,
                port=settings.port,
            ) from exc
        return MetricsServer(server, thread)


class _ConsumerCollector(Collector):
    """Gap counts, open gaps and the connection, read from the consumer when scraped."""

    def __init__(
        self,
        counts: Mapping[str, int],
        open_gaps: Callable[[], int],
        connected: Callable[[], bool],
    ) -> None:
        self.counts = counts
        self.open_gaps = open_gaps
        self.connected = connected

    def describe(self) -> Iterable[Metric]:
        return self._metrics({}, 0, connected=False)

    def collect(self) -> Iterable[Metric]:
        counts = _snapshot(self.counts)
        return self._metrics(counts, self.open_gaps(), connected=self.connected())

    @staticmethod
    def _metrics(counts: Mapping[str, int], open_gaps: int, *, connected: bool) -> Iterator[Metric]:
        for name, key, text in _GAP_COUNTS:
            family = CounterMetricFamily(f"tablectl_archive_{name.removesuffix('_total')}", text)
            family.add_metric([], counts.get(key, 0))
            yield family
        yield GaugeMetricFamily(
            "tablectl_archive_gaps_open", "Gaps seen and not filled (alerted ones too).", open_gaps
        )
        yield GaugeMetricFamily(
            "tablectl_archive_broker_connected",
            "1 while the archive is subscribed to the broker.",
            1 if connected else 0,
        )


def _snapshot(counts: Mapping[str, int]) -> dict[str, int]:
    """A copy of ``counts`` taken from the HTTP thread while the event loop may add to it."""
    for _ in range(5):
        try:
            return dict(counts)
        except RuntimeError:  # changed size during the copy: take it again
            continue
    return {}
