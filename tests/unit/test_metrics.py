"""Table metrics, scraped over real HTTP and parsed with prometheus_client's own parser."""

from __future__ import annotations

import math
import socket
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.metrics import (
    MAX_REFUSAL_REASONS,
    SCAN_TO_PUBLISH_BUCKETS,
    MetricsError,
    MetricsServer,
    TableMetrics,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(server: MetricsServer) -> tuple[str, str]:
    with urllib.request.urlopen(server.url, timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read().decode()


def samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


@pytest.fixture
def served() -> Iterator[tuple[TableMetrics, MetricsServer]]:
    metrics = TableMetrics("tp-01", version="0.1.0", game="teen-patti-20-20")
    server = metrics.start_http_server("127.0.0.1", 0)
    yield metrics, server
    server.shutdown()


def test_fresh_table_exposes_every_series_at_zero(
    served: tuple[TableMetrics, MetricsServer],
) -> None:
    _, server = served
    content_type, text = scrape(server)
    assert content_type.startswith("text/plain")
    got = samples(text)
    for name in (
        "tablectl_misreads_total",
        "tablectl_rescans_total",
        "tablectl_device_reconnects_total",
        "tablectl_outbox_backlog",
        "tablectl_journal_bytes",
        "tablectl_scan_to_publish_seconds_count",
        "tablectl_device_connected",
        "tablectl_broker_connected",
    ):
        assert got[key(name, table="tp-01")] == 0, name
    assert got[key("tablectl_rounds_total", table="tp-01", outcome="settled")] == 0
    assert got[key("tablectl_rounds_total", table="tp-01", outcome="voided")] == 0
    assert (
        got[key("tablectl_build_info", table="tp-01", version="0.1.0", game="teen-patti-20-20")]
        == 1
    )


def test_calls_show_up_in_a_scrape(served: tuple[TableMetrics, MetricsServer]) -> None:
    metrics, server = served
    for _ in range(5):
        metrics.round_finished("settled")
    metrics.round_finished("voided")
    for _ in range(3):
        metrics.misread()
    metrics.rescan()
    metrics.rescan()
    metrics.card_refused("duplicate")
    metrics.card_refused("Duplicate")
    metrics.card_refused("joker in a joker-less deck")
    metrics.device_reconnected()
    metrics.set_backlog(17)
    metrics.set_backlog(4)
    metrics.set_journal_bytes(123456)
    metrics.set_device_connected(True)
    metrics.set_broker_connected(True)
    metrics.set_broker_connected(False)
    observations = [0.0004, 0.0009, 0.0011, 0.003, 0.7, 2.5]
    for value in observations:
        metrics.observe_scan_to_publish(value)

    got = samples(scrape(server)[1])
    t = {"table": "tp-01"}
    assert got[key("tablectl_rounds_total", outcome="settled", **t)] == 5
    assert got[key("tablectl_rounds_total", outcome="voided", **t)] == 1
    assert got[key("tablectl_misreads_total", **t)] == 3
    assert got[key("tablectl_rescans_total", **t)] == 2
    assert got[key("tablectl_cards_refused_total", reason="duplicate", **t)] == 2
    assert got[key("tablectl_cards_refused_total", reason="joker_in_a_joker_less_deck", **t)] == 1
    assert got[key("tablectl_device_reconnects_total", **t)] == 1
    assert got[key("tablectl_outbox_backlog", **t)] == 4
    assert got[key("tablectl_journal_bytes", **t)] == 123456
    assert got[key("tablectl_device_connected", **t)] == 1
    assert got[key("tablectl_broker_connected", **t)] == 0

    # The histogram: buckets from 0.5 ms to 1 s, cumulative counts computed here.
    assert SCAN_TO_PUBLISH_BUCKETS[0] == 0.0005
    assert SCAN_TO_PUBLISH_BUCKETS[-1] == 1.0
    for bound in SCAN_TO_PUBLISH_BUCKETS:
        expected = sum(1 for value in observations if value <= bound)
        le = str(float(bound))
        name = "tablectl_scan_to_publish_seconds_bucket"
        assert got[key(name, le=le, **t)] == expected, bound
    assert got[key("tablectl_scan_to_publish_seconds_bucket", le="+Inf", **t)] == 6
    assert got[key("tablectl_scan_to_publish_seconds_count", **t)] == 6
    assert math.isclose(got[key("tablectl_scan_to_publish_seconds_sum", **t)], sum(observations))


def test_each_table_has_its_own_registry() -> None:
    a = TableMetrics("tp-01")
    b = TableMetrics("tp-02")  # would raise "Duplicated timeseries" on a shared registry
    a.misread()
    got_a = samples(a.render().decode())
    got_b = samples(b.render().decode())
    assert got_a[key("tablectl_misreads_total", table="tp-01")] == 1
    assert got_b[key("tablectl_misreads_total", table="tp-02")] == 0
    assert not any(dict(labels).get("table") == "tp-01" for _, labels in got_b)


def test_refusal_reasons_are_bounded() -> None:
    metrics = TableMetrics("tp-01")
    for index in range(MAX_REFUSAL_REASONS + 10):
        metrics.card_refused(f"reason {index}")
    metrics.card_refused("reason 0")
    metrics.card_refused("!!!")
    got = samples(metrics.render().decode())
    reasons = {
        dict(labels)["reason"]: value
        for (name, labels), value in got.items()
        if name == "tablectl_cards_refused_total"
    }
    assert len(reasons) == MAX_REFUSAL_REASONS + 1  # the kept ones plus "other"
    assert reasons["reason_0"] == 2
    assert reasons["other"] == 11  # 9 late new reasons, then "!!!" -> "unknown" is late too
    assert "unknown" not in reasons


def test_bad_values_are_refused() -> None:
    metrics = TableMetrics("tp-01")
    with pytest.raises(MetricsError, match="'finished'"):
        metrics.round_finished("finished")  # type: ignore[arg-type]
    with pytest.raises(MetricsError, match="non-negative") as caught:
        metrics.set_backlog(-1)
    assert caught.value.context["metric"] == "backlog"
    with pytest.raises(MetricsError):
        metrics.observe_scan_to_publish(float("nan"))


def test_port_in_use_is_a_metrics_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(MetricsError, match=f"127.0.0.1:{port}"):
            TableMetrics("tp-01").start_http_server("127.0.0.1", port)


def test_shutdown_closes_the_port(served: tuple[TableMetrics, MetricsServer]) -> None:
    _, server = served
    scrape(server)
    server.shutdown()
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection((server.host, server.port), timeout=5),
    ):
        pass
