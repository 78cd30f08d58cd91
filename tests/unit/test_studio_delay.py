"""The secure-delay line: a round's secrets held until the round ends, the rest plainly delayed.

Pure timing on a fake clock (no broker): the line is driven with the payloads a table
publishes (envelopes as :mod:`controller.messages` writes them) and its sink records what it
hands on, and when.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.studio.feed import DelayLine, Floor

ROUND = "t-000001"


def env(
    kind: str, seq: int, data: dict[str, Any], round_id: str | None = ROUND, **extra: Any
) -> bytes:
    return json.dumps(
        {"schema_version": "3", "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
         "table": "t", "round": round_id, "seq": seq, "session": 1,
         "kind": kind, "at": "2026-11-25T10:00:00.000000Z", "delayed": False, "data": data,
         **extra}
    ).encode()  # fmt: skip


OPENED = {"round_no": 1, "game": "texas-holdem", "betting_seconds": 1,
          "betting_closes_at": "2026-11-25T10:00:01.000000Z"}  # fmt: skip
HOLE = {"slot": "P1a", "hand": "P1", "index": 0, "card": "As", "face": "hidden"}
HOLE_PUBLIC = dict(HOLE, card=None)
EQUITY = {"kind": "equity", "secure": True, "data": {"street": "preflop", "P1": 0.6}}
RESULT = {"game": "texas-holdem", "round_no": 1, "cards": {"P1": ["As", "Kd"]},
          "winner": "P1", "hands": {}, "bets": []}  # fmt: skip


class Line:
    """A delay line on a fake clock, recording ``(time, topic, kind)`` of what it hands on."""

    def __init__(self, delay: float = 5.0, **options: Any) -> None:
        self.now = 100.0
        self.out: list[tuple[float, str, str]] = []
        self.line = DelayLine(delay, self._sink, clock=lambda: self.now, **options)

    def _sink(self, topic: str, payload: bytes) -> None:
        kind = json.loads(payload).get("kind", "") if payload.startswith(b"{") else ""
        self.out.append((self.now, topic, kind))

    def hold(self, leaf: str, payload: bytes) -> None:
        self.line.hold(f"tables/t/{leaf}", payload)

    async def at(self, moment: float) -> None:
        """Move the clock to ``moment`` and let the line hand on what is due."""
        self.now = moment
        self.line._wake.set()
        for _ in range(5):
            await asyncio.sleep(0)

    def kinds(self, leaf: str) -> list[str]:
        return [kind for _, topic, kind in self.out if topic == f"tables/t/{leaf}"]


async def _running(line: Line) -> asyncio.Task[None]:
    task = asyncio.create_task(line.line.run())
    await asyncio.sleep(0)
    return task


async def test_hole_cards_wait_for_the_result_when_the_hand_outlasts_the_delay():
    line = Line(delay=5.0)
    task = await _running(line)
    try:
        line.hold("events", env("round_opened", 1, OPENED))
        line.hold("events", env("card_dealt", 2, HOLE_PUBLIC))
        line.hold("secure/events", env("card_dealt", 2, HOLE))
        line.hold("secure/events", env("table_info", 3, EQUITY))
        await line.at(105.0)  # the delay has passed: the public entries go on, not the secrets
        assert line.kinds("events") == ["round_opened", "card_dealt"]
        assert line.kinds("secure/events") == []
        assert line.line.secrets() == 2
        await line.at(130.0)  # decisions still open 30 s later: still held
        assert line.kinds("secure/events") == []
        line.hold("events", env("round_result", 9, RESULT))
        line.hold("results", env("round_result", 9, RESULT))
        await line.at(130.0)  # the result arrived: the secrets go on now, the result 5 s later
        assert line.kinds("secure/events") == ["card_dealt", "table_info"]
        assert line.kinds("results") == []
        await line.at(135.0)
        assert line.kinds("results") == ["round_result"]
        assert line.line.held() == 0
    finally:
        task.cancel()


async def test_a_short_hand_keeps_the_plain_delay_for_its_secrets():
    line = Line(delay=5.0)
    task = await _running(line)
    try:
        line.hold("events", env("round_opened", 1, OPENED))
        line.hold("secure/events", env("card_dealt", 2, HOLE))
        await line.at(101.0)
        line.hold("results", env("round_voided", 3, {"reason": "voided by the pit", "bets": {}}))
        await line.at(104.9)  # the round is over but the delay has not passed
        assert line.kinds("secure/events") == []
        await line.at(105.0)
        assert line.kinds("secure/events") == ["card_dealt"]
    finally:
        task.cancel()


async def test_a_replayed_result_of_an_earlier_round_releases_nothing():
    line = Line(delay=1.0)
    task = await _running(line)
    try:
        line.hold("events", env("round_opened", 10, OPENED, round_id="t-000002"))
        line.hold("secure/events", env("card_dealt", 11, HOLE, round_id="t-000002"))
        old = env("round_result", 5, RESULT, replayed=True, delayed=True)
        line.hold("results", old)
        await line.at(110.0)
        assert line.kinds("secure/events") == []
        # The retained snapshot naming the next round: the table moved on; they go on.
        snapshot = {"round_no": 3, "game": "texas-holdem", "state": "betting_open",
                    "betting_closes_at": None, "cards": [], "awaiting_rescan": None,
                    "result": None, "last_seq": 20}  # fmt: skip
        line.hold("round", env("round_snapshot", 20, snapshot, round_id="t-000003"))
        await line.at(110.0)
        assert line.kinds("secure/events") == ["card_dealt"]
    finally:
        task.cancel()


async def test_an_unreadable_secure_message_is_dropped_and_counted():
    line = Line(delay=1.0)
    task = await _running(line)
    try:
        deep = b"[" * 3000 + b"]" * 3000
        line.hold("secure/events", deep)
        line.hold("secure/events", env("card_dealt", 2, {"slot": "P1a"}))  # not a card_dealt
        line.hold("secure/events", env("card_dealt", 2, HOLE, round_id=None))
        await line.at(200.0)
        assert line.kinds("secure/events") == ["card_dealt"]  # only the readable one
        assert line.line.rejections.counts == {"too_deep": 1, "invalid": 1}
    finally:
        task.cancel()


async def test_held_secrets_are_bounded():
    line = Line(delay=1.0, max_held=3)
    for seq in range(2, 8):
        line.hold("secure/events", env("card_dealt", seq, HOLE))
    assert line.line.secrets() == 3 and line.line.dropped == 3


@settings(max_examples=200, deadline=None)
@given(
    leaf=st.sampled_from(["events", "results", "round", "status", "secure/events"]),
    payload=st.binary(max_size=300)
    | st.builds(
        lambda kind, seq, data, rnd: env(kind, seq, data, round_id=rnd),
        st.sampled_from(["round_opened", "card_dealt", "round_result", "round_snapshot", "x"]),
        st.integers(min_value=-5, max_value=2**70),
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
        st.none() | st.text(max_size=8),
    ),
)
def test_no_bytes_make_the_line_or_the_floor_raise(leaf: str, payload: bytes) -> None:
    out: list[str] = []
    line = DelayLine(1.0, lambda topic, _: out.append(topic), clock=lambda: 0.0)
    line.hold(f"tables/t/{leaf}", payload)
    floor = Floor("tables", lambda _: True, secure=True, name="secure-delay")
    floor.handle(f"tables/t/{leaf}", payload)
    assert line.held() <= 1


def test_a_floor_makes_a_view_only_for_a_table_it_heard_well():
    floor = Floor("tables", lambda _: True, name="public")
    floor.handle("tables/ghost/events", b"[[[[]]]]")
    floor.handle("tables/ghost/events", env("round_opened", 1, OPENED))  # names table "t"
    floor.handle("tables/ghost/status", b'{"state":"online"}')
    assert not floor.heard("ghost") and floor.views == {}
    assert floor.rejections.total == 3
    floor.handle("tables/t/events", env("round_opened", 1, OPENED))
    assert floor.heard("t") and floor.views["t"].fold.round_id == ROUND


def test_a_full_floor_takes_no_new_table():
    floor = Floor("tables", lambda _: True, name="public", max_tables=1)
    floor.handle("tables/t/events", env("round_opened", 1, OPENED))
    other = env("round_opened", 1, OPENED).replace(b'"table": "t"', b'"table": "u"')
    floor.handle("tables/u/events", other)
    assert list(floor.views) == ["t"]


async def test_a_burst_goes_on_together_never_early_and_at_most_the_batch_late():
    """The studio's line (``batch_seconds``): a table's event and its snapshot, a few ms
    apart, go on at one wake-up instead of two; neither before its time."""
    delay, batch, gap = 0.2, 0.05, 0.01
    released: list[tuple[str, float]] = []
    line = DelayLine(delay, lambda topic, _: released.append((topic, time.monotonic())),
                     batch_seconds=batch)  # fmt: skip
    task = asyncio.create_task(line.run())
    try:
        first = time.monotonic()
        line.hold("tables/t/events", env("round_opened", 1, OPENED))
        await asyncio.sleep(gap)
        second = time.monotonic()
        line.hold("tables/t/round", b"")
        async with asyncio.timeout(5):
            while len(released) < 2:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    (_, at_first), (_, at_second) = released
    assert at_first >= first + delay and at_second >= second + delay  # never early
    assert at_second - at_first < gap / 2  # one wake-up for both
    assert at_first - (first + delay) < 1.0  # late by the batch (a loaded machine: more)


async def test_a_message_held_behind_the_head_leaves_the_line_asleep():
    """Each message is due ``delay`` after the one before it: holding it changes nothing about
    when the line must wake, so the line is not woken to look at its head again (a pass of
    the line per message the studio receives, a hundred a minute beside a table)."""
    now = [100.0]
    looks: list[float] = []

    def clock() -> float:
        looks.append(now[0])
        return now[0]

    released: list[str] = []
    line = DelayLine(5.0, lambda topic, _: released.append(topic), clock=clock)
    task = asyncio.create_task(line.run())
    try:
        line.hold("tables/t/events", env("round_opened", 1, OPENED))
        for _ in range(5):
            await asyncio.sleep(0)
        looks.clear()
        for seq in range(2, 22):
            now[0] += 0.1
            line.hold("tables/t/events", env("card_dealt", seq, HOLE_PUBLIC))
            for _ in range(5):
                await asyncio.sleep(0)
        assert len(looks) == 20, f"the line looked again {len(looks) - 20} times (one a hold)"
        assert released == [], "nothing before its time"
    finally:
        task.cancel()


async def test_an_unwatched_line_sleeps_until_a_page_comes_and_then_catches_up():
    """Nobody reads the secure-delay floor (no page open): the line does not wake at each
    message's time. A page about to read it (``catch_up``) gets everything due by then, in
    order, and nothing early; watched again, the line hands the rest on at its time."""
    now = [100.0]
    looks: list[float] = []

    def clock() -> float:
        looks.append(now[0])
        return now[0]

    watching = [False]
    released: list[tuple[float, int]] = []
    line = DelayLine(
        5.0,
        lambda _, payload: released.append((now[0], json.loads(payload)["seq"])),
        clock=clock,
        watched=lambda: watching[0],
    )
    task = asyncio.create_task(line.run())
    try:
        for seq in range(1, 11):  # one a second from 100: seq 1 due at 105, seq 10 at 114
            line.hold("tables/t/events", env("card_dealt", seq, HOLE_PUBLIC))
            now[0] += 1.0
            for _ in range(5):
                await asyncio.sleep(0)
        now[0] = 112.5
        for _ in range(5):
            await asyncio.sleep(0)
        assert released == [], "unwatched: nothing handed on, though seq 1-8 are due"
        assert len(looks) == 10, f"the line looked at its clock {len(looks) - 10} times unwatched"
        watching[0] = True  # a page comes: it catches the line up before it reads the floor
        line.catch_up()
        assert released == [(112.5, seq) for seq in range(1, 9)], "every due one, in order"
        now[0] = 114.0
        line._wake.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert [seq for _, seq in released] == list(range(1, 11)), "watched: at its time"
    finally:
        task.cancel()


async def test_an_unwatched_line_hands_on_what_is_due_past_its_bound():
    now = [100.0]
    released: list[int] = []
    line = DelayLine(
        1.0,
        lambda _, payload: released.append(json.loads(payload)["seq"]),
        clock=lambda: now[0],
        watched=lambda: False,
        idle_hold=5,
    )
    for seq in range(1, 6):
        line.hold("tables/t/events", env("card_dealt", seq, HOLE_PUBLIC))
        now[0] += 0.5
    assert released == [] and line.held() == 5
    line.hold("tables/t/events", env("card_dealt", 6, HOLE_PUBLIC))  # the sixth: past 5
    assert released == [1, 2, 3, 4], "what is due by now (held 1 s), together, in order"
    assert line.held() == 2


def test_a_page_of_the_secure_floor_reads_what_the_line_held_while_nobody_watched():
    now = [100.0]
    floor = Floor("tables", lambda _: True, secure=True, name="secure-delay")
    line = DelayLine(5.0, floor.handle, clock=lambda: now[0], watched=floor.watched)
    floor.before_follow = line.catch_up
    line.hold("tables/t/events", env("round_opened", 1, OPENED))
    line.hold("tables/t/events", env("card_dealt", 2, HOLE_PUBLIC))
    now[0] = 105.5
    line.hold("tables/t/events", env("card_dealt", 3, dict(HOLE_PUBLIC, slot="P1b", index=1)))
    assert not floor.heard("t"), "unwatched: nothing folded yet"
    box = floor.follow("t")
    first = json.loads(box._items[0])
    assert first["view"]["last_seq"] == 2, "the page sees seq 1-2 (due), not seq 3 (not yet)"
    assert floor.watched() and line.held() == 1
