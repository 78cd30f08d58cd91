"""The pit console's floor model, fed messages as the tables publish them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controller.messages import SCHEMA_VERSION
from controller.studio.pit.floor import Floor

T = "tables/tp-01"
JOURNAL = "0123456789abcdef" * 2
"""The journal id the messages name (a table's journal, 32 hex digits)."""
NEXT = str(int(SCHEMA_VERSION) + 1)
"""A schema version this reader does not know."""


def env(kind: str, seq: int, data: dict[str, Any], **extra: Any) -> bytes:
    body = {
        "schema_version": SCHEMA_VERSION,
        "journal": JOURNAL,
        "table": extra.pop("table", "tp-01"),
        "round": extra.pop("round", "tp-01-000001"),
        "seq": seq,
        "session": 1,
        "kind": kind,
        "at": extra.pop("at", f"2026-11-25T08:00:{seq:02d}.000000Z"),
        "delayed": False,
        "data": data,
        **extra,
    }
    return json.dumps(body).encode()


def status(state: str, **extra: Any) -> bytes:
    body = {
        "schema_version": SCHEMA_VERSION,
        "journal": JOURNAL,
        "state": state,
        "table": "tp-01",
        "session": 1,
        "game": "g",
        "version": "1",
        "at": "2026-11-25T08:00:00.000000Z",
        **extra,
    }
    return json.dumps(body).encode()


def snapshot_data(**fields: Any) -> dict[str, Any]:
    """A round snapshot's data: every member the schema requires, then ``fields``."""
    return {
        "round_no": None,
        "game": "g",
        "state": "idle",
        "betting_closes_at": None,
        "cards": [],
        "awaiting_rescan": None,
        "result": None,
        **fields,
    }


def result_data(winner: str) -> dict[str, Any]:
    return {"game": "g", "cards": {}, "winner": winner, "hands": {}, "bets": []}


OPENED = {"round_no": 1, "game": "g", "betting_seconds": 15, "betting_closes_at": None}


def test_online_offline_from_the_retained_status():
    floor = Floor()
    assert floor.apply(f"{T}/status", status("online", game="teen-patti-20-20", session=3)) == (
        "tp-01"
    )
    view = floor.table_view("tp-01")
    assert view["online"] is True and view["game"] == "teen-patti-20-20" and view["session"] == 3
    floor.apply(f"{T}/status", status("offline", reason="connection lost", at=None, session=3))
    view = floor.table_view("tp-01")
    assert view["online"] is False and view["status_reason"] == "connection lost"


def test_a_round_halts_with_its_alerts_and_the_void_ends_it():
    floor = Floor()
    floor.apply(f"{T}/events", env("round_opened", 1, OPENED))
    floor.apply(f"{T}/events", env("betting_closed", 2, {}))
    for seq, device_state in enumerate(("boot", "connected", "lost"), start=3):
        # boot and connected are good news: a device state, not an alert
        data = {"device": "scanner", "state": device_state}
        floor.apply(f"{T}/events", env("device_status", seq, data))
    assert floor.table_view("tp-01")["devices"]["scanner"]["state"] == "lost"
    floor.apply(f"{T}/events", env("round_halted", 6, {"reason": "device lost for 0.5 s"}))
    floor.apply(f"{T}/events", env("pit_alert", 7, {"slot": "B2", "reason": "round halted"}))
    view = floor.table_view("tp-01")
    assert view["round"] == "tp-01-000001" and view["state"] == "dealing" and view["halted"]
    assert view["devices"]["scanner"]["state"] == "lost"
    assert [a["kind"] for a in view["alerts"]] == ["device_status", "round_halted", "pit_alert"]
    assert [a["text"] for a in view["alerts"]] == [
        "card reader scanner disconnected",
        "Round halted: device lost for 0.5 s",
        "Pit alert at B2: round halted",
    ]
    assert view["alerts"][0]["detail"] == "scanner: lost"
    assert [a["resolved"] for a in view["alerts"]] == [None, None, None]
    floor.apply(
        f"{T}/events", env("round_voided", 8, {"reason": "voided by the pit boss: x", "bets": {}})
    )
    view = floor.table_view("tp-01")
    assert view["state"] == "voided" and not view["halted"]
    assert view["result"] == "voided: voided by the pit boss: x"
    assert view["last_seq"] == 8
    assert any("VOIDED" in line for line in view["lines"])
    # The void ends the halt and the pit alert of its round; the scanner is still away.
    resolved = {a["kind"]: a["resolved"] for a in view["alerts"]}
    assert resolved == {
        "device_status": None,
        "round_halted": {"at": "2026-11-25T08:00:08.000000Z", "why": "round voided"},
        "pit_alert": {"at": "2026-11-25T08:00:08.000000Z", "why": "round voided"},
    }


def test_a_device_alert_clears_when_the_device_is_back_and_says_so_in_words():
    floor = Floor()
    lost = {"device": "serial:///tmp/x", "state": "lost", "detail": "the connection failed"}
    floor.apply(f"{T}/events", env("device_status", 3, lost, round=None))
    device = floor.table_view("tp-01")["devices"]["serial:///tmp/x"]
    assert (device["headline"], device["age_at"], device["tail"], device["ok"]) == (
        "card scanner disconnected",
        "2026-11-25T08:00:03.000000Z",
        "",
        False,
    )
    assert device["detail"] == "the connection failed"
    back = {"device": "serial:///tmp/x", "state": "recovered", "detail": "back after 2.5s"}
    floor.apply(f"{T}/events", env("device_status", 13, back, round=None))
    view = floor.table_view("tp-01")
    device = view["devices"]["serial:///tmp/x"]
    assert (device["headline"], device["age_at"], device["tail"], device["ok"]) == (
        "card scanner disconnected",
        "2026-11-25T08:00:03.000000Z",
        ", reconnected after 10 s",
        True,
    )
    (alert,) = view["alerts"]
    assert alert["text"] == "card scanner disconnected"
    assert alert["resolved"] == {
        "at": "2026-11-25T08:00:13.000000Z",
        "why": "card scanner reconnected",
    }


def test_a_halt_clears_on_resume_and_a_gate_alert_when_the_table_is_ready():
    floor = Floor()
    floor.apply(f"{T}/events", env("round_halted", 6, {"reason": "card reader lost"}))
    floor.apply(f"{T}/events", env("round_resumed", 7, {"by": "pit"}))
    waiting = {"state": "waiting", "detail": "betting system offline"}
    floor.apply(f"{T}/events", env("table_status", 8, waiting, round=None))
    ready = {"state": "ready", "detail": "betting system is back"}
    floor.apply(f"{T}/events", env("table_status", 9, ready, round=None))
    view = floor.table_view("tp-01")
    assert [(a["text"], a["resolved"]["why"]) for a in view["alerts"]] == [
        ("Round halted: card reader lost", "round resumed by pit"),
        ("Table waiting: betting system offline", "table ready"),
    ]


def test_an_acknowledged_alert_names_who_and_when_and_a_round_span_is_kept():
    floor = Floor()
    floor.apply(f"{T}/events", env("round_opened", 4, OPENED))
    floor.apply(f"{T}/events", env("pit_alert", 5, {"slot": "A1", "reason": "misreads"}))
    floor.apply(f"{T}/results", env("round_result", 9, result_data("A")))
    assert floor.acknowledge("tp-01", 5, by="alice", at="2026-11-25T08:01:00Z")
    assert not floor.acknowledge("tp-01", 5, by="bob", at="2026-11-25T08:02:00Z"), "first stays"
    assert not floor.acknowledge("tp-09", 5, by="bob", at="2026-11-25T08:02:00Z")
    (alert,) = floor.table_view("tp-01")["alerts"]
    assert alert["ack"] == {"by": "alice", "at": "2026-11-25T08:01:00Z"}
    assert alert["resolved"]["why"] == "round finished"
    assert floor.alert("tp-01", 5) is not None and floor.alert("tp-01", 4) is None
    assert floor.round_span("tp-01", "tp-01-000001") == (4, 9)
    assert floor.round_span("tp-01", "tp-01-000002") is None


def test_alerts_of_every_table_oldest_first():
    floor = Floor()
    floor.apply(
        "tables/tp-02/events",
        env(
            "pit_alert",
            9,
            {"reason": "late"},
            at="2026-11-25T08:00:30.000000Z",
            round=None,
            table="tp-02",
        ),
    )
    floor.apply(
        f"{T}/events",
        env("table_status", 3, {"state": "waiting", "detail": "broker"}, round=None),
    )
    alerts = floor.alerts()
    assert [(a.table, a.kind) for a in alerts] == [
        ("tp-01", "table_status"),
        ("tp-02", "pit_alert"),
    ]
    assert floor.table_view("tp-01")["gate"]["state"] == "waiting"


def test_repeats_are_dropped_and_an_old_snapshot_does_not_undo_events():
    floor = Floor()
    opened = env("round_opened", 10, dict(OPENED, round_no=4), round="tp-01-000004")
    assert floor.apply(f"{T}/events", opened) == "tp-01"
    assert floor.apply(f"{T}/events", opened) is None
    floor.apply(f"{T}/events", env("betting_closed", 11, {}, round="tp-01-000004"))
    stale = env("round_snapshot", 9, snapshot_data(round_no=3, state="settled", last_seq=9))
    floor.apply(f"{T}/round", stale)
    assert floor.table_view("tp-01")["state"] == "dealing"
    fresh = env(
        "round_snapshot",
        12,
        snapshot_data(round_no=4, state="dealing", halted=True, awaiting_rescan="A2", last_seq=12),
        round="tp-01-000004",
    )
    floor.apply(f"{T}/round", fresh)
    view = floor.table_view("tp-01")
    assert view["halted"] and view["awaiting_rescan"] == "A2" and view["round_no"] == 4


def test_the_snapshot_alone_gives_the_state_to_a_console_that_joins_late():
    floor = Floor()
    snapshot = env(
        "round_snapshot",
        40,
        snapshot_data(
            round_no=7, state="voided", result={"voided": True, "reason": "pit"}, last_seq=40
        ),
        round="tp-01-000007",
    )
    floor.apply(f"{T}/round", snapshot)
    view = floor.table_view("tp-01")
    assert (view["round"], view["state"], view["result"]) == (
        "tp-01-000007",
        "voided",
        "voided: pit",
    )


def test_delayed_results_are_listed():
    floor = Floor()
    late = env("round_result", 20, result_data("A"), delayed=True)
    floor.apply(f"{T}/results", late)
    floor.apply(f"{T}/results", env("round_result", 30, result_data("B")))
    delayed = floor.table_view("tp-01")["delayed"]
    assert [(d["seq"], d["text"]) for d in delayed] == [(20, "A wins")]


def test_secure_topics_and_other_tables_never_reach_the_view():
    floor = Floor(tables=["tp-01"])
    hidden = env("card_dealt", 5, {"slot": "A1", "card": "As", "face": "hidden"})
    assert floor.apply(f"{T}/secure/events", hidden) is None
    assert floor.apply("tables/tp-09/events", env("pit_alert", 1, {"reason": "x"})) is None
    assert floor.apply(f"{T}/reply/pit", env("command_answered", 6, {})) is None
    assert "As" not in json.dumps(floor.view())
    assert "tp-09" not in json.dumps(floor.view())
    assert all("secure" not in topic and "#" not in topic for topic in floor.subscriptions())
    assert floor.subscriptions() == [
        f"{T}/status",
        f"{T}/round",
        f"{T}/events",
        f"{T}/results",
        "betting/status",
    ]


def test_every_table_seen_subscribes_with_a_single_level_wildcard():
    floor = Floor(prefix="studio-3/tables", betting_status_topic=None)
    assert floor.subscriptions() == [
        "studio-3/tables/+/status",
        "studio-3/tables/+/round",
        "studio-3/tables/+/events",
        "studio-3/tables/+/results",
    ]
    assert floor.apply("studio-3/tables/mj-1/status", status("online", table="mj-1")) == "mj-1"


def test_bad_input_is_counted_and_named_and_changes_nothing():
    floor = Floor()
    assert floor.apply(f"{T}/events", b"not json") == ""
    assert floor.apply(f"{T}/events", b"[1, 2]") == ""
    future = json.loads(env("pit_alert", 1, {"reason": "x"}))
    future["schema_version"] = NEXT
    assert floor.apply(f"{T}/events", json.dumps(future).encode()) == ""
    assert floor.problems == 3
    assert floor.last_problem == (
        f"{T}/events: schema_version '{NEXT}' is not one this reader knows ({SCHEMA_VERSION})"
    )
    assert floor.rejections.counts == {"not_json": 1, "not_object": 1, "schema_version": 1}
    assert floor.tables == {}


def test_the_betting_system_presence():
    floor = Floor()
    assert floor.betting is None
    assert floor.apply("betting/status", b'{"state": "online"}') == ""
    assert floor.floor_view()["betting"] == "online"
    floor.apply("betting/status", b'{"state": "offline"}')
    assert floor.floor_view()["betting"] == "offline"


KINDS = ["device_status", "round_halted", "round_resumed", "pit_alert", "table_status"]
KINDS += ["round_result", "round_voided", "round_opened"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(KINDS),
            st.integers(min_value=1, max_value=40),
            st.sampled_from(["tp-01-000001", "tp-01-000002", None]),
            st.dictionaries(
                st.sampled_from(["device", "state", "detail", "reason", "by", "slot"]),
                st.text(max_size=12) | st.none() | st.integers(),
                max_size=6,
            ),
        ),
        max_size=25,
    ),
    st.lists(st.integers(min_value=-3, max_value=45), max_size=5),
)
def test_any_sequence_of_alerts_and_their_ends_never_raises(steps, acks):
    floor = Floor(alerts_per_table=5)
    for kind, seq, round_id, data in steps:
        floor.apply(f"{T}/events", env(kind, seq, data, round=round_id))
    for seq in acks:
        floor.acknowledge("tp-01", seq, by="alice", at="2026-11-25T08:01:00Z")
    if "tp-01" not in floor.tables:
        return
    view = floor.table_view("tp-01")
    json.dumps(view)  # what the page receives is JSON
    listed = {alert["seq"] for alert in view["alerts"]}
    assert len(listed) <= 5
    assert all(alert["resolved"] is None or alert["resolved"]["why"] for alert in view["alerts"])
    for device in view["devices"].values():
        assert device["headline"] and isinstance(device["ok"], bool)
