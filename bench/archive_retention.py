"""The archive's retention run and metrics hook: how fast, on this machine.

    .venv/bin/python bench/archive_retention.py                  # 10 tables x 20,000 entries
    .venv/bin/python bench/archive_retention.py --tables 20 --entries 50000

Starts its own PostgreSQL cluster (``tests.support.postgres.PostgresCluster``, ``fsync=off``:
the figures are the archive's work, not this VM's disk). Loads two months of entries (January:
every table in a class that is due, so the month is exported and **dropped whole**; February:
half the tables due, so their rows are exported and **deleted**, the others kept), then runs
``controller.archive.retention.retain`` once and prints, per path, rows/s and MB/s of CSV
written (each file written, read back, parsed and checked against a second read of the
database). Also the cost of ``ArchiveMetrics.batch_stored`` per entry (the consumer's metrics
hook), against a batch's store time per entry.

No target in the issue: a 100-table studio makes well under 1,000 entries/s, about 2.6 M a
month; the run must take a month of a studio in minutes, not hours.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.archive.config import RetentionSettings  # noqa: E402
from controller.archive.ingest import Entry, TableKeys, classify  # noqa: E402
from controller.archive.metrics import ArchiveMetrics  # noqa: E402
from controller.archive.retention import retain  # noqa: E402
from controller.archive.store import ArchiveStore  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402

NOW = datetime(2026, 7, 15, tzinfo=UTC)


def _entries(table: str, month: int, count: int) -> list[Entry]:
    keys = TableKeys({table: None})
    start = datetime(2026, month, 1, tzinfo=UTC)
    step = timedelta(days=27) / count
    out: list[Entry] = []
    for seq in range(1, count + 1):
        rnd = f"{table}-{(seq - 1) // 10 + 1:06d}"
        body: dict[str, Any] = {
            "schema_version": "2",
            "table": table,
            "round": rnd,
            "seq": seq + (month - 1) * count,
            "session": 1,
            "kind": "card_dealt",
            "at": (start + step * seq).isoformat().replace("+00:00", "Z"),
            "delayed": False,
            "data": {"slot": f"A{seq % 3 + 1}", "hand": "A", "index": seq % 3, "card": "QH"},
        }
        found = classify(f"tables/{table}/events", json.dumps(body).encode(), keys)
        assert isinstance(found, Entry), found
        out.append(found)
    return out


async def _load(db: str, tables: int, count: int) -> tuple[int, float, list[Entry]]:
    store = await ArchiveStore.open(db)
    total, seconds = 0, 0.0
    sample: list[Entry] = []
    try:
        for month in (1, 2):
            for n in range(tables):
                prefix = "due" if month == 1 or n % 2 == 0 else "keep"
                entries = _entries(f"{prefix}-{n:02d}", month, count)
                for i in range(0, len(entries), 2000):
                    began = time.perf_counter()
                    await store.store_entries(entries[i : i + 2000])
                    seconds += time.perf_counter() - began
                total += len(entries)
                sample = sample or entries[:2000]
    finally:
        await store.close()
    return total, seconds, sample


def _metrics_cost(sample: list[Entry], rounds: int = 50) -> float:
    metrics = ArchiveMetrics()
    outcomes = ["new"] * len(sample)
    began = time.perf_counter()
    for _ in range(rounds):
        metrics.batch_stored(sample, outcomes)
    return (time.perf_counter() - began) / (rounds * len(sample))


async def main_async(args: argparse.Namespace) -> int:
    logging.disable(logging.INFO)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with PostgresCluster() as cluster, tempfile.TemporaryDirectory() as tmp:
        db = cluster.create_database("bench")
        total, store_seconds, sample = await _load(db, args.tables, args.entries)
        settings = RetentionSettings.model_validate(
            {
                "classes": {
                    "due": {"tables": ["due-*"], "keep": "3m"},
                    "keep": {"tables": ["keep-*"], "keep": "5y"},
                }
            }
        )
        export = Path(tmp) / "export"
        began = time.perf_counter()
        partitions = await retain(db, settings, export, now=NOW)
        seconds = time.perf_counter() - began
        failed = [i.outcome for p in partitions for i in p.items if i.outcome.startswith("fail")]
        if failed:
            print("FAILED:", failed[0])
            return 1
        rows = {p.name: sum(i.rows for i in p.items if i.due) for p in partitions}
        size = {
            p.name: sum(f.stat().st_size for f in (export / p.name).glob("*.csv"))
            for p in partitions
        }
        hook = _metrics_cost(sample)
    dropped = rows.get("events_2026_01", 0)
    deleted = rows.get("events_2026_02", 0)
    print(f"loaded {total:,} entries ({args.tables} tables x {args.entries:,} x 2 months)")
    print(
        f"retention run: {seconds:.1f} s for {dropped + deleted:,} rows: "
        f"{(dropped + deleted) / seconds:,.0f} rows/s, "
        f"{sum(size.values()) / seconds / 1e6:.1f} MB/s of CSV "
        f"(January dropped whole: {dropped:,} rows; February: {deleted:,} rows deleted, "
        f"the other half kept)"
    )
    print(
        f"metrics hook: {hook * 1e6:.2f} us per entry; storing: "
        f"{store_seconds / total * 1e6:.1f} us per entry "
        f"({hook / (store_seconds / total) * 100:.1f} % on top)"
    )
    month = 2.6e6
    print(
        f"a 100-table studio's month (~{month / 1e6:.1f} M entries) at this rate: "
        f"{month / ((dropped + deleted) / seconds) / 60:.1f} min"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--entries", type=int, default=20_000, help="per table and month")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
