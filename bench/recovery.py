"""Recovery figures: restart with 100,000 rounds journalled (in process, as a process); drain.

    .venv/bin/python bench/recovery.py                   # all three parts
    .venv/bin/python bench/recovery.py --rounds 20000    # a smaller journal
    .venv/bin/python bench/recovery.py --journal /tmp/big.sqlite   # keep/reuse the journal
    .venv/bin/python bench/recovery.py --skip-restart --skip-drain  # the process restart only

Part 1, restart to resumed. A journal of N rounds (default 100,000) is generated through the
Journal API (``append`` with realistic entries: round_opened, betting_closed, six
card_dealt, round_result with the settlement; one round in 20 with a misread and a rescan; the
file's ``synchronous`` is switched off while generating, which only makes the generation fast
and changes nothing in the file), every entry marked delivered, the last round interrupted
after three cards (meta ``round.current`` pointing at it). Then, timed, what a restarted
controller does before it can cue the next slot: ``Journal.open`` (lock, schema/migration
check, new session, last seq and chain head) and ``Orchestrator.recover()`` (the round's
entries through the ``round_id`` index, replayed into the live game). Repeated 20 times;
median and max printed. Also: ``Journal.verify()`` over the whole file, ``recall`` of one
round, and ``append`` on the big file.

Part 2, restart as a process: what a studio waits for when systemd restarts a SIGKILLed table.
A real Mosquitto, the scanner simulator on TCP (``tablectl simulate-scanner``), a subscriber
on ``tables/bench-1/#`` and a copy of the N-round journal. Each run: the table is started
(``tablectl run --config``, the console script beside this Python, as the systemd unit runs
it), resumes the interrupted round, and is SIGKILLed as soon as its first new entry reaches
the subscriber; then, timed from the moment it is spawned (fork + ``execve``), it is started
again on the same files. Printed, median, min and max over the runs (``--process-runs``): to
its birth (``status`` online), to the first entry the restarted table journalled and
published (``events``, new session: the resumed round's device status, then its cards), and
to the resumed round's next card (the simulator deals ``--deal-delay`` after each cue); and
the phases of the table's own log (journal opened, device connected, round recovered, broker
connected). Run 0 is not counted: it warms the page cache and compiles the bytecode once into
a cache of the run, as an installed package has it (``--no-bytecode``: compiled at each start).

Part 3, backlog drain. A fresh journal with 1,000 rounds' worth of events (≈ 9,100 entries),
none delivered (the broker was away), then the real :class:`~controller.publisher.Publisher`
is started against a real Mosquitto (own port, persistence, ``set_tcp_nodelay``) and timed
until ``flush()`` reports everything acknowledged. Printed: entries/s and MQTT messages/s
(the publisher's own count: events + results + the round snapshot per batch).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.journal import Journal  # noqa: E402

TABLE = "bench-1"
SLOTS = [("A1", "A"), ("B1", "B"), ("A2", "A"), ("B2", "B"), ("A3", "A"), ("B3", "B")]
DECK = [rank + suit for rank in "23456789TJQKA" for suit in "cdhs"]
BETS = ["player_a", "player_b", "pair_plus_a", "pair_plus_b"]


def _quiet() -> None:
    from controller.logs import configure_logging

    configure_logging(level="ERROR", fmt="console", stream=sys.stderr)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


def _round_entries(n: int, cards: list[str], *, misread: bool) -> list[tuple[str, dict[str, Any]]]:
    rid = f"{TABLE}-{n:06d}"
    entries: list[tuple[str, dict[str, Any]]] = [
        (
            "round_opened",
            {
                "round_id": rid,
                "round_no": n,
                "game": "teen-patti-20-20",
                "betting_seconds": 15.0,
                "betting_closes_at": "2026-01-01T00:00:15.000000Z",
                "table_state": {},
            },
        ),
        ("betting_closed", {}),
    ]
    for index, (card, (slot, hand)) in enumerate(zip(cards, SLOTS, strict=False)):
        if misread and index == 2:
            entries.append(
                (
                    "rescan_requested",
                    {"slot": slot, "cause": "device", "detail": "card #2", "attempt": 1},
                )
            )
        entries.append(
            (
                "card_dealt",
                {"slot": slot, "hand": hand, "index": index, "card": card, "face": "up"},
            )
        )
    if len(cards) == len(SLOTS):
        entries.append(
            (
                "round_result",
                {
                    "game": "teen-patti-20-20",
                    "round_no": n,
                    "cards": {"A": cards[0::2], "B": cards[1::2]},
                    "winner": "A",
                    "hands": {
                        "A": {"category": "high_card", "description": "high card"},
                        "B": {"category": "high_card", "description": "high card"},
                    },
                    "bets": {
                        "player_a": {"outcome": "win", "payout": "1.98"},
                        "player_b": {"outcome": "lose", "payout": "0"},
                        "pair_plus_a": {"outcome": "lose", "payout": "0"},
                        "pair_plus_b": {"outcome": "lose", "payout": "0"},
                    },
                    "details": {},
                },
            )
        )
    return entries


def generate(path: Path, rounds: int, *, interrupted: bool, delivered: bool) -> int:
    """Write ``rounds`` rounds through the Journal API; returns the number of entries."""
    import random

    rng = random.Random(1)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    count = 0
    with Journal.open(path) as journal:
        db = journal._connection()  # generation only: no fsync per entry
        db.execute("PRAGMA synchronous=OFF")
        started = time.perf_counter()
        for n in range(1, rounds + 1):
            cards = rng.sample(DECK, 6)
            last = n == rounds and interrupted
            if last:
                cards = cards[:3]
                journal.set_meta("round.current", f"{TABLE}-{n:06d}")
            for kind, body in _round_entries(n, cards, misread=n % 20 == 0):
                when = start + timedelta(seconds=count * 0.5)
                journal.append(kind, body, round_id=f"{TABLE}-{n:06d}", happened_at=when)
                count += 1
            if n % 10000 == 0:
                rate = count / (time.perf_counter() - started)
                print(f"  generated {n} rounds ({count} entries, {rate:,.0f} entries/s)")
        journal.set_meta("round.next_no", str(rounds + 1))
        journal.set_meta("round.finished", str(rounds - (1 if interrupted else 0)))
        if delivered:
            at = start + timedelta(seconds=count * 0.5 + 1)
            for first in range(1, count + 1, 10000):
                journal.mark_delivered_many(range(first, min(count, first + 9999) + 1), at=at)
        db.execute("PRAGMA synchronous=FULL")
    return count


def _orchestrator(journal: Journal) -> Any:
    from controller.games.registry import make_live_game
    from controller.orchestrator import Orchestrator
    from controller.settings import RoundSettings

    game = make_live_game("teen-patti-20-20", {}, {})
    return Orchestrator(
        table_id=TABLE,
        game=game,
        source=None,  # type: ignore[arg-type]  # recover() never touches the device
        journal=journal,
        settings=RoundSettings(),
    )


def _ensure_journal(path: Path, rounds: int) -> None:
    """Reuse the journal at ``path``, or generate one of ``rounds`` rounds there."""
    if path.exists():
        with Journal.open_readonly(path) as journal:
            entries = journal.last_seq
        print(f"  reusing {path} ({entries:,} entries)")
    else:
        started = time.perf_counter()
        entries = generate(path, rounds, interrupted=True, delivered=True)
        print(f"  generated {entries:,} entries in {time.perf_counter() - started:.1f} s")


def part_restart(path: Path, rounds: int) -> None:
    print(f"== restart to resumed, {rounds:,} rounds journalled")
    _ensure_journal(path, rounds)
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    print(f"  file {size / 1e6:.0f} MB")
    opens, recovers, totals = [], [], []
    resumed_cards = None
    with Journal.open(path) as journal:  # warm-up: imports, page cache
        _orchestrator(journal).recover()
    for _ in range(20):
        t0 = time.perf_counter()
        journal = Journal.open(path)
        t1 = time.perf_counter()
        recovered = _orchestrator(journal).recover()
        t2 = time.perf_counter()
        journal.close()
        opens.append(t1 - t0)
        recovers.append(t2 - t1)
        totals.append(t2 - t0)
        resumed_cards = None if recovered is None else len(recovered.dealt)
    if resumed_cards is None:
        print("  !! recover() found no unfinished round")
    print(
        "  Journal.open (lock, migration check, new session, head):    "
        f"median {statistics.median(opens) * 1e3:7.2f} ms  max {max(opens) * 1e3:7.2f} ms"
    )
    print(
        "  Orchestrator.recover() (index read + replay of the round):  "
        f"median {statistics.median(recovers) * 1e3:7.2f} ms  max {max(recovers) * 1e3:7.2f} ms"
    )
    print(
        f"  restart -> resumed (in process, {resumed_cards} cards kept):        "
        f"median {statistics.median(totals) * 1e3:7.2f} ms  max {max(totals) * 1e3:7.2f} ms"
        "   target: < 1 s"
    )
    from controller.recall import recall_round

    with Journal.open_readonly(path) as journal:
        t0 = time.perf_counter()
        record = recall_round(journal, f"{TABLE}-{rounds // 2:06d}")
        t1 = time.perf_counter()
        report = journal.verify()
        t2 = time.perf_counter()
    print(
        f"  recall of round {record.round_id} ({len(record.entries)} entries):  "
        f"{(t1 - t0) * 1e3:.2f} ms"
    )
    print(
        f"  Journal.verify() of {report.entries:,} entries: {t2 - t1:.1f} s "
        f"({report.entries / (t2 - t1):,.0f} entries/s), ok={report.ok}, "
        f"unfinished={report.unfinished}"
    )
    with Journal.open(path) as journal:
        samples = []
        for _ in range(300):
            t0 = time.perf_counter()
            journal.append("table_status", {"state": "ready", "detail": "bench"})
            samples.append(time.perf_counter() - t0)
    samples.sort()
    print(
        f"  append on the big file: median {statistics.median(samples) * 1e3:.3f} ms, "
        f"p99 {samples[int(len(samples) * 0.99)] * 1e3:.3f} ms"
    )


# ----------------------------------------------------------------------------- restart as a process


def _table_config(workdir: Path, journal: Path, broker_url: str, device_url: str) -> Path:
    config = workdir / "table.toml"
    config.write_text(
        "\n".join(
            [
                f'table_id = "{TABLE}"',
                'game = "teen-patti-20-20"',
                "[device]",
                f'url = "{device_url}"',
                "[mqtt]",
                f'urls = ["{broker_url}"]',
                "[rounds]",
                "betting_seconds = 5",
                "[journal]",
                f'path = "{journal}"',
                "[logging]",
                'level = "INFO"',
                'format = "json"',
                "",
            ]
        )
    )
    return config


class _Feed:
    """Every message of ``tables/bench-1/#`` with its arrival (``time.monotonic``, system-wide)."""

    def __init__(self, host: str, port: int) -> None:
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        self.messages: list[tuple[float, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._client = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-restart")
        self._client.on_message = self._on_message
        self._client.connect(host, port)
        self._client.subscribe(f"tables/{TABLE}/#", qos=1)
        self._client.loop_start()

    def _on_message(self, _client: Any, _userdata: Any, message: Any) -> None:
        arrived = time.monotonic()
        try:
            body = json.loads(message.payload)
        except ValueError:
            body = {}
        with self._lock:
            self.messages.append((arrived, message.topic, body if isinstance(body, dict) else {}))

    def first(
        self, since: float, topic: str, session: int, kind: str | None, timeout: float
    ) -> float | None:
        """Arrival of the first ``topic`` message after ``since`` of ``session`` or later."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for arrived, name, body in self.messages:
                    if (
                        arrived >= since
                        and name.endswith("/" + topic)
                        and int(body.get("session") or 0) >= session
                        and (kind is None or body.get("kind") == kind)
                        and (topic != "status" or body.get("state") == "online")
                    ):
                        return arrived
            time.sleep(0.002)
        return None

    def session_at(self, arrived: float) -> int:
        """The session of the message that arrived at ``arrived``."""
        with self._lock:
            return next(
                int(body.get("session") or 0) for at, _, body in self.messages if at == arrived
            )

    def close(self) -> None:
        self._client.loop_stop()
        self._client.disconnect()


_LOG_PHASES: Final = {
    "journal opened": "journal opened (imports, settings, Journal.open)",
    "device_connected": "device connected",
    "recovering unfinished round": "round recovered",
    "connected": "broker connected (outbox)",
}
"""The restarted table's own log lines timed from its spawn (wall clock, the log's stamps)."""


@dataclass
class _Bytecode:
    """How the spawned tables find their bytecode.

    Installed (the default): compiled once into a cache of the run, as ``pip install``
    compiles a package's modules; ``--no-bytecode``: compiled from source at every start
    (as under ``PYTHONDONTWRITEBYTECODE`` with no ``__pycache__``).
    """

    cache: Path | None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        if self.cache is not None:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(self.cache)
        return env


def _spawn_table(config: Path, log: Path, bytecode: _Bytecode) -> subprocess.Popen[bytes]:
    env = bytecode.env()
    with log.open("ab") as out:
        out.write(f"---- spawn {time.time():.6f}\n".encode())
        out.flush()
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "tablectl"), "run", "--config", str(config)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _log_phases(log: Path) -> dict[str, float]:
    """Seconds from the last spawn to each of :data:`_LOG_PHASES` in the table's log."""
    lines = log.read_text(errors="replace").splitlines()
    marker = max(i for i, line in enumerate(lines) if line.startswith("---- spawn "))
    spawned = float(lines[marker].split()[2])
    phases: dict[str, float] = {}
    for line in lines[marker + 1 :]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        name = _LOG_PHASES.get(str(record.get("event")))
        if name is not None and name not in phases and "timestamp" in record:
            stamp = datetime.fromisoformat(str(record["timestamp"]).replace("Z", "+00:00"))
            phases[name] = stamp.timestamp() - spawned
    return phases


def _restart_once(
    feed: _Feed, source: Path, journal: Path, config: Path, log: Path, *, bytecode: _Bytecode
) -> dict[str, float]:
    """SIGKILL a table that resumed the round, start it again: seconds to each phase."""
    for stale in journal.parent.glob(journal.name + "*"):
        stale.unlink()
    shutil.copyfile(source, journal)
    first = _spawn_table(config, log, bytecode)
    started = time.monotonic()
    try:
        birth = feed.first(started, "status", 1, None, timeout=120)
        if birth is None:
            raise RuntimeError(f"the table published no birth; its log: {log}")
        session = feed.session_at(birth)
        if feed.first(started, "events", session, None, timeout=120) is None:
            raise RuntimeError(f"the table published no entry; its log: {log}")
    finally:
        first.kill()  # SIGKILL once it has resumed the round and published
        first.wait(30)
    spawned = time.monotonic()
    table = _spawn_table(config, log, bytecode)
    try:
        marks = {
            "birth (status online)": feed.first(spawned, "status", session + 1, None, timeout=120),
            "first entry published (events)": feed.first(
                spawned, "events", session + 1, None, timeout=120
            ),
            "next card published": feed.first(
                spawned, "events", session + 1, "card_dealt", timeout=120
            ),
        }
    finally:
        table.kill()
        table.wait(30)
    phases = _log_phases(log)
    for name, mark in marks.items():
        if mark is None:
            raise RuntimeError(f"the restarted table did not publish; its log: {log}")
        phases[name] = mark - spawned
    return phases


def part_process(
    path: Path, rounds: int, runs: int, deal_delay: float, *, bytecode: bool = True
) -> None:
    from tests.support.mosquitto import MosquittoProcess, free_port

    print(
        f"== restart as a process, {rounds:,} rounds journalled: spawn (fork + execve of "
        "`tablectl run --config`) -> published"
    )
    _ensure_journal(path, rounds)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        code = _Bytecode(work / "pycache" if bytecode else None)
        broker = MosquittoProcess(work / "mosquitto")
        broker.start()
        port = free_port()
        scanner = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "tablectl"),
                "simulate-scanner",
                "--tcp",
                str(port),
                "--deal-delay",
                str(deal_delay),
            ],
            cwd=ROOT,
            env=code.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        feed = _Feed(broker.host, broker.port)
        journal = work / "journal.sqlite"
        config = _table_config(work, journal, broker.url, f"socket://127.0.0.1:{port}")
        log = work / "table.log"
        try:
            time.sleep(1.0)  # the simulator listening, the subscriber subscribed
            for run in range(runs + 1):  # run 0 warms the page cache and the bytecode
                phases = _restart_once(feed, path, journal, config, log, bytecode=code)
                if run == 0:
                    continue
                for name, seconds in phases.items():
                    results.setdefault(name, []).append(seconds)
                print(f"  run {run}: first entry {phases['first entry published (events)']:.3f} s")
        finally:
            feed.close()
            scanner.kill()
            scanner.wait(10)
            broker.kill()
    print(f"  bytecode: {'compiled once (as installed)' if bytecode else 'none (from source)'}")
    order = [*_LOG_PHASES.values(), "birth (status online)", "first entry published (events)"]
    order.append("next card published")
    for name in order:
        values = results.get(name)
        if not values:
            continue
        label = f"spawn -> {name}"
        target = "   target: <= 0.5 s" if name.startswith("first entry") else ""
        if name == "next card published":
            label += f" ({deal_delay:g} s cue to scan)"
        print(
            f"  {label:<58} median {statistics.median(values):.3f} s  "
            f"min {min(values):.3f}  max {max(values):.3f}{target}"
        )


async def _drain(workdir: Path, rounds: int) -> None:
    from controller.mqtt.settings import MqttSettings
    from controller.publisher import Publisher
    from tests.support.mosquitto import MosquittoProcess

    path = workdir / "backlog.sqlite"
    entries = generate(path, rounds, interrupted=False, delivered=False)
    broker = MosquittoProcess(workdir / "mosquitto")
    broker.start()
    try:
        journal = Journal.open(path)
        settings = MqttSettings(urls=[broker.url], publish_timeout=10.0)
        publisher = Publisher(settings, TABLE, journal, game="teen-patti-20-20", version="bench")
        started = time.perf_counter()
        task = asyncio.create_task(publisher.run(), name="publisher")
        if not await publisher.wait_connected(timeout=10):
            raise RuntimeError("publisher did not connect")
        connected = time.perf_counter()
        done = await publisher.flush(timeout=300)
        finished = time.perf_counter()
        await publisher.stop()
        await asyncio.gather(task, return_exceptions=True)
        left = journal.undelivered_count()
        journal.close()
    finally:
        broker.kill()
    seconds = finished - connected
    print(
        f"  {entries:,} entries ({publisher.published_messages:,} MQTT messages) acknowledged "
        f"in {seconds:.2f} s after connecting ({connected - started:.3f} s to connect); "
        f"flushed={done}, left={left}"
    )
    print(
        f"  drain rate: {entries / seconds:,.0f} entries/s, "
        f"{publisher.published_messages / seconds:,.0f} messages/s "
        f"(window {settings.window}, QoS 1, PUBACK awaited per entry)"
    )


def part_drain(rounds: int) -> None:
    print(f"== backlog drain after an outage of {rounds:,} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_drain(Path(tmp), rounds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100_000, help="rounds in the big journal")
    parser.add_argument("--backlog-rounds", type=int, default=1000)
    parser.add_argument("--journal", type=Path, default=None, help="keep/reuse the big journal")
    parser.add_argument("--skip-restart", action="store_true")
    parser.add_argument("--skip-process", action="store_true")
    parser.add_argument("--skip-drain", action="store_true")
    parser.add_argument("--process-runs", type=int, default=5, help="timed process restarts")
    parser.add_argument(
        "--no-bytecode", action="store_true", help="restarted tables compile from source"
    )
    parser.add_argument(
        "--deal-delay", type=float, default=0.3, help="the simulated dealer: cue to scan (s)"
    )
    args = parser.parse_args()
    _quiet()
    with tempfile.TemporaryDirectory() as tmp:
        journal = args.journal if args.journal is not None else Path(tmp) / "big.sqlite"
        if not args.skip_restart:
            part_restart(journal, args.rounds)
        if not args.skip_process:
            part_process(
                journal,
                args.rounds,
                args.process_runs,
                args.deal_delay,
                bytecode=not args.no_bytecode,
            )
    if not args.skip_drain:
        part_drain(args.backlog_rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
