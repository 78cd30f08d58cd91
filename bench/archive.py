"""The studio archive: ingest rate into PostgreSQL and end-to-end lag, 50 simulated tables.

    .venv/bin/python bench/archive.py                     # 50 tables x 40 rounds, each figure 3x
    .venv/bin/python bench/archive.py --repeat 5 --protocol 3.1.1 --lag-seconds 20
    .venv/bin/python bench/archive.py --instances 1                        # one instance only

Starts its own PostgreSQL cluster (``tests.support.postgres.PostgresCluster``: initdb in a
temporary folder, a free loopback port, ``fsync=off``) and its own Mosquitto
(``tests.support.mosquitto.MosquittoProcess``). The traffic is the project's own: each
simulated table writes its rounds into a real journal (``Journal.append``: round_opened,
betting_closed, six card_dealt, a signed round_result with v2 settlement lines; one round in
25 voided with refunds), and every entry is turned into its MQTT messages by
``controller.messages.messages_for`` (the table's publisher path: public view, ``events`` and
``results`` copies, Ed25519 signature by ``controller.signing.Signer``). The archive checks
every signature against the table's public key, as in production.

Three figures, each beside its target:

* ``ingest (store path)``: every message handed to ``ArchiveConsumer.handle_batches`` in batches
  (classification, signature check, one transaction per batch, round refold), no broker.
* ``ingest (through Mosquitto)``: the backlog a restarting archive finds: the messages are
  published QoS 1 while the archive's persistent session is away, then ``ArchiveConsumer.run``
  is started and timed until every entry is committed. Entries/s = journal entries archived
  (each result also arrives a second time on ``results``: absorbed, not counted).
* each ingest figure again with ``--instances`` archive instances (default 2; 1: skipped):
  each a process of its own, as ``tablectl archive run`` instances are, owning its share of the
  tables (``[consumer] partition = "I/N"``, CRC-32 of the table id), all writing to the one
  database; entries/s from the first instance's start to the last one's end. This is the
  issue's horizontal scale, on this machine's cores.
* ``lag p99``: the archive running, the tables publishing at a steady pace (one entry per
  table every ``--interval`` s; default 0.1 s, 500 entries/s for 50 tables, several times a
  100-table studio's rate); per message, from the table's hand-off to its MQTT client (just
  after its journal commit) to the archive's commit of the batch holding it.

Targets (issue #15): >= 20,000 entries/s; lag p99 <= 50 ms at 50 tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: E402
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: E402

from controller.archive.collector import tune_for_ingest  # noqa: E402
from controller.archive.config import ArchiveSettings, ConsumerSettings  # noqa: E402
from controller.archive.consumer import BATCH_MAX, ArchiveConsumer, Found, Received  # noqa: E402
from controller.archive.ingest import TableKeys  # noqa: E402
from controller.archive.store import ArchiveStore  # noqa: E402
from controller.journal import Journal  # noqa: E402
from controller.messages import Topics, messages_for  # noqa: E402
from controller.signing import Signer  # noqa: E402
from tests.support.mosquitto import MosquittoProcess  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402

TARGET_RATE = 20_000.0
TARGET_LAG_P99 = 0.050
GAME = "teen-patti-20-20"
SLOTS = [("A1", "A"), ("B1", "B"), ("A2", "A"), ("B2", "B"), ("A3", "A"), ("B3", "B")]
DECK = [rank + suit for rank in "23456789TJQKA" for suit in "cdhs"]
BETS = ("player_a", "player_b", "pair_plus_a", "pair_plus_b")

Message = tuple[str, bytes]


def _quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


def _round(rid: str, n: int, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    cards = rng.sample(DECK, 6)
    entries: list[tuple[str, dict[str, Any]]] = [
        (
            "round_opened",
            {
                "round_id": rid,
                "round_no": n,
                "game": GAME,
                "betting_seconds": 15.0,
                "betting_closes_at": "2026-11-25T00:00:15.000000Z",
                "table_state": {},
            },
        ),
        ("betting_closed", {}),
    ]
    for index, (card, (slot, hand)) in enumerate(zip(cards, SLOTS, strict=True)):
        entries.append(
            ("card_dealt", {"slot": slot, "hand": hand, "index": index, "card": card, "face": "up"})
        )
    if n % 25 == 0:
        refunds = {bet: {"outcome": "refund", "payout": "1"} for bet in BETS}
        entries.append(("round_voided", {"reason": "dealer error", "bets": refunds}))
        return entries
    winner = rng.choice("AB")
    lines = [
        {"bet": "player_a", "outcome": "win" if winner == "A" else "lose", "payout": "1.98"},
        {"bet": "player_b", "outcome": "win" if winner == "B" else "lose", "payout": "1.98"},
        {"bet": "pair_plus_a", "outcome": rng.choice(["win", "lose"]), "payout": "2"},
        {"bet": "pair_plus_b", "outcome": rng.choice(["win", "lose"]), "payout": "2"},
    ]
    for line in lines:
        if line["outcome"] == "lose":
            line["payout"] = "0"
    entries.append(
        (
            "round_result",
            {
                "game": GAME,
                "round_no": n,
                "cards": {"A": cards[0::2], "B": cards[1::2]},
                "winner": winner,
                "hands": {
                    "A": {"category": "high_card", "description": "high card"},
                    "B": {"category": "high_card", "description": "high card"},
                },
                "bets": lines,
                "details": {},
            },
        )
    )
    return entries


def table_traffic(
    workdir: Path, table: str, rounds: int, signer: Signer, seed: int
) -> tuple[list[list[Message]], int]:
    """A table's journal of ``rounds`` rounds and its messages, grouped per journal entry."""
    rng = random.Random(seed)
    topics = Topics(table=table)
    start = datetime(2026, 11, 25, tzinfo=UTC)
    out: list[list[Message]] = []
    with Journal.open(workdir / f"{table}.sqlite") as journal:
        journal._connection().execute("PRAGMA synchronous=OFF")  # generation only
        count = 0
        for n in range(1, rounds + 1):
            rid = f"{table}-{n:06d}"
            for kind, body in _round(rid, n, rng):
                at = start + timedelta(seconds=count * 0.5)
                journal.append(kind, body, round_id=rid, happened_at=at)
                count += 1
        for entry in journal.entries():
            sent = messages_for(
                entry,
                topics,
                journal=journal.identity,
                delayed=False,
                snapshot=None,
                with_snapshot=False,
                signer=signer,
            )
            public = {topics.events, topics.results}
            out.append([(m.topic, m.payload) for m in sent if m.topic in public])
    return out, count


def interleave(per_table: Sequence[list[list[Message]]]) -> list[Message]:
    """The tables' messages round-robin, entry by entry (each table's own order kept)."""
    merged: list[Message] = []
    longest = max(len(t) for t in per_table)
    for i in range(longest):
        for table in per_table:
            if i < len(table):
                merged.extend(table[i])
    return merged


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _verdict(ok: bool) -> str:
    return "meets the target" if ok else "MISSES the target"


OPTIONS = {"protocol": "5"}
"""The archive's MQTT protocol (``--protocol``)."""


def _settings(
    db: str, broker: str, client_id: str, partition: str | None = None
) -> ArchiveSettings:
    return ArchiveSettings.model_validate(
        {
            "database": {"url": db},
            "mqtt": {"urls": [broker], "client_id": client_id, "protocol": OPTIONS["protocol"]},
            "consumer": {"partition": partition},
            "gaps": {"grace_seconds": 60, "timeout_seconds": 600},
        }
    )


async def store_path(db: str, keys: TableKeys, messages: list[Message], entries: int) -> float:
    """Entries/s through ``handle_batches`` (no broker)."""
    store = await ArchiveStore.open(db)
    try:
        started, ended = await _store_timed(db, store, keys, messages, entries)
    finally:
        await store.close()
    return entries / (ended - started)


async def _store_timed(
    db: str,
    store: ArchiveStore,
    keys: TableKeys,
    messages: list[Message],
    entries: int,
    *,
    partition: str | None = None,
) -> tuple[float, float]:
    """When ``messages`` started and ended going through ``handle_batches`` (no broker)."""
    settings = _settings(db, "mqtt://127.0.0.1:1", "bench", partition)
    consumer = ArchiveConsumer(settings, store, keys)

    async def batches() -> AsyncIterator[list[Received]]:
        for first in range(0, len(messages), BATCH_MAX):
            yield [Received(t, p) for t, p in messages[first : first + BATCH_MAX]]

    started = time.perf_counter()
    await consumer.handle_batches(batches())
    ended = time.perf_counter()
    assert consumer.counts["new"] == entries, consumer.counts
    return started, ended


class _Timed(ArchiveConsumer):
    """An archive consumer that notes when each message's batch was committed."""

    committed: dict[tuple[str, bytes], float]
    wanted: int
    reached: asyncio.Event

    async def store_classified(
        self,
        messages: Sequence[tuple[str, bytes]],
        found: Sequence[Found],
        done: list[str] | None = None,
    ) -> list[str]:
        outcomes = await super().store_classified(messages, found, done)
        now = time.perf_counter()
        for message in messages:
            self.committed.setdefault(message, now)
        if self.counts["new"] >= self.wanted:
            self.reached.set()
        return outcomes


async def _start(
    db: str, keys: TableKeys, broker: str, client_id: str, partition: str | None = None
) -> tuple[_Timed, asyncio.Task[None], ArchiveStore]:
    store = await ArchiveStore.open(db)
    consumer = _Timed(_settings(db, broker, client_id, partition), store, keys)
    consumer.committed = {}
    consumer.wanted = 1 << 62
    consumer.reached = asyncio.Event()
    task = asyncio.create_task(consumer.run())
    async with asyncio.timeout(10):
        await consumer.subscribed.wait()
    return consumer, task, store


async def _stop(task: asyncio.Task[None], store: ArchiveStore) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await store.close()


async def _wait_new(consumer: _Timed, entries: int, limit: float) -> None:
    consumer.wanted = entries
    if consumer.counts["new"] < entries:
        async with asyncio.timeout(limit):
            await consumer.reached.wait()


async def through_broker(
    db: str,
    keys: TableKeys,
    broker: str,
    messages: list[Message],
    entries: int,
    *,
    client_id: str = "bench-backlog",
) -> float:
    """Entries/s draining a backlog the broker kept for the archive's session."""
    consumer, task, store = await _start(db, keys, broker, client_id)
    await _stop(task, store)  # the session stays on the broker
    await _publish(broker, messages)
    started = time.perf_counter()
    consumer, task, store = await _start(db, keys, broker, client_id)
    try:
        await _wait_new(consumer, entries, 300)
        elapsed = time.perf_counter() - started
    finally:
        await _stop(task, store)
    await _end_session(broker, client_id)
    return entries / elapsed


async def _publish(broker: str, messages: list[Message]) -> None:
    """Publish ``messages`` QoS 1, in order (a backlog for the archives' sessions)."""
    import aiomqtt

    async with aiomqtt.Client("127.0.0.1", int(broker.rsplit(":", 1)[1])) as client:
        for topic, payload in messages:
            await client.publish(topic, payload, qos=1)


async def _end_session(broker: str, client_id: str) -> None:
    """Discard an archive's persistent session once its run is measured.

    Left on the broker, a stopped archive's session keeps its subscriptions: Mosquitto would
    queue every later message for it and save them all each second (``autosave_interval``),
    which the next figure (the lag) would measure as the archive's.
    """
    import aiomqtt

    port = int(broker.rsplit(":", 1)[1])
    v5 = aiomqtt.ProtocolVersion.V5
    async with aiomqtt.Client(
        "127.0.0.1", port, identifier=client_id, protocol=v5, clean_start=True
    ):
        pass  # MQTT 5, clean start, no session expiry: the session ends with this connection


async def lag(
    db: str,
    keys: TableKeys,
    broker: str,
    per_table: Sequence[list[list[Message]]],
    *,
    seconds: float,
    interval: float,
) -> tuple[list[float], float]:
    """Each message's lag (s) with the tables publishing at a steady pace; entries/s offered."""
    import aiomqtt

    consumer, task, store = await _start(db, keys, broker, "bench-lag")
    sent: dict[tuple[str, bytes], float] = {}
    steps = max(1, int(seconds / interval))
    port = int(broker.rsplit(":", 1)[1])

    async def table(traffic: list[list[Message]], offset: float) -> int:
        async with aiomqtt.Client("127.0.0.1", port) as client:
            await asyncio.sleep(offset)
            due = time.perf_counter()
            for group in traffic[:steps]:
                for topic, payload in group:
                    sent[(topic, payload)] = time.perf_counter()
                    await client.publish(topic, payload, qos=1)
                due += interval
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
        return min(steps, len(traffic))

    try:
        started = time.perf_counter()
        counts = await asyncio.gather(
            *(table(t, interval * i / len(per_table)) for i, t in enumerate(per_table))
        )
        offered = sum(counts) / (time.perf_counter() - started)
        await _wait_new(consumer, sum(counts), 60)
    finally:
        await _stop(task, store)
    return [consumer.committed[key] - at for key, at in sent.items()], offered


# -- several instances (processes), partitioned by table ---------------------------------------


@dataclass(frozen=True)
class InstanceSpec:
    """What one archive instance of a multi-instance run does (sent to its process).

    Attributes:
        mode: ``store`` (its tables' messages through ``handle_batches``) or ``broker`` (its
            share of a backlog drained from Mosquitto).
        db: The database URL (one for every instance).
        broker: The broker's URL (``broker`` mode).
        client_id: Its MQTT client id.
        partition: ``I/N``: the tables it owns (``ConsumerSettings.owns``: CRC-32).
        public_keys: Table id → raw Ed25519 public key.
        messages: Its tables' messages (``store`` mode).
        entries: The journal entries of its tables (what it must store).
        protocol: The archive's MQTT protocol.
    """

    mode: str
    db: str
    broker: str
    client_id: str
    partition: str
    public_keys: dict[str, bytes]
    messages: list[Message]
    entries: int
    protocol: str


def _instance(conn: Connection, spec: InstanceSpec) -> None:
    """A spawned archive instance: set up, say ``ready``, wait for ``go``, send its times."""
    _quiet()
    OPTIONS["protocol"] = spec.protocol
    keys = TableKeys(
        {t: Ed25519PublicKey.from_public_bytes(raw) for t, raw in spec.public_keys.items()}
    )
    tune_for_ingest()  # as `tablectl archive run` does in its own process
    conn.send(asyncio.run(_instance_async(conn, spec, keys)))


async def _instance_async(
    conn: Connection, spec: InstanceSpec, keys: TableKeys
) -> tuple[float, float]:
    if spec.mode == "store":
        store = await ArchiveStore.open(spec.db)
        try:
            conn.send("ready")
            await asyncio.to_thread(conn.recv)
            return await _store_timed(
                spec.db, store, keys, spec.messages, spec.entries, partition=spec.partition
            )
        finally:
            await store.close()
    consumer, task, store = await _start(spec.db, keys, spec.broker, spec.client_id, spec.partition)
    await _stop(task, store)  # its session (its tables' subscriptions) stays on the broker
    conn.send("ready")
    await asyncio.to_thread(conn.recv)  # the backlog is published
    started = time.perf_counter()
    consumer, task, store = await _start(spec.db, keys, spec.broker, spec.client_id, spec.partition)
    try:
        await _wait_new(consumer, spec.entries, 300)
        ended = time.perf_counter()
    finally:
        await _stop(task, store)
    await _end_session(spec.broker, spec.client_id)
    return started, ended


async def instances(
    mode: str,
    count: int,
    db: str,
    keys: TableKeys,
    *,
    broker: str,
    messages: list[Message],
    entries_per_table: dict[str, int],
    run: int = 0,
) -> float:
    """Entries/s of ``count`` archive processes partitioned by table, writing one database.

    Each instance is a process of its own (as ``tablectl archive run`` instances are), set
    up before the clock starts; the figure is every table's entries over the time from the
    first instance's start to the last one's end (the clock is the system's monotonic one,
    shared by the processes).
    """
    context = multiprocessing.get_context("spawn")
    migrated = await ArchiveStore.open(db)  # the schema once, before the instances start
    await migrated.close()
    public = {
        t: k.public_bytes(Encoding.Raw, PublicFormat.Raw) for t, k in keys.tables.items() if k
    }
    workers: list[tuple[Connection, Any]] = []
    for index in range(count):
        partition = f"{index}/{count}"
        owned = ConsumerSettings(partition=partition).owns
        mine = [m for m in messages if owned(m[0].split("/")[-2])]
        spec = InstanceSpec(
            mode=mode,
            db=db,
            broker=broker,
            client_id=f"bench-{mode}-{run}-{index}",
            partition=partition,
            public_keys=public,
            messages=mine if mode == "store" else [],
            entries=sum(n for t, n in entries_per_table.items() if owned(t)),
            protocol=str(OPTIONS["protocol"]),
        )
        ours, theirs = context.Pipe()
        process = context.Process(target=_instance, args=(theirs, spec), name=f"archive-{index}")
        process.start()
        workers.append((ours, process))
    try:
        for conn, _ in workers:
            if await asyncio.wait_for(asyncio.to_thread(conn.recv), 120) != "ready":
                raise RuntimeError("an archive instance did not get ready")
        if mode == "broker":
            await _publish(broker, messages)
        for conn, _ in workers:
            conn.send("go")
        times: list[tuple[float, float]] = [
            await asyncio.wait_for(asyncio.to_thread(c.recv), 600) for c, _ in workers
        ]
    finally:
        for _, process in workers:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    total = sum(entries_per_table.values())
    return total / (max(end for _, end in times) - min(start for start, _ in times))


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _rates(name: str, rates: list[float]) -> None:
    each = ", ".join(f"{r:,.0f}" for r in rates)
    best, median = max(rates), statistics.median(rates)
    print(
        f"{name:<28} {median:10,.0f} entries/s median, {best:,.0f} best ({each})   target >= "
        f"{TARGET_RATE:,.0f}: {_verdict(median >= TARGET_RATE)}"
    )


async def main_async(args: argparse.Namespace) -> int:
    OPTIONS["protocol"] = args.protocol
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-archive-") as tmp:
        workdir = Path(tmp)
        signers = {
            f"bt-{n:02d}": Signer(Ed25519PrivateKey.generate(), f"bt-{n:02d}")
            for n in range(1, args.tables + 1)
        }
        keys = TableKeys({t: s.public_key for t, s in signers.items()})
        print(f"generating {args.tables} tables x {args.rounds} rounds (real journals)...")
        per_table, entries, entries_per_table = [], 0, {}
        for n, (table, signer) in enumerate(signers.items()):
            traffic, count = table_traffic(workdir, table, args.rounds, signer, seed=n)
            per_table.append(traffic)
            entries += count
            entries_per_table[table] = count
        messages = interleave(per_table)
        print(f"  {entries} journal entries, {len(messages)} MQTT messages; {_load()}")
        if args.collector == "archive":
            # As `tablectl archive run` sets its process (controller/archive/collector.py); the
            # traffic made above stands for the broker's, frozen with the process's start.
            tune_for_ingest()
        with PostgresCluster() as cluster:
            rates = [
                await store_path(cluster.create_database("bench"), keys, messages, entries)
                for _ in range(args.repeat)
            ]
            _rates("ingest (store path)", rates)

            async def scaled(mode: str, broker: str) -> None:
                """The last figure again with ``--instances`` processes (none when 1)."""
                if args.instances < 2:
                    return
                rates = [
                    await instances(
                        mode,
                        args.instances,
                        cluster.create_database("bench"),
                        keys,
                        broker=broker,
                        messages=messages,
                        entries_per_table=entries_per_table,
                        run=n,
                    )
                    for n in range(args.repeat)
                ]
                _rates(f"  {args.instances} instances", rates)

            await scaled("store", "")
            (workdir / "broker").mkdir()
            with MosquittoProcess(workdir / "broker") as broker:
                rates = []
                for n in range(args.repeat):
                    db = cluster.create_database("bench")
                    rates.append(
                        await through_broker(
                            db, keys, broker.url, messages, entries, client_id=f"bench-backlog-{n}"
                        )
                    )
                _rates(f"ingest (Mosquitto, MQTT {args.protocol})", rates)
                await scaled("broker", broker.url)
                db = cluster.create_database("bench")
                lags, offered = await lag(
                    db,
                    keys,
                    broker.url,
                    per_table,
                    seconds=args.lag_seconds,
                    interval=args.interval,
                )
                p99 = _p(lags, 0.99)
                print(
                    f"lag at {len(per_table)} tables ({offered:,.0f} entries/s offered, "
                    f"{len(lags)} messages): median {statistics.median(lags) * 1e3:.1f} ms, "
                    f"p99 {p99 * 1e3:.1f} ms, max {max(lags) * 1e3:.1f} ms   target p99 <= "
                    f"{TARGET_LAG_P99 * 1e3:.0f} ms: {_verdict(p99 <= TARGET_LAG_P99)}"
                )
        print(_load())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--lag-seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each ingest figure (a fresh database each)"
    )
    parser.add_argument(
        "--instances",
        type=int,
        default=2,
        help="also measure this many archive processes, partitioned by table (1: one only)",
    )
    parser.add_argument(
        "--protocol", choices=["5", "3.1.1"], default="5", help="the archive's MQTT protocol"
    )
    parser.add_argument(
        "--collector",
        choices=["archive", "default"],
        default="archive",
        help="the garbage collector as `archive run` sets it, or CPython's defaults",
    )
    args = parser.parse_args()
    _quiet()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
