"""The chaos harness: a controller, a scanner simulator and a consumer as real processes.

* the **scanner simulator** runs as its own process on a fixed TCP port
  (:mod:`tests.chaos.scanner_process`: the real simulator, recording each card it deals);
* the **controller** runs as ``python -m controller.cli run --config FILE --rounds N`` with
  the device at ``socket://127.0.0.1:PORT`` and the journal in the test's directory;
* **Mosquitto** is the conftest's broker (persistence on, graceful stop saves the sessions);
* the **consumer** is an aiomqtt client with a persistent session (MQTT 5,
  ``clean_start=False``) that records every message of ``tables/{table}/#`` with the time it
  arrived.

:class:`ChaosRun` drives them and injects faults at seeded random moments: SIGKILL the
controller and restart it, stop the broker and start it again, SIGKILL the simulator
("unplug") and start it again. :func:`check` then proves what the issue asks and returns the
figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.cards import parse_piece
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from controller.journal import Journal, JournalEntry, VerifyReport
from controller.money import merge_paytables
from tests.support.settlement import group

ROOT = Path(__file__).resolve().parents[2]
TABLE = "chaos-1"
TOPIC_ROOT = f"tables/{TABLE}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _python_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TABLECTL_ROUNDS__BETTING_SECONDS", None)
    return env


# ----------------------------------------------------------------------------- processes


class ScannerProcess:
    """The simulator process; kill and start it again on the same port ("unplug")."""

    def __init__(self, workdir: Path, port: int, seed: int) -> None:
        self.workdir = workdir
        self.port = port
        self.seed = seed
        self.record = workdir / "dealt.jsonl"
        self.log = workdir / "scanner.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 15.0) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.chaos.scanner_process",
                    "--record",
                    str(self.record),
                    "simulate-scanner",
                    "--tcp",
                    str(self.port),
                    "--seed",
                    str(self.seed),
                    "--deal-delay",
                    "0",
                ],
                cwd=ROOT,
                env=_python_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"scanner simulator exited at start:\n{self.log.read_text()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as probe,
            ):
                probe.close()
                return
            time.sleep(0.02)
        raise RuntimeError(f"scanner simulator not listening on {self.port}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def dealt(self) -> dict[int, set[str]]:
        """Round number -> the cards the simulator put on the line in that round."""
        by_round: dict[int, set[str]] = defaultdict(set)
        if self.record.exists():
            for line in self.record.read_text().splitlines():
                if line.strip():
                    item = json.loads(line)
                    by_round[int(item["round_no"])].add(str(item["card"]))
        return by_round


class ControllerProcess:
    """``python -m controller.cli run --config FILE --rounds N``; SIGKILL and restart it."""

    def __init__(
        self, workdir: Path, broker_url: str, device_url: str, rounds: int, betting: float
    ) -> None:
        self.workdir = workdir
        self.journal = workdir / "journal.sqlite"
        self.config = workdir / "table.toml"
        self.log = workdir / "controller.log"
        self.rounds = rounds
        self.process: subprocess.Popen[bytes] | None = None
        self.spawned_at: list[float] = []  # wall-clock time of every start
        self.exits: list[int] = []  # return codes of the runs that ended on their own
        self.config.write_text(
            "\n".join(
                [
                    f'table_id = "{TABLE}"',
                    'game = "teen-patti-20-20"',
                    "[device]",
                    f'url = "{device_url}"',
                    "[device.driver]",
                    "open_timeout = 2.0",
                    "[mqtt]",
                    f'urls = ["{broker_url}"]',
                    "reconnect_min_seconds = 0.05",
                    "reconnect_max_seconds = 0.5",
                    "connect_timeout = 2.0",
                    "publish_timeout = 2.0",
                    "[rounds]",
                    f"betting_seconds = {betting}",
                    "pause_seconds = 0",
                    "bounce_seconds = 0",
                    "[journal]",
                    f'path = "{self.journal}"',
                    "[logging]",
                    'level = "INFO"',
                    'format = "json"',
                    "",
                ]
            )
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        with self.log.open("ab") as log:
            log.write(f"---- start {len(self.spawned_at) + 1} at {time.time():.3f}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "controller.cli",
                    "run",
                    "--config",
                    str(self.config),
                    "--rounds",
                    str(self.rounds),
                ],
                cwd=ROOT,
                env=_python_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.spawned_at.append(time.time())

    def poll(self) -> int | None:
        """The return code if the process ended on its own since the last look (and forget it)."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is not None:
            self.exits.append(code)
            self.process = None
        return code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def finished_rounds(self) -> int:
        if not self.journal.exists():
            return 0
        try:
            with Journal.open_readonly(self.journal) as journal:
                return int(journal.get_meta("round.finished") or "0")
        except Exception:  # the file is being created
            return 0

    def last_seq(self) -> int:
        if not self.journal.exists():
            return 0
        with Journal.open_readonly(self.journal) as journal:
            return journal.last_seq


# ----------------------------------------------------------------------------- consumer


@dataclass(slots=True)
class Received:
    topic: str
    payload: dict[str, Any]
    at: float  # wall clock


class Consumer:
    """An independent subscriber with a persistent session, recording everything it gets."""

    def __init__(self, host: str, port: int, client_id: str = "chaos-consumer") -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.messages: list[Received] = []
        self.first_seen: dict[int, float] = {}  # events seq -> first arrival (wall clock)
        self.subscribed = asyncio.Event()
        self.connections = 0

    async def run(self) -> None:
        import aiomqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        properties.SessionExpiryInterval = 3600
        while True:
            try:
                async with aiomqtt.Client(
                    self.host,
                    self.port,
                    identifier=self.client_id,
                    protocol=aiomqtt.ProtocolVersion.V5,
                    clean_start=False,
                    properties=properties,
                    timeout=5.0,
                    keepalive=5,
                ) as client:
                    self.connections += 1
                    await client.subscribe(f"{TOPIC_ROOT}/#", qos=1)
                    self.subscribed.set()
                    async for message in client.messages:
                        self._record(str(message.topic), bytes(message.payload))
            except aiomqtt.MqttError:
                await asyncio.sleep(0.05)

    def _record(self, topic: str, payload: bytes) -> None:
        try:
            data = json.loads(payload)
        except ValueError:
            data = {"raw": payload.decode(errors="replace")}
        now = time.time()
        self.messages.append(Received(topic, data, now))
        if topic == f"{TOPIC_ROOT}/events" and isinstance(data.get("seq"), int):
            self.first_seen.setdefault(data["seq"], now)

    def events_upto(self) -> int:
        """The highest seq N such that every events seq 1..N has arrived."""
        n = 0
        while n + 1 in self.first_seen:
            n += 1
        return n


# ----------------------------------------------------------------------------- the run


@dataclass(slots=True)
class Fault:
    kind: str  # "controller", "broker", "scanner"
    at: float  # wall clock, when injected
    recovered_at: float | None = None  # broker: accepting again
    backlog_seq: int | None = None  # broker: journal last seq when it came back


@dataclass(slots=True)
class ChaosRun:
    """One chaos run. Call :meth:`drive` (async, the consumer must be running)."""

    workdir: Path
    broker: Any  # tests.conftest.MosquittoBroker
    rounds: int
    seed: int
    betting: float = 0.2
    faults: list[Fault] = field(default_factory=list)
    device_exits: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    scanner: ScannerProcess = field(init=False)
    controller: ControllerProcess = field(init=False)

    def __post_init__(self) -> None:
        self.scanner = ScannerProcess(self.workdir, free_port(), self.seed)
        self.controller = ControllerProcess(
            self.workdir, self.broker.url, self.scanner.url, self.rounds, self.betting
        )

    def schedule(self) -> list[str]:
        """The faults to inject, in order (seeded): every kind at least once.

        ``controller`` kills at a random moment; ``controller-betting`` and
        ``controller-dealing`` wait until the journal shows a round in its betting window, or
        with some but not all cards dealt, and kill then (the two recovery paths).
        """
        rng = random.Random(f"{self.seed}:schedule")
        count = max(5, self.rounds // 4)
        kinds = ["controller", "broker", "scanner", "controller-betting", "controller-dealing"]
        plan = kinds + [rng.choice(kinds) for _ in range(count - len(kinds))]
        rng.shuffle(plan)
        return plan

    def _last_entry(self) -> tuple[str, dict[str, Any]] | None:
        import sqlite3

        uri = f"file:{self.controller.journal}?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=1.0)) as db:
                row = db.execute(
                    "SELECT kind, body FROM entries ORDER BY seq DESC LIMIT 1"
                ).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else (str(row[0]), json.loads(row[1]))

    async def _wait_for_phase(self, phase: str, limit: float = 10.0) -> bool:
        """Wait until the last journal entry shows ``phase`` (``betting``/``dealing``)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and not self._done():
            self._supervise()
            last = self._last_entry()
            if last is not None and self.controller.running:
                kind, body = last
                if phase == "betting" and kind == "round_opened":
                    return True
                if phase == "dealing" and kind == "card_dealt" and 0 <= body.get("index", 9) < 4:
                    return True
            await asyncio.sleep(0.003)
        return False

    async def _sleep_running(self, seconds: float) -> None:
        """Sleep, restarting the controller whenever it exits non-zero (a lost device)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._supervise()
            await asyncio.sleep(0.05)

    def _supervise(self) -> None:
        code = self.controller.poll()
        if code is None:
            return
        if code != 0:
            # Until the driver supervisor lands, a lost device ends the controller: restart
            # it like after a crash (counted and reported).
            self.device_exits += 1
            if self.scanner.running:
                self.controller.start()

    def _done(self) -> bool:
        return self.controller.finished_rounds() >= self.rounds

    async def drive(self, limit_seconds: float) -> None:
        rng = random.Random(f"{self.seed}:timing")
        self.started_at = time.time()
        self.scanner.start()
        self.controller.start()
        # Spread the faults over the expected length of the run (~0.5 s a round).
        plan = self.schedule()
        gap = max(0.6, self.rounds * 0.45 / (len(plan) + 1))
        deadline = time.monotonic() + limit_seconds
        for kind in plan:
            await self._sleep_running(rng.uniform(0.3 * gap, 1.7 * gap))
            if self._done() or time.monotonic() > deadline:
                break
            await self._inject(kind, rng)
        while not self._done():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the table did not finish {self.rounds} rounds within {limit_seconds} s "
                    f"(finished {self.controller.finished_rounds()}); see {self.controller.log}"
                )
            await self._sleep_running(0.1)
            if self.controller.process is None and self.controller.exits[-1:] == [0]:
                break
        # Let the last run end (it exits 0 once N rounds are finished and the outbox flushed).
        end = time.monotonic() + 60
        while self.controller.running and time.monotonic() < end:
            await asyncio.sleep(0.05)
        self._supervise()
        self.ended_at = time.time()

    async def _inject(self, kind: str, rng: random.Random) -> None:
        if kind.startswith("controller-") and not await self._wait_for_phase(
            kind.removeprefix("controller-")
        ):
            return
        fault = Fault(kind, time.time())
        self.faults.append(fault)
        if kind.startswith("controller"):
            self.controller.kill()
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            self.controller.start()
        elif kind == "broker":
            self.broker.stop()
            await self._sleep_running(rng.uniform(0.5, 2.5))
            self.broker.start()
            fault.recovered_at = time.time()
            fault.backlog_seq = self.controller.last_seq()
        else:
            self.scanner.kill()
            await self._sleep_running(rng.uniform(0.2, 1.0))
            self.scanner.start()
            if self.controller.process is None:
                self.controller.start()


# ----------------------------------------------------------------------------- checks


@dataclass(slots=True)
class Figures:
    rounds: int = 0
    started: int = 0
    settled: int = 0
    voided_before_start: int = 0
    voided_after_start: int = 0
    resumed_from_betting: int = 0
    events: int = 0
    events_messages: int = 0
    duplicates: int = 0
    duplicates_by_topic: dict[str, int] = field(default_factory=dict)
    delayed: int = 0
    sessions: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    device_exits: int = 0
    controller_starts: int = 0
    backlog_drain_seconds: list[float] = field(default_factory=list)
    resume_seconds: list[float] = field(default_factory=list)
    run_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def text(self) -> str:
        def stats(values: list[float]) -> str:
            if not values:
                return "n/a"
            ordered = sorted(values)
            return (
                f"n={len(values)} median {ordered[len(values) // 2]:.2f} s, max {ordered[-1]:.2f} s"
            )

        return "\n".join(
            [
                f"chaos: {self.rounds} rounds in {self.run_seconds:.1f} s, faults "
                + ", ".join(f"{k} x{v}" for k, v in sorted(self.faults.items())),
                f"  controller starts {self.controller_starts} (sessions {self.sessions}), "
                f"exits after a lost device {self.device_exits}",
                f"  started rounds {self.started}: settled {self.settled}, voided after start "
                f"{self.voided_after_start}; not started {self.voided_before_start}: all voided; "
                f"interrupted in betting but played {self.resumed_from_betting}",
                f"  events: {self.events} seqs, {self.events_messages} messages, "
                f"duplicates {self.duplicates} "
                f"({', '.join(f'{k} {v}' for k, v in sorted(self.duplicates_by_topic.items()))}), "
                f"delayed {self.delayed}, gaps 0",
                f"  broker recovery -> backlog delivered: {stats(self.backlog_drain_seconds)}",
                f"  controller restart -> round resumed: {stats(self.resume_seconds)}",
            ]
        )


def check(run: ChaosRun, consumer: Consumer) -> Figures:
    """Prove the issue's claims from what the consumer received; collect the figures.

    Every failed claim is listed in ``figures.problems`` (seed, what, where).
    """
    figures = Figures()
    events, results = _received(consumer, figures)
    with Journal.open_readonly(run.controller.journal) as journal:
        last_seq = journal.last_seq
        undelivered = journal.undelivered_count()
        report = journal.verify()
        journal_entries = {entry.seq: entry for entry in journal.entries()}
    _check_journal(report, undelivered, figures)
    _check_events(events, journal_entries, last_seq, figures)
    _check_rounds(run, events, results, figures)
    _measure(run, consumer, journal_entries, figures)
    return figures


def _received(
    consumer: Consumer, figures: Figures
) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """The events and results by seq, first copy of each; duplicates counted by topic."""
    per_topic_seen: dict[str, set[int]] = defaultdict(set)
    duplicates: Counter[str] = Counter()
    events: dict[int, dict[str, Any]] = {}
    results: dict[int, dict[str, Any]] = {}
    for message in consumer.messages:
        topic = message.topic.removeprefix(TOPIC_ROOT + "/")
        seq = message.payload.get("seq")
        if not isinstance(seq, int) or topic in ("status", "round"):
            continue
        if seq in per_topic_seen[topic]:
            duplicates[topic] += 1
            continue
        per_topic_seen[topic].add(seq)
        if topic == "events":
            figures.events_messages += 1
            events[seq] = message.payload
        elif topic == "results":
            results[seq] = message.payload
    figures.events_messages += duplicates["events"]
    figures.duplicates = sum(duplicates.values())
    figures.duplicates_by_topic = dict(duplicates)
    return events, results


def _check_journal(report: VerifyReport, undelivered: int, figures: Figures) -> None:
    """The journal verifies, leaves no round unfinished and had every entry acknowledged."""
    bad = figures.problems.append
    if not report.ok:
        bad(f"journal verify: {[str(p) for p in report.problems[:10]]}")
    if report.unfinished:
        bad(f"journal: rounds left unfinished {report.unfinished}")
    if undelivered:
        bad(f"journal: {undelivered} entries never acknowledged by the broker")


def _check_events(
    events: dict[int, dict[str, Any]],
    journal_entries: dict[int, JournalEntry],
    last_seq: int,
    figures: Figures,
) -> None:
    """No sequence gaps on events after de-duplication, and every journal entry arrived."""
    bad = figures.problems.append
    seqs = sorted(events)
    figures.events = len(seqs)
    missing = sorted(set(range(1, last_seq + 1)) - set(seqs))
    if missing:
        bad(f"events: gaps, {len(missing)} seq(s) missing, first {missing[:10]}")
    for seq, payload in events.items():
        entry = journal_entries.get(seq)
        if (
            entry is None
            or entry.kind != payload.get("kind")
            or entry.round_id != payload.get("round")
        ):
            bad(f"events seq {seq}: does not match the journal entry ({payload.get('kind')})")
    figures.delayed = sum(1 for payload in events.values() if payload.get("delayed"))


def _check_rounds(
    run: ChaosRun,
    events: dict[int, dict[str, Any]],
    results: dict[int, dict[str, Any]],
    figures: Figures,
) -> None:
    """Rounds, from the stream: each judged by :func:`_check_round`."""
    by_round: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for seq in sorted(events):
        payload = events[seq]
        if payload.get("round"):
            by_round[payload["round"]].append(payload)
    results_by_round: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for payload in results.values():
        results_by_round[str(payload.get("round"))].append(payload)
    dealt = run.scanner.dealt()
    figures.rounds = len(by_round)
    for round_id, items in sorted(by_round.items()):
        where = f"seed {run.seed}, round {round_id}"
        _check_round(where, items, results_by_round.get(round_id, []), dealt, figures)


def _check_round(
    where: str,
    items: list[dict[str, Any]],
    on_results: list[dict[str, Any]],
    dealt: dict[int, set[str]],
    figures: Figures,
) -> None:
    """One round: one outcome, on results too; voided with refunds or settled by the rules."""
    bad = figures.problems.append
    kinds = [item["kind"] for item in items]
    outcomes = [item for item in items if item["kind"] in ("round_result", "round_voided")]
    if len(outcomes) != 1:
        bad(f"{where}: {len(outcomes)} results/voids on events (kinds {kinds})")
        return
    outcome = outcomes[0]
    if sorted(p["seq"] for p in on_results) != [outcome["seq"]]:
        bad(
            f"{where}: results topic has {[p['seq'] for p in on_results]}, "
            f"events has {outcome['seq']}"
        )
    if "betting_closed" not in kinds:
        _check_not_started(where, outcome, figures)
        return
    figures.started += 1
    _check_betting_closed_in_its_session(where, items, figures)
    if outcome["kind"] == "round_voided":
        figures.voided_after_start += 1
        bad(f"{where}: a started round was voided ({outcome['data'].get('reason')})")
        return
    figures.settled += 1
    _check_settlement(where, outcome["data"], items, dealt, figures)


def _check_not_started(where: str, outcome: dict[str, Any], figures: Figures) -> None:
    """A round that never started is voided with a refund of every bet."""
    bad = figures.problems.append
    if outcome["kind"] != "round_voided":
        bad(f"{where}: not started but {outcome['kind']}")
    elif any(
        b.get("outcome") != "refund" or b.get("payout") != "1"
        for b in outcome["data"]["bets"].values()
    ):
        bad(f"{where}: void without a refund of every bet")
    figures.voided_before_start += 1


def _check_betting_closed_in_its_session(
    where: str, items: list[dict[str, Any]], figures: Figures
) -> None:
    """Betting is closed by the session that opened the round."""
    opened = next((item for item in items if item["kind"] == "round_opened"), None)
    closed = next(item for item in items if item["kind"] == "betting_closed")
    if opened is not None and closed["session"] != opened["session"]:
        # The controller restarted while betting was open: the operator's rule says
        # that round is cancelled and refunded, not played.
        figures.resumed_from_betting += 1
        figures.problems.append(
            f"{where}: not started when the controller restarted (opened in session "
            f"{opened['session']}, seq {opened['seq']}) but betting was closed by session "
            f"{closed['session']} (seq {closed['seq']}) instead of a void with a refund"
        )


def _check_settlement(
    where: str,
    data: dict[str, Any],
    items: list[dict[str, Any]],
    dealt: dict[int, set[str]],
    figures: Figures,
) -> None:
    """A settled round: the rules give its winner and payouts; its cards were all dealt."""
    bad = figures.problems.append
    game = TEEN_PATTI_20_20
    paytables = merge_paytables(game.default_paytables, {})
    hands = {hand: [parse_piece(card) for card in cards] for hand, cards in data["cards"].items()}
    try:
        result = game.resolve(hands)
        settlement = game.settle(result, paytables)
    except Exception as exc:
        bad(f"{where}: the rules cannot resolve the cards {data['cards']}: {exc}")
        return
    if result.winner != data["winner"]:
        bad(f"{where}: winner {data['winner']}, the rules give {result.winner}")
    expected_bets = {bet: outcome_.to_wire() for bet, outcome_ in settlement.items()}
    if expected_bets != group(data["bets"]):
        bad(f"{where}: settlement differs from the rules: {data['bets']} != {expected_bets}")
    round_no = int(data["round_no"])
    cards = [card for hand in data["cards"].values() for card in hand]
    strangers = [card for card in cards if card not in dealt.get(round_no, set())]
    if strangers:
        bad(f"{where}: cards {strangers} were never dealt by the simulator in round {round_no}")
    dealt_events = [item["data"]["card"] for item in items if item["kind"] == "card_dealt"]
    if sorted(dealt_events) != sorted(cards):
        bad(f"{where}: card_dealt events {dealt_events} differ from the result {cards}")


def _measure(
    run: ChaosRun,
    consumer: Consumer,
    journal_entries: dict[int, JournalEntry],
    figures: Figures,
) -> None:
    """Figures: faults, sessions, backlog drain, resume time."""
    figures.faults = dict(Counter(fault.kind for fault in run.faults))
    figures.device_exits = run.device_exits
    figures.controller_starts = len(run.controller.spawned_at)
    figures.sessions = max((entry.session for entry in journal_entries.values()), default=0)
    figures.run_seconds = run.ended_at - run.started_at
    for fault in run.faults:
        if fault.kind != "broker" or fault.recovered_at is None or not fault.backlog_seq:
            continue
        arrivals = [consumer.first_seen.get(seq) for seq in range(1, fault.backlog_seq + 1)]
        if any(at is None for at in arrivals):
            continue  # reported as a gap above
        figures.backlog_drain_seconds.append(
            max(0.0, max(at for at in arrivals if at is not None) - fault.recovered_at)
        )
    first_of_session: dict[int, float] = {}
    for entry in journal_entries.values():
        first_of_session.setdefault(entry.session, entry.happened_at.timestamp())
    spawns = sorted(run.controller.spawned_at)
    for session, first_at in sorted(first_of_session.items()):
        if session == 1:
            continue
        before = [t for t in spawns if t <= first_at]
        if before:
            figures.resume_seconds.append(first_at - before[-1])
