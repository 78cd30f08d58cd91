"""The issue's test: 10 tables, one broker, two archive instances, one PostgreSQL, faults.

Ten simulated tables (``run_table`` on the pty scanner simulator, signing their results) play
several rounds each through one Mosquitto into **two** ``tablectl archive run`` processes
writing to one PostgreSQL cluster of the test's own (``initdb`` in a temporary folder). Mid-run,
while the tables play: archive A is killed (SIGKILL) and started again; the broker is stopped
and started again (SIGTERM: it saves its sessions and queued messages; docs/archive.md says
what a SIGKILLed broker costs); PostgreSQL is stopped and started again (both archives
reconnect, holding their acknowledgements meanwhile).

Two ways to share the load, one test each:

* ``partitioned`` (``consumer.partition = "0/2"``, ``"1/2"``: plain persistent subscriptions,
  each instance its half of the tables): PostgreSQL holds every entry of every table exactly
  once, equal to the table's journal entry for entry (seq, session, round, kind, time), every
  round folded with its result, no gap left open, no alert.
* ``shared`` (``consumer.share_group``: MQTT 5 ``$share/archive/...``): the same, except that
  Mosquitto 2.0 does not restore shared subscriptions when it restarts
  (:func:`test_mosquitto_forgets_shared_subscriptions_when_it_restarts`), so what the tables
  publish between the broker's restart and the archives' new subscriptions is dropped by the
  broker. The archive must then account for it: every result still arrives (the gaps are
  replayed), every entry that did not is named in an alert, and none is archived twice.

In both, each journal passes ``journal verify`` with the chain heads the archive holds as
anchors (the archive and the journal agree), and the archive's own check of each table
(:func:`controller.archive.verify.verify_table`) finds nothing but what was alerted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from controller.app import run_table
from controller.archive.verify import archive_anchors, verify_table
from controller.cli import main
from controller.journal import Journal
from controller.settings import load_settings
from controller.signing import generate_keypair
from simulators.table import Simulation, simulated_scanner
from tests.support.postgres import MISSING, PostgresCluster, have_postgres

pytestmark = [pytest.mark.hil, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TABLES = tuple(f"scale-{n:02d}" for n in range(1, 11))
ROUNDS = 14
"""Enough play after the last fault (about 6 s in) for the recovery to happen while the tables
still play: a result lost at the broker's restart comes back only by a replay, which a table
serves only while it runs. With 10 rounds the tables could stop about 3 s after PostgreSQL
was back, before every replay was served (seen once in a loaded CI run)."""


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster of this test's own (it is restarted mid-run)."""
    if not have_postgres():
        pytest.skip(MISSING)
    with PostgresCluster() as pg:
        yield pg


class ArchiveProcess:
    """``tablectl archive run --config FILE`` as a process; SIGKILL it and start it again."""

    def __init__(self, workdir: Path, name: str, config: str) -> None:
        self.name = name
        self.config = workdir / f"archive-{name}.toml"
        self.config.write_text(config.replace("CLIENT_ID", f"archive-{name}"))
        self.log = workdir / f"archive-{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "controller.cli",
                    *("archive", "run", "--config"),
                    f"{self.config}",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    def subscriptions(self) -> int:
        return self.text().count("archive subscribed")

    async def wait_subscribed(self, count: int, seconds: float = 30.0) -> None:
        async with asyncio.timeout(seconds):
            while self.subscriptions() < count:
                assert self.process is not None and self.process.poll() is None, self.text()
                await asyncio.sleep(0.05)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        """SIGTERM; the ``new`` count the run printed."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(20) == 0, self.text()[-3000:]
        stopped = self.text().rsplit("archive stopped:", 1)[-1]
        found = re.search(r"\bnew (\d+)", stopped)
        return int(found.group(1)) if found else 0

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _config(db: str, broker_url: str, public: dict[str, Path], consumer: str) -> str:
    tables = "".join(f'[tables.{t}]\npublic_key = "{public[t]}"\n\n' for t in TABLES)
    return (
        f'[database]\nurl = "{db}"\ntimeout_seconds = 5.0\nconnect_timeout_seconds = 2.0\n'
        "reconnect_min_seconds = 0.05\nreconnect_max_seconds = 0.5\n\n"
        f'[mqtt]\nurls = ["{broker_url}"]\nclient_id = "CLIENT_ID"\n'
        "reconnect_min_seconds = 0.05\nreconnect_max_seconds = 0.5\nconnect_timeout = 2.0\n\n"
        f"[consumer]\n{consumer}\n\n"
        # A killed instance's share waits for it on the broker (its seqs are holes for the
        # other instance meanwhile: replays are asked); it is back well within the timeout.
        "[gaps]\ngrace_seconds = 0.5\ntimeout_seconds = 8.0\ncheck_seconds = 0.2\n\n" + tables
    )


async def _tables(broker_url: str, tmp: Path, private: dict[str, Path]) -> None:
    async with contextlib.AsyncExitStack() as stack, asyncio.TaskGroup() as group:
        for n, table in enumerate(TABLES):
            url = await stack.enter_async_context(
                simulated_scanner("teen-patti-20-20", Simulation(seed=40 + n, deal_delay=0.0))
            )
            settings = load_settings(
                None,
                table_id=table,
                device={"url": url},
                mqtt={
                    "urls": [broker_url],
                    "reconnect_min_seconds": 0.05,
                    "reconnect_max_seconds": 0.5,
                },
                journal={"path": tmp / f"{table}.sqlite"},
                rounds={"betting_seconds": 0.5, "pause_seconds": 0.3},
                signing={"key_file": private[table], "key_id": f"{table}-key"},
                # Two archives killed and restarted ask many replays of one table within a
                # minute; the per-role replay limit (test_replay_limit.py) is not under test.
                replay={"commands_per_minute": 10_000, "messages_per_minute": 1_000_000},
            )
            group.create_task(run_table(settings, rounds=ROUNDS), name=table)


async def _scalar(db: str, query: str, *params: Any) -> Any:
    async with await psycopg.AsyncConnection.connect(db) as conn:
        cursor = await conn.execute(query.encode(), params)
        row = await cursor.fetchone()
        return None if row is None else row[0]


async def _settle(db: str, tmp: Path, total: int, seconds: float) -> None:
    """Wait until every entry is archived or alerted, no gap open and not alerted."""
    try:
        async with asyncio.timeout(seconds):
            while True:
                with contextlib.suppress(psycopg.OperationalError):
                    events = await _scalar(db, "SELECT count(*) FROM events")
                    alerted = await _scalar(
                        db,
                        "SELECT coalesce(sum(cardinality(missing)), 0) FROM gaps"
                        " WHERE filled_at IS NULL AND alerted_at IS NOT NULL",
                    )
                    pending = await _scalar(
                        db,
                        "SELECT count(*) FROM gaps WHERE filled_at IS NULL AND alerted_at IS NULL",
                    )
                    if events + alerted >= total and pending == 0:
                        return
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"not settled: {total} entries wanted; {await _unaccounted(db, tmp)}")


async def _unaccounted(db: str, tmp: Path) -> dict[str, list[int]]:
    """Per table, the journal's seqs neither archived nor in an alerted gap."""
    found: dict[str, list[int]] = {}
    async with await psycopg.AsyncConnection.connect(db) as conn:
        for table in TABLES:
            cursor = await conn.execute(
                "SELECT seq FROM entry_keys WHERE table_id = %s UNION SELECT unnest(missing)"
                " FROM gaps WHERE table_id = %s AND alerted_at IS NOT NULL",
                (table, table),
            )
            have = {int(row[0]) for row in await cursor.fetchall()}
            lacking = [e.seq for e in _entries(tmp / f"{table}.sqlite") if e.seq not in have]
            if lacking:
                found[table] = lacking
    return found


async def _inject(
    a: ArchiveProcess,
    tables: asyncio.Task[None],
    broker: Any,
    cluster: PostgresCluster,
    note: Callable[[str], None],
) -> None:
    """The faults, each while the tables still play."""
    await asyncio.sleep(1.5)
    assert not tables.done()
    a.kill()  # what it received but had not committed was never acknowledged
    note("archive A SIGKILL")
    await asyncio.sleep(1.0)
    a.start()
    await a.wait_subscribed(2)
    assert not tables.done()
    await asyncio.to_thread(broker.stop)
    note("broker stopped")
    await asyncio.sleep(0.5)
    await asyncio.to_thread(broker.start)
    await asyncio.sleep(1.0)
    assert not tables.done()
    await asyncio.to_thread(cluster.stop)
    note("PostgreSQL stopped")
    await asyncio.sleep(1.0)
    await asyncio.to_thread(cluster.start)


@pytest.mark.parametrize("mode", ["partitioned", "shared"])
async def test_ten_tables_two_archives_kills_and_restarts_every_entry_once(
    mosquitto, cluster, tmp_path, mode, capsys
):
    started = time.monotonic()
    db = cluster.create_database("scale")
    private: dict[str, Path] = {}
    public: dict[str, Path] = {}
    for table in TABLES:
        private[table], public[table] = generate_keypair(tmp_path / "keys", f"{table}-key")
    consumers = {
        "partitioned": ('partition = "0/2"', 'partition = "1/2"'),
        "shared": ('share_group = "archive"', 'share_group = "archive"'),
    }[mode]
    a = ArchiveProcess(tmp_path, "a", _config(db, mosquitto.url, public, consumers[0]))
    b = ArchiveProcess(tmp_path, "b", _config(db, mosquitto.url, public, consumers[1]))
    faults: list[str] = []

    async def scenario() -> None:
        a.start()
        await a.wait_subscribed(1)  # A migrates first; B finds the schema made
        b.start()
        await b.wait_subscribed(1)
        tables = asyncio.create_task(_tables(mosquitto.url, tmp_path, private), name="tables")
        try:
            await _inject(
                a,
                tables,
                mosquitto,
                cluster,
                lambda what: faults.append(f"{what} at {time.monotonic() - started:.1f} s"),
            )
            async with asyncio.timeout(120):
                await tables
        finally:
            tables.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await tables
        journals = {t: _entries(tmp_path / f"{t}.sqlite") for t in TABLES}
        await _settle(db, tmp_path, sum(len(e) for e in journals.values()), seconds=40)

    try:
        await scenario()
        new_a, new_b = a.stop(), b.stop()
    finally:
        for archive in (a, b):
            if archive.process is not None and archive.process.poll() is None:
                archive.process.kill()
    # Both instances stored a share (A: since its restart).
    assert new_a > 0 and new_b > 0, (new_a, new_b)
    assert "archive database connection lost" in a.text() + b.text()
    lost = await _check(db, tmp_path, exact=mode == "partitioned")  # per table
    # `tablectl archive verify --journal`: the archive and each journal agree (another
    # table's journal does not).
    verify = ["archive", "verify", "--database", db, "--table"]
    for table in TABLES:
        journal = str(tmp_path / f"{table}.sqlite")
        status = await asyncio.to_thread(main, [*verify, table, "--journal", journal])
        assert status == (1 if lost[table] else 0), table
    other = str(tmp_path / f"{TABLES[1]}.sqlite")
    assert await asyncio.to_thread(main, [*verify, TABLES[0], "--journal", other]) == 1
    assert "they DO NOT agree" in capsys.readouterr().out
    print(
        f"\n{mode}: {faults}; A stored {new_a}, B {new_b}; lost on the broker and alerted:"
        f" {sum(lost.values())}; {time.monotonic() - started:.1f} s"
    )


def _entries(path: Path) -> list[Any]:
    with Journal.open_readonly(path) as journal:
        return list(journal.entries())


async def _check(db: str, tmp: Path, *, exact: bool) -> dict[str, int]:
    """Check every table against its journal; per table, the entries missing (and alerted)."""
    lost: dict[str, int] = {}
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT table_id, unnest(missing) FROM gaps WHERE filled_at IS NULL"
            " AND alerted_at IS NOT NULL"
        )
        alerted = {(str(r[0]), int(r[1])) for r in await cursor.fetchall()}
        for table in TABLES:
            lost[table] = await _check_table(conn, table, tmp / f"{table}.sqlite", alerted)
        cursor = await conn.execute("SELECT count(*) FROM rejected")
        assert (await cursor.fetchone()) == (0,)
    if exact:
        assert not any(lost.values()) and not alerted
    return lost


async def _check_table(
    conn: psycopg.AsyncConnection[Any], table: str, path: Path, alerted: set[tuple[str, int]]
) -> int:
    entries = _entries(path)
    cursor = await conn.execute(
        "SELECT seq, session, round_id, kind, at FROM events WHERE table_id = %s ORDER BY seq",
        (table,),
    )
    archived = await cursor.fetchall()
    have = {row[0] for row in archived}
    # What is archived is the journal's, entry for entry; what is not was alerted.
    assert archived == [
        (e.seq, e.session, e.round_id, e.kind, e.happened_at) for e in entries if e.seq in have
    ], table
    missing = [e for e in entries if e.seq not in have]
    assert {(table, e.seq) for e in missing} <= alerted, table
    results = [e for e in entries if e.kind in {"round_result", "round_voided"}]
    assert len([e for e in results if e.kind == "round_result"]) == ROUNDS
    assert not [e for e in missing if e in results]  # every result arrived (replays)
    # The journal verified against the chain heads the archive holds: they agree.
    anchors = await archive_anchors(conn, table)
    assert [a.seq for a in anchors] == [e.seq for e in results]
    with Journal.open_readonly(path) as journal:
        report = journal.verify(anchors)
    assert report.ok, (table, report.to_dict())
    assert report.anchors_checked == len(results)
    check = await verify_table(conn, table)
    assert check.missing == [e.seq for e in missing if e.seq < check.last_seq], table
    assert check.ok or missing, (table, check)
    assert check.last_seq == entries[-1].seq
    assert check.settled == ROUNDS
    return len(missing)


async def test_mosquitto_forgets_shared_subscriptions_when_it_restarts(mosquitto):
    """Pins the broker behaviour the ``shared`` mode must live with (Mosquitto 2.0.11).

    A persistent session's plain subscription survives a broker restart; its shared one does
    not: a message published before the client subscribes again reaches only the former. If
    this test fails, the broker keeps shared subscriptions now (docs/archive.md to update).
    """
    import aiomqtt
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    def client(name: str) -> aiomqtt.Client:
        properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        properties.SessionExpiryInterval = 3600
        return aiomqtt.Client(
            mosquitto.host,
            mosquitto.port,
            identifier=name,
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=False,
            properties=properties,
        )

    for name, topic in (("shared", "$share/g/t/#"), ("plain", "t/#")):
        async with client(name) as subscriber:
            await subscriber.subscribe(topic, qos=1)
    await asyncio.to_thread(mosquitto.stop)
    await asyncio.to_thread(mosquitto.start)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="pub") as publisher:
        await publisher.publish("t/x", b"after the restart", qos=1)
    got: dict[str, list[bytes]] = {}
    for name in ("shared", "plain"):
        got[name] = []
        async with client(name) as subscriber:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    async for message in subscriber.messages:
                        got[name].append(bytes(message.payload))
    assert got == {"shared": [], "plain": [b"after the restart"]}
