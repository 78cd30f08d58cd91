"""The JSON tag readers' pure parts: URLs, the bounded message parse, the reader core.

The parse survives any byte string (hypothesis: random bytes, nesting, sizes, hostile JSON);
the core turns repeats into one placement, a brief drop into nothing, silence into a removal,
an unknown tag into a refusal naming the deck, and bounds its statuses against a flood.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.errors import UnsupportedUrl
from drivers.json_readers import JsonLinesSpec, MqttReaderSpec
from drivers.presence import PresenceTimes
from drivers.profile import CodeTable, ProfileError
from drivers.reader_json import (
    MAX_MESSAGE,
    REJECTION_INTERVAL,
    ReaderCore,
    ReaderMessage,
    Rejection,
    load_reader_setup,
    parse_message,
)
from drivers.source import CardRead, CardRemoved, DeviceStatus, Misread, parse_url

TABLE = CodeTable(name="test-deck", codes={"04A2B3C4D5E6F7": "As", "04000000000001": "Kd"})
TIMES = PresenceTimes(place_after=0.1, remove_after=1.0)


def msg(uid: str | None = "04A2B3C4D5E6F7", seq: int | None = 1, **extra: Any) -> bytes:
    body: dict[str, Any] = {"device_id": "seat-3", "card_uid": uid, **extra}
    if seq is not None:
        body["seq"] = seq
    return json.dumps(body).encode()


# ---------------------------------------------------------------------- URLs


def test_mqtt_reader_url_reads_every_part() -> None:
    spec = parse_url(
        "mqtt-reader://ops:s%40cret@10.0.0.5:1884/studio/readers/%23?codes=deck.toml"
        "&device=seat-3&cmd=studio/cue/seat-3&place_after_ms=50&remove_after_ms=700&keepalive=3"
        "&status=studio/readers/seat-3/status"
    )
    assert isinstance(spec, MqttReaderSpec)
    assert (spec.host, spec.port, spec.topic) == ("10.0.0.5", 1884, "studio/readers/#")
    assert (spec.username, spec.password) == ("ops", "s@cret")
    assert spec.device == "mqtt-reader://10.0.0.5:1884/studio/readers/#"  # no password
    assert (spec.codes, spec.device_id, spec.cmd_topic) == (
        "deck.toml",
        "seat-3",
        "studio/cue/seat-3",
    )
    assert (spec.place_after_ms, spec.remove_after_ms, spec.keepalive) == (50, 700, 3)
    assert spec.profile == "mqtt-json" and spec.status_topic == "studio/readers/seat-3/status"
    plain = parse_url("mqtt-reader://broker/readers/+")
    assert isinstance(plain, MqttReaderSpec)
    assert (plain.port, plain.place_after_ms, plain.remove_after_ms) == (1883, None, None)


def test_jsonl_url_reads_every_part() -> None:
    spec = parse_url("jsonl+serial:///dev/ttyACM0?baud=9600&cues=1&device=r1")
    assert isinstance(spec, JsonLinesSpec)
    assert (spec.port_url, spec.baud, spec.cues, spec.device_id) == (
        "/dev/ttyACM0",
        9600,
        True,
        "r1",
    )


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("mqtt-reader:///topic", "names the broker"),
        ("mqtt-reader://host/", "1-256 characters"),
        ("mqtt-reader://host/a/%23/b", "last level"),
        ("mqtt-reader://host/a#", "%23"),
        ("mqtt-reader://host/a/b+", "whole level"),
        ("mqtt-reader://host/t?qos=2", "unknown option"),
        ("mqtt-reader://host/t?remove_after_ms=0", "repeat interval"),
        ("mqtt-reader://host/t?place_after_ms=-1", "whole number"),
        ("mqtt-reader://host/t?cmd=a/%23", "no wildcard"),
        ("mqtt-reader://host/t?codes=", "empty"),
        ("mqtt-reader://host:x/t", "not a number"),
        ("mqtt-reader://host/t?keepalive=0", "at least 1"),
        ("jsonl+serial://dev/ttyUSB0", "device path"),
        ("jsonl+serial:///dev/ttyUSB0?cues=yes", "0 or 1"),
        ("jsonl+serial:///dev/ttyUSB0?baud=0", "positive"),
    ],
)
def test_bad_reader_urls_are_refused_saying_why(url: str, words: str) -> None:
    with pytest.raises(UnsupportedUrl) as caught:
        parse_url(url)
    assert words in str(caught.value)
    assert url in str(caught.value) or caught.value.context.get("url") == url


# ---------------------------------------------------------------------- the parse


def test_the_rfid_poker_shape_reads() -> None:
    assert parse_message(msg("04:a2:b3:c4:d5:e6:f7", 2)) == ReaderMessage(
        "seat-3", 2, "04A2B3C4D5E6F7"
    )
    number_id = parse_message(b'{"device_id": 17, "seq": 0, "card_uid": "a1b2c3d4", "rssi": -40}')
    assert number_id == ReaderMessage("17", 0, "A1B2C3D4")
    assert parse_message(msg(None, 3)) == ReaderMessage("seat-3", 3, None)
    error = parse_message(b'{"device_id": "r", "seq": 4, "error": "collision"}')
    assert error == ReaderMessage("r", 4, None, None, "collision")


@pytest.mark.parametrize(
    ("payload", "code", "words"),
    [
        (b"x" * (MAX_MESSAGE + 1), "too_large", "bytes"),
        (b"[" * 50 + b"]" * 50, "too_deep", "nests 50"),
        (b'{"a": "\xff"}', "not_utf8", "byte"),
        (b"{", "not_json", "not JSON"),
        (b'{"device_id": "r", "seq": NaN, "card_uid": null}', "not_json", "NaN"),
        (b"[1, 2]", "not_object", "array"),
        (b'{"seq": 1, "card_uid": null}', "invalid", "'device_id' is missing"),
        (b'{"device_id": "r", "seq": -1, "card_uid": null}', "invalid", "'seq'"),
        (b'{"device_id": "r", "seq": true, "card_uid": null}', "invalid", "'seq'"),
        (b'{"device_id": "r", "seq": 1}', "invalid", "'card_uid' is missing"),
        (b'{"device_id": "r", "seq": 1, "card_uid": "04A2"}', "invalid", "4-, 7- or 10-byte"),
        (b'{"device_id": "r", "seq": 1, "card_uid": ["04A2B3C4"]}', "invalid", "array"),
        (b'{"device_id": {"x": 1}, "seq": 1, "card_uid": null}', "invalid", "object"),
        (b'{"device_id": "", "seq": 1, "card_uid": null}', "invalid", "printable"),
        (b'{"device_id": "r", "seq": 99999999999999999999, "card_uid": null}', "invalid", "seq"),
    ],
)
def test_hostile_messages_are_refused_naming_what(payload: bytes, code: str, words: str) -> None:
    refused = parse_message(payload)
    assert isinstance(refused, Rejection)
    assert refused.code == code and words in refused.reason


@given(st.binary(max_size=2 * MAX_MESSAGE))
def test_any_bytes_are_a_message_or_a_rejection(payload: bytes) -> None:
    assert isinstance(parse_message(payload), ReaderMessage | Rejection)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=30,
)


@given(
    JSON,
    st.sampled_from(["device_id", "seq", "card_uid", "antenna", "error", "other"]),
    st.integers(min_value=0, max_value=200),
)
def test_any_json_in_any_member_is_a_message_or_a_rejection(
    value: Any, member: str, nesting: int
) -> None:
    body: dict[str, Any] = {"device_id": "r", "seq": 1, "card_uid": "04A2B3C4D5E6F7"}
    body[member] = value
    payload = json.dumps(body).encode()
    nested = b"[" * nesting + payload + b"]" * nesting
    for candidate in (payload, nested, payload[: len(payload) // 2]):
        parsed = parse_message(candidate)
        assert isinstance(parsed, ReaderMessage | Rejection)
        if isinstance(parsed, ReaderMessage) and parsed.uid is not None:
            assert len(parsed.uid) in (8, 14, 20)


@given(st.lists(st.binary(max_size=200), max_size=30), st.lists(st.floats(0, 5), max_size=30))
def test_the_core_takes_any_stream_and_never_invents_a_card(
    payloads: list[bytes], gaps: list[float]
) -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    now = 0.0
    for payload, gap in zip(payloads, gaps + [0.0] * len(payloads), strict=False):
        now += gap
        for read in core.message(payload, now) + core.due(now):
            if isinstance(read, CardRead):
                assert read.value in TABLE.codes.values()


# ---------------------------------------------------------------------- the core


def test_repeats_are_one_placement_and_silence_a_removal() -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    reads = []
    for seq, at in enumerate([0.0, 0.05, 0.10, 0.15, 0.20]):
        reads += core.message(msg(seq=seq + 1), at)
    assert [type(r) for r in reads] == [CardRead]
    assert reads[0].value == "As"  # type: ignore[union-attr]
    assert core.due(1.1) == []  # 0.9 s of silence: no removal yet
    (removed,) = core.due(1.25)
    assert isinstance(removed, CardRemoved) and (removed.value, removed.position) == ("As", None)
    assert removed.at == pytest.approx(1.2)
    assert core.stats.placed == 1 and core.stats.removed == 1


def test_a_brief_drop_is_no_removal_and_no_second_read() -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    reads = core.message(msg(seq=1), 0.0) + core.message(msg(seq=2), 0.1)
    reads += core.due(0.8) + core.message(msg(seq=3), 0.9) + core.due(1.5)
    assert [type(r) for r in reads] == [CardRead]


def test_an_unknown_tag_is_refused_naming_the_deck() -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    reads = core.message(msg("04FFFFFFFFFFFF", 1), 0.0) + core.message(
        msg("04FFFFFFFFFFFF", 2), 0.2
    )
    (misread,) = reads
    assert isinstance(misread, Misread) and misread.cause == "unknown_code"
    assert "04FFFFFFFFFFFF" in misread.detail and "test-deck" in misread.detail
    assert core.due(5.0) == []  # its leaving is no card's removal


def test_two_tags_at_once_are_two_reads_in_order() -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    reads = []
    for seq in range(4):
        at = seq * 0.05
        reads += core.message(msg("04A2B3C4D5E6F7", 2 * seq), at)
        reads += core.message(msg("04000000000001", 2 * seq + 1), at + 0.01)
    assert [r.value for r in reads if isinstance(r, CardRead)] == ["As", "Kd"]


def test_seq_repeated_is_dropped_and_seq_back_is_a_restart_said_once() -> None:
    core = ReaderCore(TABLE, PresenceTimes(0.0, 1.0), name="t")
    assert [type(r) for r in core.message(msg(seq=7), 0.0)] == [CardRead]
    assert core.message(msg("04000000000001", seq=7), 0.1) == []  # a repeat of seq 7: dropped
    assert core.stats.duplicates == 1
    restart = core.message(msg("04000000000001", seq=1), 0.2)
    assert isinstance(restart[0], DeviceStatus) and restart[0].state == "reader_restarted"
    assert "from 7 to 1" in restart[0].detail
    assert [r.value for r in restart[1:] if isinstance(r, CardRead)] == ["Kd"]
    assert core.message(msg(seq=12), 0.3) == [] and core.stats.gaps == 10


def test_rejections_are_statuses_bounded_against_a_flood() -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    first = core.message(b"garbage", 0.0)
    assert len(first) == 1 and isinstance(first[0], DeviceStatus)
    assert first[0].state == "reader_rejected" and first[0].detail.startswith("not_json")
    for index in range(500):
        assert core.message(b"garbage", 0.001 * index) == []
    later = core.message(b"garbage", REJECTION_INTERVAL + 0.1)
    assert "500 more of this kind" in later[0].detail  # type: ignore[union-attr]
    assert core.stats.rejected["not_json"] == 502
    # A card between the garbage is still read.
    assert [type(r) for r in core.message(msg(seq=1, uid="04000000000001"), 11.0)] == []
    assert [type(r) for r in core.message(msg(seq=2, uid="04000000000001"), 11.2)] == [CardRead]


def test_retained_messages_and_other_readers_are_not_taken() -> None:
    core = ReaderCore(TABLE, PresenceTimes(0.0, 1.0), device_id="seat-1", name="t")
    retained = core.message(msg(seq=1), 0.0, retained=True)
    assert [r.state for r in retained if isinstance(r, DeviceStatus)] == ["reader_rejected"]
    assert core.message(msg(seq=1), 0.1) == []  # device seat-3, the URL takes seat-1
    assert core.stats.other_devices == 1 and core.stats.retained == 1


def test_a_link_outage_removes_nothing() -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    core.message(msg(seq=1), 0.0)
    core.message(msg(seq=2), 0.2)
    core.link_lost(0.5)
    core.link_back(30.0)  # the link was down 30 s: no sighting meant nothing
    assert core.due(30.6) == []  # 0.3 + 0.3 s of silence on a working link
    (removed,) = core.due(30.8)  # a whole remove_after of it
    assert isinstance(removed, CardRemoved) and removed.at == pytest.approx(30.7)


def test_the_field_empty_message_and_an_error_word() -> None:
    core = ReaderCore(TABLE, PresenceTimes(0.0, 1.0), name="t")
    core.message(msg(seq=1), 0.0)
    assert core.message(msg(None, seq=2), 0.5) == []
    (misread,) = core.message(b'{"device_id": "seat-3", "seq": 3, "error": "collision"}', 0.6)
    assert isinstance(misread, Misread) and misread.cause == "device"
    assert "collision" in misread.detail


def test_the_mqtt_json_profile_gives_the_table_and_times_the_url_overrides() -> None:
    table, times = load_reader_setup()
    assert len(table.codes) == 53 and table.name == "rfid-demo-deck"
    assert (times.place_after, times.remove_after, times.repeats) == (0.1, 1.0, True)
    tiles, quick = load_reader_setup("mqtt-json", "codes/rfid-demo-tiles.toml", 0, 250)
    assert tiles.codes_per_card == 2
    assert (quick.place_after, quick.remove_after) == (0.0, 0.25)


def test_a_profile_of_another_family_is_refused_naming_the_field() -> None:
    with pytest.raises(ProfileError) as caught:
        load_reader_setup("pepper-c1")
    assert caught.value.context["field"] == "family"
    assert "mqtt-json" in str(caught.value)


def test_the_readers_own_offline_stops_its_latch_and_online_asks_again() -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    core.message(msg(seq=1), 0.0)
    core.message(msg(seq=2), 0.2)
    assert core.reader_status(b"online", 0.3) == []  # no change: nothing said
    (lost,) = core.reader_status(b"offline", 0.5)
    assert isinstance(lost, DeviceStatus) and lost.state == "lost"
    assert core.next_deadline() is None and core.due(20.0) == []  # its silence says nothing
    back, away = core.reader_status(b" Online\n", 20.5)
    assert isinstance(back, DeviceStatus) and back.state == "recovered"
    assert "20.00s" in back.detail
    assert isinstance(away, Misread) and away.cause == "away"
    assert core.due(21.15) == []  # 0.3 + 0.65 s of silence on a working link
    (removed,) = core.due(21.25)  # 0.3 + 0.75: the whole remove_after
    assert isinstance(removed, CardRemoved) and removed.value == "As"
    (refused,) = core.reader_status(b"sleeping", 22.0)
    assert isinstance(refused, DeviceStatus) and refused.state == "reader_rejected"


@given(st.binary(max_size=64), st.floats(0, 100))
def test_any_status_payload_is_a_change_nothing_or_a_rejection(payload: bytes, at: float) -> None:
    core = ReaderCore(TABLE, TIMES, name="t")
    for read in core.reader_status(payload, at):
        assert isinstance(read, DeviceStatus)
        assert read.state in ("lost", "reader_rejected")


def test_the_timers_hand_over_a_deadline_set_in_the_past_without_holding_the_loop() -> None:
    """A read timed well before the timer task last listened (a line that waited in the port
    while the loop was busy) sets a deadline far past: the hold-up is counted once, then the
    removal is handed over. It looped on the hold-up before, never awaiting: the event loop
    held for good (a fresh-clone suite's ``test_json_reader_contract[pty-everything]``, stuck
    300 s in ``run_timers``)."""
    import asyncio
    import threading
    import time

    from drivers.json_readers import parse_json_reader_url
    from drivers.source import DriverSettings
    from drivers.tag_reader import STALL, TagReaderSource

    url = "jsonl+serial:///dev/null?place_after_ms=0&remove_after_ms=300"
    source = TagReaderSource(url, parse_json_reader_url(url, "jsonl+serial"), DriverSettings())
    assert source.core.table is not None  # the demo deck's code table
    two_of_clubs = source.core.table.codes_of("2c")[0]
    handed: list[object] = []

    async def run() -> None:
        handed.extend(source.core.message(msg(two_of_clubs), time.monotonic() - 4 * STALL))
        timers = asyncio.create_task(source.run_timers())  # listening from now
        async with asyncio.timeout(5):
            while not any(isinstance(read, CardRemoved) for read in handed):
                handed.append(await source.take(is_open=True))
        timers.cancel()

    worker = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the timer task held the event loop"
    assert [(type(r).__name__, getattr(r, "value", None)) for r in handed] == [
        ("CardRead", "2c"),
        ("CardRemoved", "2c"),
    ]
