"""Hostile messages on every topic every process reads, against the real processes (issue 21).

A real Mosquitto (the test's own), and the real processes as a studio runs them:

* ``tablectl run --simulate --game three-card-mulligan``: the table, its command router
  (``cmd/#`` and ``betting/status``), the studio beside it (its feeds read ``status``,
  ``round``, ``events``, ``results``, ``secure/events``), the archive beside it
  (``events``, ``results``, ``status``) and the simulated betting system (``events``,
  ``reply/betting``, ``status``), which answers each round's mulligan window;
* ``tablectl watch`` (``tables/sim-1/#``).

Once the table has settled a round, the probe's payloads (a fixed corpus: 3,000-deep
``[[[...]]]``, ``seq`` 10^9 and 2^63, not UTF-8, NaN, huge strings, wrong types, the wrong
table, unknown kinds, ``{}``, ``null``, an empty payload) and hypothesis' examples are published
on each of those topics, ``round`` and ``betting/status`` retained too (the betting credential
can retain on ``betting/status``). Afterwards every process must be alive and still follow the
real table: the table settles new rounds, the studio's view shows the journal's real ``seq``
(not 10^9), the archive holds the rounds settled after the flood, ``watch`` printed them, and
each reader logged what it rejected (``message rejected`` with its code and reason).

The corpus starts with forged online statuses whose ``chain_head.seq`` is 10^9 (same session,
a later one, a "new journal"): a reader's :class:`~controller.inbound.SeqGuard` holds a status
to what the table could have sent, so the forged event at ``seq`` 10^9 after them is still a
rejection and the studio's view follows the real table.

Three Card Mulligan is the decision game here (one window a round, a round in about a
second); Hold'em's hands take 30 s each, too long for one test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from paho.mqtt.client import Client
from paho.mqtt.enums import CallbackAPIVersion

from tests.conftest import MosquittoBroker

pytestmark = [pytest.mark.hil, pytest.mark.slow]

TABLE = "sim-1"
BASE = f"tables/{TABLE}"
EXAMPLES = int(os.environ.get("TABLECTL_HOSTILE_EXAMPLES", "100"))
"""Hypothesis examples published (besides the corpus on every topic)."""

TOPICS = [
    f"{BASE}/events",
    f"{BASE}/results",
    f"{BASE}/status",
    f"{BASE}/round",
    f"{BASE}/secure/events",
    f"{BASE}/reply/betting",
    f"{BASE}/reply/pit",
    f"{BASE}/cmd/decision",
    f"{BASE}/cmd/replay",
    f"{BASE}/cmd/pit/resume",
    f"{BASE}/cmd/pit/void",
    f"{BASE}/cmd/pit/replay",
    f"{BASE}/cmd/nonsense",
    "betting/status",
]
"""Every topic a process of the run reads (the router, studio, archive, betting system, watch)."""

RETAINED = {f"{BASE}/round", "betting/status"}
"""Topics where the corpus is also retained (what a credential can leave for late readers)."""

NOW = "2026-11-27T12:00:00.000000Z"


def _envelope(**changes: Any) -> bytes:
    body: dict[str, Any] = {
        "schema_version": "3",
        "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        "table": TABLE,
        "round": f"{TABLE}-000001",
        "seq": 1,
        "session": 1,
        "kind": "pit_alert",
        "at": NOW,
        "delayed": False,
        "data": {"slot": None, "reason": "hostile"},
    }
    body.update(changes)
    return json.dumps(body).encode()


def _status(session: int, head: int) -> bytes:
    body = {
        "schema_version": "3",
        "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        "state": "online",
        "table": TABLE,
        "session": session,
        "game": "three-card-mulligan",
        "version": "0",
        "at": NOW,
        "chain_head": {"seq": head, "hash": "0" * 64},
    }
    return json.dumps(body).encode()


CORPUS: dict[str, bytes] = {
    # First the probe's findings: a reader logs 20 rejections a minute one by one.
    "deep array": b"[" * 3000 + b"]" * 3000,
    **{
        f"forged status, session {session}": _status(session, 10**9) for session in (1, 2, 10**6, 0)
    },
    "seq 10^9": _envelope(seq=10**9),
    "empty": b"",
    "null": b"null",
    "{}": b"{}",
    "deep in an envelope": _envelope(data={"x": json.loads("[" * 900 + "]" * 900)}),
    "deep object": b'{"a":' * 3000 + b"1" + b"}" * 3000,
    "seq 10^9, unknown kind": _envelope(seq=10**9 + 1, kind="no_such_kind", data={}),
    "seq 2^63": _envelope(seq=2**63),
    "seq 2^64 in a snapshot": _envelope(seq=2**64, kind="round_snapshot", data={"last_seq": 2**64}),
    "not UTF-8": b'{"schema_version": "2", "table": "\xff\xfe"}',
    "NaN": b'{"schema_version": "3", "table": "sim-1", "seq": NaN}',
    "huge string": _envelope(data={"slot": None, "reason": "x" * 200_000}),
    "beyond the size": b'"' + b"x" * 300_000 + b'"',
    "wrong types": _envelope(seq="42", session=[], kind=7, data="x"),
    "schema_version a list": _envelope(schema_version=[]),  # ended watch (unhashable)
    "schema_version an object": _envelope(schema_version={"2": 1}),
    "wrong table": _envelope(table="tp-99", seq=2),
    "unknown kind": _envelope(kind="no_such_kind", seq=3, data={"anything": [1, {"x": None}]}),
    "lone surrogate": b'{"command_id": "\\ud800", "schema_version": "2", "state": "\\udfff"}',
    "betting state": b'{"state": ' + b"[" * 3000 + b"]" * 3000 + b"}",
}
"""The probe's payloads, each published on every topic of :data:`TOPICS`."""

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=16),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=16,
)
_FIELDS = {
    "schema_version": st.just("2") | _JSON,
    "table": st.just(TABLE) | _JSON,
    "round": st.just(f"{TABLE}-000001") | _JSON,
    "seq": st.integers(min_value=-(2**70), max_value=2**70) | _JSON,
    "session": st.integers() | _JSON,
    "kind": st.sampled_from(["card_dealt", "round_result", "decision_open", "round_snapshot",
                             "round_opened", "command_answered", "x"]) | _JSON,
    "at": st.just(NOW) | _JSON,
    "data": st.dictionaries(st.sampled_from(["slot", "card", "window", "bets", "last_seq",
                                             "state", "options", "cards"]), _JSON) | _JSON,
    "state": st.sampled_from(["online", "offline"]) | _JSON,
    "chain_head": _JSON,
    "command_id": st.text(max_size=10) | _JSON,
}  # fmt: skip
PAYLOADS = (
    st.binary(max_size=300)
    | _JSON.map(lambda value: json.dumps(value).encode())
    | st.fixed_dictionaries({}, optional=_FIELDS).map(lambda value: json.dumps(value).encode())
    | st.sampled_from(list(CORPUS.values()))
)
"""Hypothesis' payloads: any bytes, any JSON, envelopes and statuses with any field values."""


class Publisher:
    """A plain MQTT client publishing (QoS 1, waiting for each PUBACK) on the test's broker."""

    def __init__(self, broker: MosquittoBroker) -> None:
        self.client = Client(CallbackAPIVersion.VERSION2, client_id="hostile-probe")
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        self.sent: list[tuple[str, bytes]] = []

    def send(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        self.sent.append((topic, payload))
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(timeout=10)
        assert info.is_published(), f"no PUBACK for {topic}"

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@contextlib.contextmanager
def process(argv: list[str], out: Path, err: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m controller.cli ARGV``, its output in files; stopped (SIGINT, then kill)."""
    with out.open("wb") as stdout, err.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", *argv],
            stdout=stdout,
            stderr=stderr,
            # faulthandler: a process whose loop hangs dumps where on SIGABRT (see wait_for).
            env={**os.environ, "PYTHONFAULTHANDLER": "1", **env},
        )
        try:
            yield child
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait(5)


HUNG: list[subprocess.Popen[bytes]] = []
"""Processes to ask where they are (SIGABRT: faulthandler's traceback) when a wait fails."""


def wait_for(what: str, check: Callable[[], Any], seconds: float, *logs: Path) -> Any:
    """``check()``'s first truthy value within ``seconds``, else fail with the logs' tails
    (and, from each process still running, the traceback of where it is)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    for child in HUNG:
        if child.poll() is None:
            child.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(5)
    tails = "\n".join(f"--- {log.name}\n{tail(log, 60)}" for log in logs)
    pytest.fail(f"{what}: not within {seconds:g} s\n{tails}")


def tail(path: Path, lines: int = 25) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def settled_rounds(journal: Path) -> list[tuple[int, str]]:
    """``(seq, round_id)`` of each ``round_result`` the journal holds (read beside the table)."""
    if not journal.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as db:
        try:
            query = "SELECT seq, round_id FROM entries WHERE kind = 'round_result' ORDER BY seq"
            return [(int(seq), str(round_id)) for seq, round_id in db.execute(query)]
        except sqlite3.OperationalError:  # the schema is being made
            return []


def last_seq(journal: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as db:
        return int(db.execute("SELECT max(seq) FROM entries").fetchone()[0])


def studio_view(studio: str) -> dict[str, Any]:
    """The studio's view of the table: the first ``state`` message of its public socket."""
    import asyncio

    import websockets

    url = studio.replace("http://", "ws://") + f"/ws/tables/{TABLE}/public"

    async def first() -> dict[str, Any]:
        async with asyncio.timeout(10), websockets.connect(url) as socket:
            return dict(json.loads(await socket.recv())["view"])

    return asyncio.run(first())


def rejected_lines(log: Path) -> dict[str, set[str]]:
    """``reader -> codes`` of the ``message rejected`` lines in a process's log (JSON lines)."""
    found: dict[str, set[str]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if '"message rejected"' not in line:
            continue
        record = json.loads(line)
        assert record["reason"], line  # each says what was wrong and where
        found.setdefault(record["reader"], set()).add(record["code"])
    return found


def flood(broker: MosquittoBroker, alive: dict[str, subprocess.Popen[bytes]], *logs: Path) -> None:
    """The corpus on every topic (retained where :data:`RETAINED`), then hypothesis' examples
    on any topic; after each example every process must still be running."""
    probe = Publisher(broker)
    try:
        for name, payload in CORPUS.items():
            for topic in TOPICS:
                probe.send(topic, payload, retain=topic in RETAINED and name != "empty")

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.generate],  # a process that died stays dead: nothing to shrink
            suppress_health_check=list(HealthCheck),
        )
        @given(topic=st.sampled_from(TOPICS), payload=PAYLOADS)
        def publish(topic: str, payload: bytes) -> None:
            probe.send(topic, payload)
            for name, child in alive.items():
                assert child.poll() is None, (
                    f"{name} ended (status {child.returncode}) by {topic}: {payload[:120]!r} "
                    "or a message before it\n" + "\n".join(tail(log) for log in logs)
                )

        publish()
    finally:
        probe.close()
        sent = logs[0].with_name("sent.txt")
        sent.write_text("\n".join(f"{topic} {payload[:300]!r}" for topic, payload in probe.sent))


def check_studio(studio: str, journal: Path, flood_end: int, *logs: Path) -> None:
    """The studio is up, hears the table, and its view is at the journal's real ``seq``."""
    health = json.loads(urllib.request.urlopen(f"{studio}/healthz", timeout=5).read())
    assert health["public"]["feed_up"], health
    assert health["tables"][TABLE] is True, health
    assert health["public"]["rejected"].get("too_deep", 0) >= 1, health  # counted, by code
    view = wait_for(
        "the studio's view past the flood",
        lambda: (found := studio_view(studio))["last_seq"] > flood_end and found,
        10,
        *logs,
    )
    assert view["last_seq"] <= last_seq(journal) < 10**9  # not the forged 10^9
    assert view["online"] is True


def check_archive(archive: Path, journal: Path, rounds: list[str], *logs: Path) -> None:
    """The archive holds the rounds settled after the flood, and kept the flood as rejected."""

    def settled() -> set[str]:
        with contextlib.closing(sqlite3.connect(f"file:{archive}?mode=ro", uri=True)) as db:
            query = "SELECT round_id FROM rounds WHERE state = 'settled'"
            return {row[0] for row in db.execute(query)}

    wait_for("the archive holding the new rounds", lambda: set(rounds) <= settled(), 15, *logs)
    with contextlib.closing(sqlite3.connect(f"file:{archive}?mode=ro", uri=True)) as db:
        (rejected,) = db.execute("SELECT count(*) FROM rejected").fetchone()
        (archived_max,) = db.execute("SELECT max(seq) FROM events").fetchone()
    assert rejected > 0
    assert archived_max <= last_seq(journal)  # no forged seq among the archived entries


def check_watch(watch_out: Path, rounds: list[str], *logs: Path) -> None:
    """``watch`` printed the flood as rejected, then the real rounds settled after it."""
    lines = [f"round {int(round_id.rsplit('-', 1)[1])} result:" for round_id in rounds]
    wait_for(
        "watch printing the new rounds",
        lambda: all(line in watch_out.read_text(errors="replace") for line in lines),
        10,
        *logs,
    )
    printed = watch_out.read_text(errors="replace")
    assert ": rejected: " in printed
    assert printed.index(lines[0]) > printed.index(": rejected: ")


def check_logs(run_err: Path, watch_log: str) -> None:
    """Each reader logged what it rejected (``message rejected``, a code and a reason)."""
    readers = rejected_lines(run_err)
    studio = set().union(*(codes for r, codes in readers.items() if r.startswith("studio")))
    expected = {"commands", "betting-status", "betting-sim", "archive", "pit"}
    assert expected <= set(readers), readers
    for reader, codes in {**readers, "studio": studio}.items():
        assert "too_deep" in codes, (reader, readers)
    assert "seq_ahead" in readers["betting-sim"] & readers["archive"] & studio, readers
    assert "message rejected" in watch_log and "too_deep" in watch_log


def test_hostile_messages_on_every_topic_leave_every_process_following_the_table(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    journal, archive = tmp_path / "sim.sqlite", tmp_path / "archive.sqlite"
    run_err, watch_out, watch_err = tmp_path / "run.err", tmp_path / "watch.out", tmp_path / "w.err"
    logs = (run_err, watch_out, watch_err)
    run = [
        "run", "--simulate", "--game", "three-card-mulligan", "--broker", mosquitto.url,
        "--journal", str(journal), "--seed", "7", "--betting-seconds", "0.3",
        "--pause-seconds", "0.2", "--deal-delay", "0.02", "--studio-port", "0",
        "--log-format", "json",
    ]  # fmt: skip
    watch = ["watch", "--broker", mosquitto.url, "--table-id", TABLE]
    with (
        process(watch, watch_out, watch_err) as watcher,
        # The betting system's presence gates each round: the status watcher runs too.
        process(
            run, tmp_path / "run.out", run_err, TABLECTL_ROUNDS__WAIT_FOR_BETTING_SYSTEM="true"
        ) as table,
    ):
        HUNG[:] = [table, watcher]
        found = wait_for(
            "the studio's address",
            lambda: re.search(r"^studio: (http://127\.0\.0\.1:\d+)/", run_err.read_text(), re.M),
            30,
            *logs,
        )
        wait_for("a first settled round", lambda: settled_rounds(journal), 30, *logs)
        flood(mosquitto, {"tablectl run": table, "tablectl watch": watcher}, *logs)
        flood_end = last_seq(journal)
        new = wait_for(
            "two rounds settled after the flood",
            lambda: (
                [r for seq, r in settled_rounds(journal) if seq > flood_end][:2][1:]
                and [r for seq, r in settled_rounds(journal) if seq > flood_end]
            ),
            45,
            *logs,
        )
        assert table.poll() is None, tail(run_err)
        assert watcher.poll() is None, tail(watch_err)
        check_studio(found.group(1), journal, flood_end, *logs)
        check_archive(archive, journal, new, *logs)
        check_watch(watch_out, new, *logs)
    check_logs(run_err, watch_err.read_text(errors="replace") + watch_out.read_text())
