"""The one table fold and its three readers (studio view, pit floor, watch) on hostile input.

Every reader reads through controller/inbound.py and folds with controller/tablefold.py: no
byte string raises, each rejection is recorded, a ``seq`` far ahead is a rejection (not the
new watermark), and afterwards a real message of the table still applies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controller.inbound import Rejection, RejectionLog
from controller.messages import PUBLIC_DATA_MODELS
from controller.studio.pit.floor import Floor
from controller.studio.view import TableView
from controller.tablefold import Step, TableFold, wire
from controller.watch import Reader

T = "tp-01"
J1 = "a1" * 16  # the table's journal
J2 = "b2" * 16  # the journal that replaces it
NOW = 1_795_000_000.0  # 2026-11-19: the status below is a few seconds old
DEEP = b"[" * 3000 + b"]" * 3000  # the probe's ~6 kB value
OPENED = {"round_no": 1, "game": "teen-patti-20-20", "betting_seconds": 15,
          "betting_closes_at": "2026-11-19T08:00:15.000000Z"}  # fmt: skip


def env(kind: str, seq: int, data: dict[str, Any], **extra: Any) -> bytes:
    body = {"schema_version": "3", "table": T, "journal": extra.pop("journal", J1),
            "round": extra.pop("round", f"{T}-000001"), "seq": seq, "session": 1,
            "kind": kind, "at": "2026-11-19T08:00:00.000000Z", "delayed": False, "data": data,
            **extra}  # fmt: skip
    return json.dumps(body).encode()


def status(head: int = 40, **extra: Any) -> bytes:
    body = {"schema_version": "3", "state": "online", "table": T, "journal": J1,
            "session": 1,
            "game": "teen-patti-20-20", "version": "1", "at": "2026-11-19T08:13:15.000000Z",
            "chain_head": {"seq": head, "hash": "0" * 64}, **extra}  # fmt: skip
    return json.dumps(body).encode()


def snapshot(last_seq: int, **fields: Any) -> bytes:
    data = {"round_no": 1, "game": "teen-patti-20-20", "state": "dealing",
            "betting_closes_at": None, "cards": [], "awaiting_rescan": None, "result": None,
            "last_seq": last_seq, **fields}  # fmt: skip
    return env("round_snapshot", last_seq, data)


HALTED = env("round_halted", 41, {"reason": "device lost"})
RESUMED = env("round_resumed", 42, {"by": "pit"})


# -- the fold ---------------------------------------------------------------------------------


def test_a_seq_far_ahead_is_a_rejection_and_the_fold_follows_the_real_table():
    fold = TableFold(T)
    assert isinstance(fold.read("status", status(head=40), NOW), tuple)
    assert isinstance(fold.read("events", env("round_opened", 40, OPENED), NOW), tuple)
    far = fold.read("events", env("round_halted", 10**9, {"reason": "forged"}), NOW)
    assert isinstance(far, Rejection) and far.code == "seq_ahead" and far.seq == 10**9
    assert fold.last_seq == 40 and not fold.round.halted
    step, _ = fold.read("events", HALTED, NOW)  # type: ignore[misc]
    assert step.changed and fold.last_seq == 41 and fold.round.halted
    # The same on the retained snapshot and on results: never the new watermark.
    assert isinstance(fold.read("round", snapshot(10**9, halted=False), NOW), Rejection)
    assert fold.round.halted and fold.last_seq == 41


def test_a_seq_far_ahead_taken_before_the_status_is_dropped_when_the_status_comes():
    fold = TableFold(T)
    fold.read("events", env("round_halted", 10**9, {"reason": "forged"}), NOW)  # anchors
    assert fold.last_seq == 10**9
    fold.read("status", status(head=40), NOW)
    assert fold.last_seq == 40
    step, _ = fold.read("events", RESUMED, NOW)  # type: ignore[misc]
    assert step.changed and fold.last_seq == 42 and not fold.round.halted


def test_late_events_are_new_to_a_feed_but_never_folded_and_repeats_are_nothing():
    fold = TableFold(T)
    fold.read("round", snapshot(41, halted=True), NOW)
    late = fold.read("events", env("round_resumed", 40, {"by": "x"}), NOW)
    assert isinstance(late, tuple) and late[0] == Step(False, True, None, late[0].data)
    assert fold.round.halted  # the snapshot folded seq 40 in already
    first = fold.read("events", RESUMED, NOW)
    assert isinstance(first, tuple) and first[0].changed and not fold.round.halted
    repeat = fold.read("events", RESUMED, NOW)
    assert isinstance(repeat, tuple) and repeat[0] == Step(False, False)
    gap = fold.read("events", env("pit_alert", 45, {"reason": "x"}), NOW)
    assert isinstance(gap, tuple) and gap[0].gap_text == "! gap: events 43..44 not received"


def test_another_journal_id_is_a_new_journal_whose_seq_starts_over_whatever_its_session():
    fold = TableFold(T)
    fold.read("status", status(session=3), NOW)
    fold.read("events", env("round_opened", 40, OPENED), NOW)
    # The new journal's session is higher (a new file counts from 1; here 4): the journal id,
    # not the session, says the seq starts over.
    fold.read("status", status(head=0, session=4, journal=J2), NOW)
    assert fold.last_seq == 0 and fold.journal == J2
    change = fold.journal_change
    assert change is not None and (change.previous, change.previous_last_seq) == (J1, 40)
    assert change.text == (
        "tp-01 started a new journal at 2026-11-19T08:13:15.000000Z; the previous one ended "
        "at seq 40"
    )
    new_round = f"{T}-b2b2b2b2-000001"
    step = fold.read("events", env("round_opened", 1, OPENED, round=new_round, journal=J2), NOW)
    assert isinstance(step, tuple) and step[0].changed and fold.round.round_id == new_round
    # A late message of the journal the table left is refused, not folded as a repeat or a
    # new round: seq 41 of the old journal is not seq 41 of the new one.
    late = fold.read("events", env("round_halted", 2, {"reason": "old"}, journal=J1), NOW)
    assert isinstance(late, Rejection) and late.code == "other_journal"
    assert not fold.round.halted and fold.last_seq == 1
    # The same seq in the new journal is new.
    step = fold.read("events", env("round_halted", 2, {"reason": "new"}, journal=J2), NOW)
    assert isinstance(step, tuple) and step[0].changed and fold.round.halted


def test_the_same_journal_with_a_lower_session_is_an_older_birth_not_a_new_journal():
    fold = TableFold(T)
    fold.read("status", status(session=3), NOW)
    fold.read("events", env("round_opened", 40, OPENED), NOW)
    fold.read("status", status(head=0, session=1), NOW)  # an older birth, retained
    assert fold.last_seq == 40 and fold.journal_change is None
    repeat = fold.read("events", env("round_opened", 40, OPENED), NOW)
    assert isinstance(repeat, tuple) and repeat[0] == Step(False, False)


def test_an_event_of_a_new_journal_after_the_old_ones_last_will_starts_it():
    fold = TableFold(T)
    fold.read("status", status(), NOW)
    fold.read("events", env("round_opened", 40, OPENED), NOW)
    fold.read("status", status(state="offline", reason="connection lost", chain_head=None), NOW)
    step = fold.read("events", env("round_opened", 1, OPENED, journal=J2), NOW)
    assert isinstance(step, tuple) and step[0].changed
    assert fold.journal == J2 and fold.last_seq == 1
    assert fold.journal_change is not None and fold.journal_change.previous_last_seq == 40


def test_times_that_cannot_be_written_in_utc_are_shown_as_sent():
    for at in ("0001-01-01T00:00:00", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-05:00"):
        fold = TableFold(T)
        read = fold.read(
            "events", env("device_status", 1, {"device": "s", "state": "lost"}, at=at), NOW
        )
        assert isinstance(read, tuple) and read[1] is not None
        assert wire(read[1])["at"].startswith(at[:10])
        assert fold.devices["s"].state == "lost"
        assert isinstance(fold.read("status", status(at=at), NOW), tuple)


# -- the three readers, the probe's payloads ------------------------------------------------


def test_the_studio_view_survives_a_deep_value_and_a_seq_far_ahead():
    view = TableView(T, clock=lambda: NOW)
    for channel, topic in (("status", "status"), ("round", "round"), ("events", "events"),
                           ("results", "results")):  # fmt: skip
        assert not view.apply(channel, f"tables/{T}/{topic}", DEEP)  # type: ignore[arg-type]
    assert view.rejections.counts["too_deep"] == 4
    assert view.apply("status", f"tables/{T}/status", status(head=40))
    assert view.apply("events", f"tables/{T}/events", env("round_opened", 40, OPENED))
    assert not view.apply(
        "events", f"tables/{T}/events", env("round_halted", 10**9, {"reason": "x"})
    )
    assert view.rejections.counts["seq_ahead"] == 1
    assert view.apply("events", f"tables/{T}/events", HALTED)
    assert view.apply("events", f"tables/{T}/events", RESUMED)
    assert view.last_seq == 42 and view.kind == "round_resumed"
    assert view.to_wire()["last_seq"] == 42


def test_the_studio_view_without_a_status_anchors_at_the_first_real_seq():
    view = TableView(T, clock=lambda: NOW)
    assert view.apply("events", f"tables/{T}/events", env("round_opened", 41, OPENED))
    assert not view.apply("events", f"tables/{T}/events", env("pit_alert", 10**9, {"reason": "x"}))
    assert view.apply("events", f"tables/{T}/events", RESUMED)
    assert view.last_seq == 42


def test_the_pit_floor_survives_the_probe_and_counts_each_rejection():
    floor = Floor(clock=lambda: NOW)
    assert floor.apply("betting/status", DEEP) == ""
    assert floor.apply(f"tables/{T}/events", DEEP) == ""
    assert floor.apply(f"tables/{T}/status", status(head=40)) == T
    assert floor.apply(f"tables/{T}/events", env("round_halted", 10**9, {"reason": "x"})) == ""
    assert floor.apply(f"tables/{T}/events", HALTED) == T
    view = floor.table_view(T)
    assert view["last_seq"] == 41 and view["halted"] and view["online"]
    assert floor.rejections.counts == {"too_deep": 2, "seq_ahead": 1}
    assert floor.floor_view()["problems"] == 3
    assert "beyond what table" in (floor.last_problem or "")
    assert floor.apply("betting/status", b'{"state":"online"}') == "" and floor.betting == "online"


def test_watch_prints_a_line_for_each_rejection_and_goes_on():
    reader = Reader(f"tables/{T}", TableFold(T), RejectionLog(reader="watch"), clock=lambda: NOW)
    topic = f"tables/{T}/events"
    assert reader.lines(topic, DEEP) == [
        f"! {topic}: rejected: payload nests 3000 levels; at most 24"
    ]
    reader.lines(f"tables/{T}/status", status(head=40))
    [far] = reader.lines(topic, env("round_halted", 10**9, {"reason": "x"}))
    assert far.startswith(f"! {topic}: rejected: seq 1000000000 is beyond")
    assert reader.lines(topic, HALTED) == [
        f"08:00:00.000 #41 round 1 ({T}-000001) HALTED: device lost"
    ]
    assert reader.rejections.counts == {"too_deep": 1, "seq_ahead": 1}
    assert reader.lines(f"tables/{T}/secure/events", DEEP) == []  # not a topic watch reads


# -- hypothesis: any bytes, any JSON, any envelope-shaped object on every channel ------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = ["slot", "hand", "index", "card", "face", "reason", "state", "device", "detail",
          "kind", "secure", "data", "winner", "bets", "cards", "hands", "game", "round_no",
          "window", "decision", "default", "command_id", "attempt", "cause", "last_seq",
          "result", "halted", "awaiting_rescan", "betting_closes_at", "street", "by",
          "betting_seconds", "options", "seconds", "seat", "before_betting", "slots"]  # fmt: skip
times = st.sampled_from(
    ["2026-11-19T08:00:00Z", "0001-01-01T00:00:00", "0001-01-01T00:00:00+01:00",
     "9999-12-31T23:59:59-05:00", "nope"]
)  # fmt: skip
shaped = st.fixed_dictionaries(
    {"schema_version": st.just("3"), "table": st.just(T), "journal": st.sampled_from([J1, J2]),
     "round": st.none() | st.sampled_from([f"{T}-000001", f"{T}-000002"]),
     "seq": st.integers(-2, 2**64), "session": st.integers(-2, 5),
     "kind": st.sampled_from([*PUBLIC_DATA_MODELS, "round_snapshot", "other"]),
     "at": times, "delayed": st.booleans(),
     "data": st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=8),
     "state": st.sampled_from(["online", "offline", "x"]), "game": st.text(max_size=5),
     "version": st.just("1"), "chain_head": st.none() | st.fixed_dictionaries(
         {"seq": st.integers(-1, 2**64), "hash": st.just("0" * 64)})},
    optional={"replayed": st.booleans(), "reason": json_values},
).map(lambda body: json.dumps(body).encode())  # fmt: skip
payloads = st.binary(max_size=512) | json_values.map(lambda v: json.dumps(v).encode()) | shaped
channels = st.sampled_from(["status", "round", "events", "results", "secure"])
hostile = st.lists(st.tuples(channels, payloads), min_size=1, max_size=8)


def _topic(channel: str) -> str:
    return f"tables/{T}/" + ("secure/events" if channel == "secure" else channel)


LATER = NOW + 3600
"""When the real table comes: a forged birth (of another journal, say) at a low head holds
the real table's seq back only until the rate times the time since allows it."""


def _then_the_real_table(apply: Callable[[str, bytes], object], shown: Callable[[], bool]) -> None:
    # Past any seq a forged message could have had admitted (a forged seq the table could
    # have sent is indistinguishable from its own without signatures).
    apply("status", status(head=10_000))
    apply("events", env("round_opened", 10_001, OPENED, round=f"{T}-000777"))
    apply("events", env("round_halted", 10_002, {"reason": "real"}, round=f"{T}-000777"))
    assert shown()


@given(hostile)
def test_no_payload_raises_in_the_studio_view(messages: list[tuple[str, bytes]]):
    clock = [NOW]
    view = TableView(T, secure=True, clock=lambda: clock[0])
    for channel, payload in messages:
        view.apply(channel, _topic(channel), payload)  # type: ignore[arg-type]
        view.to_wire()
    clock[0] = LATER
    _then_the_real_table(
        lambda channel, payload: view.apply(channel, _topic(channel), payload),  # type: ignore[arg-type]
        lambda: view.fold.round_id == f"{T}-000777" and view.fold.halted,
    )


@given(hostile)
def test_no_payload_raises_on_the_pit_floor(messages: list[tuple[str, bytes]]):
    clock = [NOW]
    floor = Floor(clock=lambda: clock[0])
    for channel, payload in [*messages, ("betting", messages[0][1])]:
        topic = "betting/status" if channel == "betting" else _topic(channel)
        floor.apply(topic, payload)
        floor.view()
    clock[0] = LATER
    _then_the_real_table(
        lambda channel, payload: floor.apply(_topic(channel), payload),
        lambda: floor.table_view(T)["round"] == f"{T}-000777" and floor.table_view(T)["halted"],
    )


@given(hostile)
def test_no_payload_raises_in_watch(messages: list[tuple[str, bytes]]):
    clock = [NOW]
    reader = Reader(
        f"tables/{T}", TableFold(T), RejectionLog(reader="watch"), clock=lambda: clock[0]
    )
    out: list[str] = []
    for channel, payload in messages:
        out += reader.lines(_topic(channel), payload)
    clock[0] = LATER
    _then_the_real_table(
        lambda channel, payload: out.extend(reader.lines(_topic(channel), payload)),
        lambda: out[-1].endswith("HALTED: real"),
    )


# -- a new journal, as the three readers show it (issue 22) -----------------------------------

NOTICE = (
    "! tp-01 started a new journal at 2026-11-19T08:13:15.000000Z; the previous one ended at seq 40"
)


def test_the_studio_view_shows_a_new_journal():
    view = TableView(T, clock=lambda: NOW)
    view.apply("status", f"tables/{T}/status", status())
    view.apply("events", f"tables/{T}/events", env("round_opened", 40, OPENED))
    assert view.to_wire()["journal_change"] is None and view.to_wire()["journal"] == J1
    assert view.apply("status", f"tables/{T}/status", status(head=0, journal=J2))
    shown = view.to_wire()
    assert shown["line"] == NOTICE and shown["kind"] == "journal"
    assert shown["journal"] == J2 and shown["journal_change"]["previous_last_seq"] == 40
    assert shown["journal_change"]["text"] == NOTICE.removeprefix("! ")
    assert shown["round"]["id"] is None and shown["last_seq"] == 0  # the old round is gone


def test_the_pit_floor_shows_a_new_journal_and_forgets_the_old_rounds_seqs():
    floor = Floor(clock=lambda: NOW)
    floor.apply(f"tables/{T}/status", status())
    floor.apply(f"tables/{T}/events", env("round_opened", 40, OPENED))
    assert floor.table_view(T)["rounds"] == {f"{T}-000001": [40, 40]}
    floor.apply(f"tables/{T}/status", status(head=0, journal=J2))
    shown = floor.table_view(T)
    assert NOTICE in shown["lines"] and shown["rounds"] == {}
    assert shown["journal"] == J2 and shown["journal_change"]["previous"] == J1


def test_watch_prints_a_new_journal():
    reader = Reader(f"tables/{T}", TableFold(T), RejectionLog(reader="watch"), clock=lambda: NOW)
    reader.lines(f"tables/{T}/status", status())
    reader.lines(f"tables/{T}/events", env("round_opened", 40, OPENED))
    out = reader.lines(f"tables/{T}/status", status(head=0, journal=J2))
    assert out[0] == NOTICE and "ONLINE" in out[1]
