"""The studio's view, the pit floor and ``tablectl watch`` under hostile messages, on a real broker.

A real Mosquitto, a real table (a :class:`Publisher` on a real journal), and a client that
publishes the probe's payloads (issue 21: a 3,000-deep value, ``seq`` 10^9 and 2^63, bytes
that are not UTF-8, NaN, a status from year 1...) on every topic each reader reads, retained
where the table's are. Afterwards each reader is still running, follows the real table to its
last ``seq``, and recorded each hostile message as a rejection.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from typing import Any

import aiomqtt

from controller.studio.feed import Feed
from controller.studio.feed import Floor as StudioFloor
from controller.studio.pit.console import PitConsole
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.settings import PitSettings, PitUser
from controller.watch import watch
from tests.integration.test_publisher import card, settings_for

DEEP = b"[" * 3000 + b"]" * 3000


def _envelope(
    table: str, seq: int, kind: str = "round_halted", *, journal: str, **extra: Any
) -> bytes:
    body = {"schema_version": "3", "journal": journal, "table": table, "round": "r-1",
            "seq": seq, "session": 1, "kind": kind, "at": "2026-11-27T12:00:00.000000Z",
            "delayed": False, "data": {"reason": "forged"}, **extra}  # fmt: skip
    return json.dumps(body).encode()


def corpus(table: str, journal: str) -> list[tuple[str, bytes, bool]]:
    """``(leaf, payload, retain)``: the probe's payloads, on each topic a reader reads.

    Forged in the table's own journal (``journal``): a seq far ahead in it is ``seq_ahead``.
    """
    every = [
        DEEP,
        _envelope(table, 10**9, journal=journal),
        b'{"schema_version":"2","seq":' + str(2**63).encode() + b"}",
        bytes(range(256)),
        b"null",
        b'{"x": NaN}',
        b'"\\ud800"',
        b"9" * 5000,
        _envelope(
            table,
            5,
            journal=journal,
            at="0001-01-01T00:00:00+01:00",
            data={"reason": ["not", "text"]},
        ),
        _envelope("another-table", 5, journal=journal),
    ]
    status = json.dumps(
        {"schema_version": "3", "journal": journal, "state": "online", "table": table,
         "session": 1, "game": "g", "version": "1", "at": "0001-01-01T00:00:00",
         "chain_head": {"seq": -1, "hash": "x"}}
    ).encode()  # fmt: skip
    snapshot = _envelope(
        table, 10**9, kind="round_snapshot", journal=journal, data={"last_seq": 10**9}
    )
    found = [(leaf, payload, False) for leaf in ("events", "results") for payload in every]
    found += [("status", payload, True) for payload in (DEEP, status)]
    found += [("round", payload, True) for payload in (DEEP, snapshot)]
    return found


async def test_every_reader_survives_the_probe_and_follows_the_real_table(
    mosquitto, journal, make_publisher
):
    broker = mosquitto
    table = f"hostile-{uuid.uuid4().hex[:6]}"
    settings = settings_for(broker.url, "5")
    studio = StudioFloor("tables", lambda t: t == table, name="public")
    console = PitConsole(
        PitSettings(
            users=[PitUser(name="a", role="pitboss", password_hash=hash_password("x", n=1024))],
            session_secret="s" * 32,
            mqtt=settings,
            tables=[table],
        )
    )
    pit = console.floor
    out = io.StringIO()
    stop = asyncio.Event()
    links: list[bool] = []
    hostile = corpus(table, journal.identity)
    async with (
        asyncio.timeout(60),
        make_publisher(settings, table, journal, connect_within=5) as publisher,
        asyncio.TaskGroup() as group,
    ):
        feed = Feed(settings, studio.handle, on_link=links.append, tables=[table], name="s")
        tasks = [
            group.create_task(feed.run(stop)),
            group.create_task(console.run(stop)),
            group.create_task(watch([broker.url], table, out=out, stop=stop)),
        ]
        while not links or not console.connected.is_set() or "ONLINE" not in out.getvalue():
            await asyncio.sleep(0.02)
        async with aiomqtt.Client(broker.host, broker.port, identifier="hostile") as client:
            for leaf, payload, retain in hostile:
                await client.publish(f"tables/{table}/{leaf}", payload, qos=1, retain=retain)
            await client.publish("betting/status", DEEP, qos=1, retain=True)
        journal.append(
            "round_opened",
            {"round_no": 1, "game": "g", "betting_seconds": 1, "betting_closes_at": None},
            round_id="r-1",
        )
        card(journal, 1)
        assert await publisher.flush(5)
        last = journal.last_seq
        view = studio.view(table)
        while view.last_seq < last or (pit.tables[table].last_seq or 0) < last:
            await asyncio.sleep(0.02)
        while f"#{last} " not in out.getvalue():
            await asyncio.sleep(0.02)
        assert not any(task.done() for task in tasks), "every reader is still running"
        assert links == [True] and pit.broker, "no reader lost its connection"
        stop.set()

    # Each follows the real table: its round, its last seq (not the forged 10^9).
    assert view.fold.round_id == "r-1" and [c.card for c in view.fold.cards] == ["C1"]
    assert view.last_seq == last
    assert pit.table_view(table)["round"] == "r-1" and pit.table_view(table)["last_seq"] == last
    # Each recorded every hostile message it read as a rejection (the studio's view and the
    # pit floor read status, round, events and results; the pit floor betting/status too).
    assert view.rejections.total == len(hostile)
    assert pit.rejections.total == len(hostile) + 1
    printed = [line for line in out.getvalue().splitlines() if ": rejected: " in line]
    assert len(printed) == len(hostile)
    assert any("seq 1000000000 is beyond" in line for line in printed)
    assert any("nests 3000 levels" in line for line in printed)
