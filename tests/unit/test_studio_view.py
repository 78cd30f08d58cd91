"""The studio's table view: a pure fold of the messages a subscriber receives."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from controller.studio.feed import DelayLine, Floor, Mailbox
from controller.studio.view import TableView, parse_topic


def env(kind: str, seq: int, data: dict[str, Any], round_id: str | None = "t-000001") -> bytes:
    return json.dumps(
        {"schema_version": "3", "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
         "table": "t", "round": round_id, "seq": seq, "session": 1,
         "kind": kind, "at": "2026-11-25T10:00:00.000000Z", "delayed": False, "data": data}
    ).encode()  # fmt: skip


OPENED = {"round_no": 1, "game": "teen-patti-20-20", "betting_seconds": 1,
          "betting_closes_at": "2026-11-25T10:00:01.000000Z"}  # fmt: skip


def dealt(view: TableView, seq: int, slot: str, card: str | None, index: int) -> None:
    face = "hidden" if card is None else "up"
    body = {"slot": slot, "hand": slot[0], "index": index, "card": card, "face": face}
    view.apply("events", "tables/t/events", env("card_dealt", seq, body))


def test_topics_are_parsed_with_the_prefix():
    assert parse_topic("tables/t1/events", "tables") == ("t1", "events")
    assert parse_topic("studio-3/tables/t1/secure/events", "studio-3/tables") == ("t1", "secure")
    assert parse_topic("tables/t1/cmd/decision", "tables") is None
    assert parse_topic("other/t1/events", "tables") is None


def test_a_round_follows_the_events_with_rescan_attempts_and_the_next_slot():
    view = TableView("t")
    view.apply("events", "tables/t/events", env("round_opened", 1, OPENED))
    view.apply("events", "tables/t/events", env("betting_closed", 2, {}))
    assert view.next_slot() == "A1"
    rescan = {"slot": "A1", "cause": "device", "detail": "unreadable", "attempt": 2}
    view.apply("events", "tables/t/events", env("rescan_requested", 3, rescan))
    wire = view.to_wire()["round"]
    assert wire["rescan"]["attempt"] == 2 and wire["next_slot"] == "A1"
    dealt(view, 4, "A1", "As", 0)
    wire = view.to_wire()["round"]
    assert wire["rescan"] is None
    assert wire["next_slot"] == "B1"  # Teen Patti deals A1 B1 A2 B2 A3 B3
    assert wire["cards"] == [{"slot": "A1", "hand": "A", "index": 0, "face": "up", "card": "As"}]


def test_a_repeated_or_older_event_changes_nothing():
    view = TableView("t")
    view.apply("events", "tables/t/events", env("round_opened", 5, OPENED))
    assert not view.apply("events", "tables/t/events", env("round_opened", 5, OPENED))
    assert not view.apply("events", "tables/t/events", env("betting_closed", 4, {}))
    assert view.fold.state == "betting_open"
    assert not view.apply("events", "tables/t/events", b"not json")


def test_a_snapshot_rebuilds_the_round_only_when_it_is_not_older():
    view = TableView("t")
    snapshot = {"round_no": 3, "game": "teen-patti-20-20", "state": "dealing", "halted": True,
                "betting_closes_at": None, "awaiting_rescan": None, "result": None,
                "cards": [{"slot": "A1", "hand": "A", "index": 0, "face": "up", "card": "Kd"}],
                "last_seq": 40}  # fmt: skip
    assert view.apply("round", "tables/t/round", env("round_snapshot", 40, snapshot, "t-3"))
    assert view.fold.round_no == 3 and view.fold.halted and view.next_slot() == "B1"
    # events at or below the snapshot's last_seq are in it already
    assert not view.apply("events", "tables/t/events", env("round_resumed", 40, {"by": "x"}, "t-3"))
    assert view.apply("events", "tables/t/events", env("round_resumed", 41, {"by": "x"}, "t-3"))
    older = dict(snapshot, last_seq=39, halted=True)
    assert not view.apply("round", "tables/t/round", env("round_snapshot", 39, older, "t-3"))
    assert not view.fold.halted


def test_a_public_view_ignores_the_secure_feed_and_a_secure_view_fills_hidden_cards():
    public, secure = TableView("t"), TableView("t", secure=True)
    for view in (public, secure):
        view.apply("events", "tables/t/events", env("round_opened", 1, OPENED))
        view.apply("events", "tables/t/events", env("betting_closed", 2, {}))
        dealt(view, 3, "A1", None, 0)
    full = env("card_dealt", 3, {"slot": "A1", "hand": "A", "index": 0, "card": "Qh",
                                 "face": "hidden"})  # fmt: skip
    equity = env("table_info", 4, {"kind": "equity", "secure": True,
                                   "data": {"street": "preflop", "seats": {}}})  # fmt: skip
    assert not public.apply("secure", "tables/t/secure/events", full)
    assert secure.apply("secure", "tables/t/secure/events", full)
    assert secure.apply("secure", "tables/t/secure/events", equity)
    assert "Qh" not in json.dumps(public.to_wire())
    assert "secure_equity" not in public.to_wire()["round"]
    card = secure.to_wire()["round"]["cards"][0]
    assert card["card"] == "Qh" and card["secure"] is True
    assert "preflop" in secure.to_wire()["round"]["secure_equity"]


def test_status_offline_and_a_refused_card_with_its_reason():
    view = TableView("t")
    will = {"schema_version": "3", "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
            "state": "offline", "table": "t", "session": 1,
            "game": "teen-patti-20-20", "version": "1", "at": None,
            "reason": "connection lost"}  # fmt: skip
    view.apply("status", "tables/t/status", json.dumps(will).encode())
    assert view.online is False
    view.apply("events", "tables/t/events", env("round_opened", 1, OPENED))
    refused = {"slot": "A1", "card": "As", "reason": "duplicate"}
    view.apply("events", "tables/t/events", env("card_refused", 2, refused))
    assert view.to_wire()["round"]["refused"] == refused
    assert view.to_wire()["status"]["reason"] == "connection lost"


def test_a_floor_sends_the_state_first_and_drops_what_is_not_its_table():
    floor = Floor("tables", lambda table: table == "t", name="public")
    box = floor.follow("t")
    floor.handle("tables/other/events", env("round_opened", 1, OPENED))
    floor.handle("tables/t/events", env("round_opened", 1, OPENED))
    first = json.loads(box._items.popleft())
    second = json.loads(box._items.popleft())
    assert first["view"]["round"]["id"] is None
    assert second["view"]["round"]["no"] == 1
    assert "other" not in floor.views


def test_a_mailbox_keeps_the_newest_updates():
    box = Mailbox(size=2)
    for n in range(5):
        box.put(str(n))
    assert list(box._items) == ["3", "4"] and box.dropped == 3


async def test_the_delay_line_hands_nothing_on_before_its_time():
    delay = 0.3
    out: list[tuple[str, float]] = []
    line = DelayLine(delay, lambda topic, payload: out.append((topic, time.monotonic())))
    task = asyncio.create_task(line.run())
    try:
        held = {"a": time.monotonic()}
        line.hold("a", b"")
        await asyncio.sleep(delay / 2)
        assert out == [] and line.held() == 1
        held["b"] = time.monotonic()
        line.hold("b", b"")  # behind "a": the line sleeps on until "a" is due
        async with asyncio.timeout(5):
            while len(out) < 2:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert [topic for topic, _ in out] == ["a", "b"]
    assert all(at >= held[topic] + delay for topic, at in out), "nothing before its time"


@pytest.mark.parametrize("game", ["teen-patti-20-20", "no-such-game"])
def test_the_next_slot_is_not_guessed_off_the_plan(game):
    view = TableView("t")
    view.apply("events", "tables/t/events", env("round_opened", 1, dict(OPENED, game=game)))
    view.apply("events", "tables/t/events", env("betting_closed", 2, {}))
    dealt(view, 3, "Z9", "As", 0)  # not the plan's first slot
    assert view.next_slot() is None


def test_a_floor_counts_what_its_views_reject_in_its_one_log():
    floor = Floor("tables", lambda table: table == "t", name="public")
    floor.handle("tables/t/events", env("round_opened", 1, OPENED))
    floor.handle("tables/t/events", b"[" * 3000 + b"]" * 3000)
    floor.handle("tables/t/events", env("round_opened", 2, OPENED, "t-000002"))
    assert floor.rejections.counts == {"too_deep": 1}
    assert floor.views["t"].fold.round_id == "t-000002"
