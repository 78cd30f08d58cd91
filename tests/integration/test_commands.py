"""Inbound commands: parsing (pure), the router on a real journal, and end to end through a
real Mosquitto (command in, answer out through the journal and the outbox)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.commands import (
    ROUTES,
    Answer,
    Command,
    CommandRouter,
    Refusal,
    StatusWatcher,
    parse_command,
)
from controller.errors import TablectlError
from controller.inbound import Rejection
from controller.journal import Journal
from controller.messages import Topics
from controller.mqtt.settings import MqttSettings

TOPICS = Topics(table="tp-9")


def settings_for(url: str, protocol: str = "5", **extra: Any) -> MqttSettings:
    return MqttSettings(
        urls=[url],
        protocol=protocol,
        reconnect_min_seconds=0.05,
        reconnect_max_seconds=0.3,
        publish_timeout=2.0,
        connect_timeout=3.0,
        **extra,
    )


# --- parsing (pure) ---------------------------------------------------------------------------


def body(**fields: Any) -> bytes:
    return json.dumps({"command_id": "c-1", "round": None, **fields}).encode()


def test_each_topic_maps_to_its_role_and_name() -> None:
    cases = {
        "decision": (body(window="w1", decision={"action": "call"}), "betting", "decision"),
        "replay": (body(from_seq=3, to_seq=None), "betting", "replay"),
        "pit/resume": (body(), "pit", "resume"),
        "pit/void": (body(reason="dealer error"), "pit", "void"),
        "pit/replay": (body(from_seq=1, to_seq=9), "pit", "replay"),
    }
    for suffix, (payload, role, name) in cases.items():
        parsed = parse_command(TOPICS, TOPICS.cmd(suffix), payload)
        assert isinstance(parsed, Command), (suffix, parsed)
        assert (parsed.role, parsed.name, parsed.command_id) == (role, name, "c-1")
        assert "command_id" not in parsed.data and "round" not in parsed.data
    decision = parse_command(TOPICS, TOPICS.cmd("decision"), cases["decision"][0])
    assert isinstance(decision, Command)
    assert decision.data == {"window": "w1", "decision": {"action": "call"}}


def test_a_command_on_the_wrong_role_topic_is_refused() -> None:
    refused = parse_command(TOPICS, TOPICS.cmd("void"), body(reason="x"))
    assert isinstance(refused, Refusal)
    assert refused.role == "betting"
    assert refused.reason.startswith("a betting-system credential cannot void a round")
    refused = parse_command(TOPICS, TOPICS.cmd("pit/decision"), body(window="w", decision={}))
    assert isinstance(refused, Refusal)
    assert refused.role == "pit"
    assert "a pit-boss credential cannot send decisions" in refused.reason
    unknown = parse_command(TOPICS, TOPICS.cmd("explode"), body())
    assert isinstance(unknown, Refusal)
    assert "unknown command topic tables/tp-9/cmd/explode" in unknown.reason


@pytest.mark.parametrize(
    ("suffix", "payload", "needle"),
    [
        ("decision", body(decision={}), "field 'window': Field required"),
        ("decision", body(window="w", decision="call"), "field 'decision'"),
        ("pit/void", body(), "field 'reason': Field required"),
        ("pit/void", body(reason="x", extra=1), "field 'extra': Extra inputs are not permitted"),
        ("replay", body(from_seq=0), "field 'from_seq'"),
        ("replay", body(from_seq=5, to_seq=2), "field 'to_seq' (2) is below 'from_seq' (5)"),
        ("pit/resume", b'{"round": null}', "field 'command_id': Field required"),
        ("pit/resume", b"not json", "is not JSON"),
        ("pit/resume", b"[1, 2]", "must be a JSON object, not a JSON array"),
        ("pit/resume", b"[" * 3000 + b"]" * 3000, "payload nests 3000 levels; at most 24"),
        ("pit/resume", b'{"command_id": "\xff"}', "payload is not UTF-8 (byte 16)"),
        ("pit/resume", b'{"command_id": "c", "x": NaN}', "NaN is not a JSON number"),
        ("replay", body(from_seq=2**63), "integer 9223372036854775808 is beyond"),
        ("pit/void", body(reason="x" * 70_000), "payload is 70050 bytes; at most 65536"),
    ],
)
def test_malformed_commands_are_refused_naming_the_field(
    suffix: str, payload: bytes, needle: str
) -> None:
    refused = parse_command(TOPICS, TOPICS.cmd(suffix), payload)
    assert isinstance(refused, Refusal)
    assert needle in refused.reason
    assert TOPICS.cmd(suffix) in refused.reason


HOSTILE_COMMANDS = [
    b"",
    b"null",
    b"{}",
    b"[" * 3000 + b"]" * 3000,
    b'{"command_id": "' + b"[" * 40 + b'", "x": ' + b"{" * 3000 + b"}" * 3000 + b"}",
    b"\xff\xfe",
    b'{"command_id": "c", "from_seq": 1e999}',
    b'{"command_id": "c", "from_seq": ' + b"9" * 5000 + b"}",
    b'{"command_id": "c\\ud800", "reason": "x"}',
    b'{"command_id": 5, "window": [], "decision": "x"}',
]

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    suffix=st.sampled_from([*ROUTES, "pit", "explode", ""]),
    payload=st.binary(max_size=200)
    | st.sampled_from(HOSTILE_COMMANDS)
    | JSON_VALUES.map(lambda value: json.dumps(value).encode())
    | st.dictionaries(st.sampled_from(["command_id", "round", "window", "decision", "from_seq",
                                       "to_seq", "reason", "operator", "card", "slot", "deck",
                                       "device", "ok", "missing", "duplicated"]), JSON_VALUES)
    .map(lambda value: json.dumps(value).encode()),
)  # fmt: skip
def test_no_payload_makes_the_command_parse_raise(suffix: str, payload: bytes) -> None:
    topic = f"{TOPICS.cmd_root}/{suffix}"
    parsed = parse_command(TOPICS, topic, payload)
    assert isinstance(parsed, Command | Refusal)
    if isinstance(parsed, Refusal):
        assert parsed.reason and parsed.rejection is not None
        assert topic in parsed.reason


def test_a_refused_command_keeps_its_id_when_it_can_be_read() -> None:
    refused = parse_command(TOPICS, TOPICS.cmd("pit/void"), body(reason=5))
    assert isinstance(refused, Refusal) and refused.command_id == "c-1"
    assert refused.rejection == Rejection("invalid", refused.reason)
    deep = parse_command(TOPICS, TOPICS.cmd("pit/void"), b"[" * 3000 + b"]" * 3000)
    assert isinstance(deep, Refusal) and deep.command_id is None
    assert deep.rejection is not None and deep.rejection.code == "too_deep"


def test_response_topic_must_stay_in_the_roles_reply_tree() -> None:
    ok = parse_command(
        TOPICS, TOPICS.cmd("pit/resume"), body(), response_topic="tables/tp-9/reply/pit/cli-1"
    )
    assert isinstance(ok, Command)
    for bad in (
        "tables/tp-9/reply/betting/x",  # another role's replies
        "tables/tp-9/events",  # forging the table's own events
        "tables/tp-1/reply/pit/x",  # another table
        "tables/tp-9/reply/pit/+",
    ):
        refused = parse_command(TOPICS, TOPICS.cmd("pit/resume"), body(), response_topic=bad)
        assert isinstance(refused, Refusal), bad
        assert "is not under tables/tp-9/reply/pit/" in refused.reason


# --- the router on a real journal (no network) ------------------------------------------------


class Recorder:
    def __init__(self, answer: Answer | None = None, delay: float = 0.0) -> None:
        self.calls: list[Command] = []
        self.answer = answer or Answer(True, "", {"ok": 1})
        self.delay = delay

    async def __call__(self, command: Command) -> Answer:
        self.calls.append(command)
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.answer


def make_router(journal: Journal, handler: Any, *, timeout: float = 2.0) -> CommandRouter:
    return CommandRouter(
        settings_for("mqtt://127.0.0.1:1"), "tp-9", journal, handler, handler_timeout=timeout
    )


async def test_router_journals_command_and_answer(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite")
    handler = Recorder(Answer(True, "applied", {"x": 1}))
    router = make_router(journal, handler)
    entry = await router.handle(
        TOPICS.cmd("decision"),
        body(window="w1", decision={"action": "fold"}, round="tp-9-000001"),
        response_topic="tables/tp-9/reply/betting/bs-1",
        correlation_data=b"\x00\x01",
    )
    kinds = [e.kind for e in journal.entries()]
    assert kinds == ["command_received", "command_answered"]
    received = journal.get(1)
    assert received is not None
    assert received.round_id is None  # table-level: never disturbs the round snapshot
    assert received.body == {
        "command_id": "c-1",
        "role": "betting",
        "name": "decision",
        "round": "tp-9-000001",
        "data": {"window": "w1", "decision": {"action": "fold"}},
    }
    assert entry.body == {
        "command_id": "c-1",
        "role": "betting",
        "name": "decision",
        "accepted": True,
        "reason": "applied",
        "data": {"x": 1},
        "response_topic": "tables/tp-9/reply/betting/bs-1",
        "correlation_data": "AAE=",
    }
    assert [c.round_id for c in handler.calls] == ["tp-9-000001"]
    journal.close()


async def test_repeated_command_id_gets_the_first_answer_even_after_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal.open(path)
    handler = Recorder(Answer(False, "window closed"))
    router = make_router(journal, handler)
    payload = body(window="w1", decision={"action": "call"})
    first = await router.handle(TOPICS.cmd("decision"), payload)
    again = await router.handle(TOPICS.cmd("decision"), payload, correlation_data=b"new")
    assert len(handler.calls) == 1
    assert again.body["duplicate"] is True
    assert (again.body["accepted"], again.body["reason"]) == (False, "window closed")
    assert again.body["correlation_data"] == "bmV3"  # the repeat's own correlation data
    # The same id from the other role is another command.
    await router.handle(TOPICS.cmd("pit/resume"), body())
    assert len(handler.calls) == 2
    journal.close()

    journal = Journal.open(path)
    handler2 = Recorder()
    router2 = make_router(journal, handler2)
    third = await router2.handle(TOPICS.cmd("decision"), payload)
    assert handler2.calls == []
    assert third.body["duplicate"] is True
    assert third.body["reason"] == first.body["reason"]
    journal.close()


async def test_concurrent_repeats_call_the_handler_once(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite")
    handler = Recorder(delay=0.2)
    router = make_router(journal, handler)
    payload = body(from_seq=1)
    answers = await asyncio.gather(
        *(router.handle(TOPICS.cmd("pit/replay"), payload) for _ in range(3))
    )
    assert len(handler.calls) == 1
    assert sorted(bool(a.body.get("duplicate")) for a in answers) == [False, True, True]
    journal.close()


async def test_hostile_commands_are_answered_journalled_and_counted(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite")
    handler = Recorder()
    router = make_router(journal, handler)
    for payload in HOSTILE_COMMANDS:
        entry = await router.handle(TOPICS.cmd("pit/resume"), payload)
        assert entry.kind == "command_answered" and entry.body["accepted"] is False
        assert TOPICS.cmd("pit/resume") in entry.body["reason"]
    assert handler.calls == []
    assert router.rejections.total == len(HOSTILE_COMMANDS)
    assert router.rejections.counts["too_deep"] == 2
    assert {"not_json", "not_object", "not_utf8", "out_of_range", "invalid"} <= set(
        router.rejections.counts
    )
    # The table still runs commands afterwards.
    ok = await router.handle(TOPICS.cmd("pit/resume"), body(command_id="r-9"))
    assert ok.body["accepted"] is True and len(handler.calls) == 1
    journal.close()


async def test_invalid_command_does_not_burn_its_id(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite")
    handler = Recorder()
    router = make_router(journal, handler)
    bad = await router.handle(TOPICS.cmd("pit/void"), body())
    assert bad.body["accepted"] is False and "'reason'" in bad.body["reason"]
    good = await router.handle(TOPICS.cmd("pit/void"), body(reason="fixed"))
    assert good.body["accepted"] is True
    assert [c.data for c in handler.calls] == [{"reason": "fixed"}]
    journal.close()


async def test_handler_timeout_and_errors_refuse(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite")

    async def slow(command: Command) -> Answer:
        await asyncio.sleep(5)
        return Answer(True)

    router = make_router(journal, slow, timeout=0.1)
    answer = await router.handle(TOPICS.cmd("pit/resume"), body(command_id="slow"))
    assert answer.body["accepted"] is False
    assert answer.body["reason"] == "the controller did not decide within 0.1 s"

    async def refusing(command: Command) -> Answer:
        raise TablectlError("no round is halted", table="tp-9")

    router = make_router(journal, refusing)
    answer = await router.handle(TOPICS.cmd("pit/resume"), body(command_id="r2"))
    assert (answer.body["accepted"], answer.body["reason"]) == (False, "no round is halted")

    async def broken(command: Command) -> Answer:
        raise KeyError("bug")

    router = make_router(journal, broken)
    answer = await router.handle(TOPICS.cmd("pit/resume"), body(command_id="r3"))
    assert answer.body["reason"] == "internal error: KeyError"
    journal.close()


# --- end to end through Mosquitto -------------------------------------------------------------


def response_properties(topic: str, correlation: bytes) -> Properties:
    """MQTT v5 PUBLISH properties asking for the answer on ``topic``."""
    properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.ResponseTopic = topic
    properties.CorrelationData = correlation
    return properties


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_command_in_answer_out_through_a_real_broker(
    mosquitto_session: Any, journal: Journal, make_publisher: Any, protocol: str
) -> None:
    broker = mosquitto_session
    table = f"cmd-{uuid.uuid4().hex[:6]}"
    topics = Topics(table=table)
    settings = settings_for(broker.url, protocol)
    handler = Recorder(Answer(True, "", {"applied": True}))
    router = CommandRouter(settings, table, journal, handler, handler_timeout=2.0)
    v5 = protocol == "5"
    version = aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311
    async with (
        asyncio.timeout(30),
        make_publisher(settings, table, journal, version="t", connect_within=5),
        asyncio.TaskGroup() as group,
    ):
        router_task = group.create_task(router.run(), name="commands")
        async with asyncio.timeout(5):
            await router.subscribed.wait()
        async with aiomqtt.Client(
            broker.host, broker.port, identifier=f"bs-{uuid.uuid4().hex[:6]}", protocol=version
        ) as betting:
            reply = f"{topics.reply('betting')}/bs-1" if v5 else topics.reply("betting")
            await betting.subscribe(reply, qos=1)
            await betting.subscribe(topics.events, qos=1)
            properties = response_properties(reply, b"corr-1") if v5 else None
            await betting.publish(
                topics.cmd("decision"),
                body(command_id="d-1", window="w1", decision={"action": "call"}),
                qos=1,
                properties=properties,
            )
            # A betting credential trying to void: refused, answered on reply/betting.
            await betting.subscribe(topics.reply("betting"), qos=1)
            await betting.publish(topics.cmd("void"), body(command_id="v-1", reason="x"), qos=1)
            answers: dict[str, dict[str, Any]] = {}
            events: list[dict[str, Any]] = []
            correlations: dict[str, bytes | None] = {}
            async with asyncio.timeout(10):
                async for message in betting.messages:
                    envelope = json.loads(message.payload)
                    if str(message.topic) == topics.events:
                        events.append(envelope)
                    else:
                        answers[envelope["data"]["command_id"]] = envelope
                        correlations[envelope["data"]["command_id"]] = getattr(
                            message.properties, "CorrelationData", None
                        )
                    if len(answers) == 2 and len(events) >= 3:
                        break
        await router.stop()
        await router_task

    decision = answers["d-1"]["data"]
    assert decision["accepted"] is True
    assert decision["data"] == {"applied": True}
    assert answers["d-1"]["kind"] == "command_answered"
    if v5:
        assert correlations["d-1"] == b"corr-1"
    refused = answers["v-1"]["data"]
    assert refused["accepted"] is False
    assert refused["reason"].startswith("a betting-system credential cannot void a round")
    assert [c.name for c in handler.calls] == ["decision"]
    # events carries the public views only: who sent what, and the verdict.
    received = next(e for e in events if e["kind"] == "command_received")
    assert received["data"] == {"command_id": "d-1", "role": "betting", "name": "decision"}
    answered = [e["data"] for e in events if e["kind"] == "command_answered"]
    assert {"command_id": "d-1", "role": "betting", "name": "decision", "accepted": True,
            "reason": ""} in answered  # fmt: skip
    assert all("data" not in a and "correlation_data" not in a for a in answered)


async def test_status_watcher_follows_the_betting_systems_presence(
    mosquitto_session: Any, tmp_path: Path
) -> None:
    broker = mosquitto_session
    topic = f"betting-{uuid.uuid4().hex[:6]}/status"
    table = f"st-{uuid.uuid4().hex[:6]}"
    settings = settings_for(broker.url, betting_status_topic=topic)
    watcher = StatusWatcher(settings, table)
    assert watcher.topic == topic
    assert (watcher.state, watcher.online.is_set()) == ("unknown", False)
    journal = Journal.open(tmp_path / "j.sqlite")
    router = CommandRouter(settings, table, journal, Recorder(), handler_timeout=1, status=watcher)
    offline = json.dumps({"state": "offline"})
    async with asyncio.timeout(30), asyncio.TaskGroup() as group:
        # The betting system (a real process with a Last Will) is up before the controller:
        # the retained message tells.
        betting = await asyncio.create_subprocess_exec(
            "/usr/bin/mosquitto_sub", "-h", broker.host, "-p", str(broker.port),
            "-t", f"{topic}/ignored", "--will-topic", topic, "--will-payload", offline,
            "--will-qos", "1", "--will-retain",
        )  # fmt: skip
        try:
            async with aiomqtt.Client(broker.host, broker.port) as other:
                await other.publish(topic, b'{"state":"online"}', qos=1, retain=True)
                task = group.create_task(router.run(), name="commands")
                async with asyncio.timeout(5):
                    await watcher.online.wait()
                assert watcher.state == "online"
                # Garbage is ignored, the state stays.
                watcher.changed.clear()
                await other.publish(topic, b"nonsense", qos=1)
                await other.publish(topic, b'{"state":"online"}', qos=1)
                await asyncio.sleep(0.2)
                assert watcher.state == "online" and not watcher.changed.is_set()
            # The betting system dies: the broker publishes its Last Will.
            betting.kill()
            async with asyncio.timeout(10):
                await watcher.changed.wait()
            assert (watcher.state, watcher.online.is_set()) == ("offline", False)
        finally:
            if betting.returncode is None:
                betting.kill()
            await betting.wait()
        await router.stop()
        await task
    journal.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    payload=st.binary(max_size=200)
    | st.sampled_from(HOSTILE_COMMANDS)
    | JSON_VALUES.map(lambda value: json.dumps(value).encode())
    | st.dictionaries(st.just("state"), JSON_VALUES).map(lambda v: json.dumps(v).encode())
)
def test_no_payload_makes_the_status_watcher_raise(payload: bytes) -> None:
    watcher = StatusWatcher(settings_for("mqtt://127.0.0.1:1", betting_status_topic="b/s"), "t")
    watcher.feed(b'{"state": "online"}')
    watcher.feed(payload)  # the probe's 3,000-deep retained value raised RecursionError here
    if payload not in (b'{"state": "offline"}', b'{"state":"offline"}'):
        assert watcher.state == "online" or json.loads(payload).get("state") == "offline"
    watcher.feed(b'{"state": "online"}')
    assert watcher.state == "online"


def test_a_rejected_status_is_counted_and_leaves_the_state() -> None:
    watcher = StatusWatcher(settings_for("mqtt://127.0.0.1:1", betting_status_topic="b/s"), "t")
    watcher.feed(b'{"state": "offline"}')
    for payload in (b"[" * 3000 + b"]" * 3000, b'{"state": "up"}', b"", b"\xff"):
        watcher.feed(payload)
    assert watcher.state == "offline"
    assert dict(watcher.rejections.counts) == {"too_deep": 1, "invalid": 1, "not_json": 1,
                                                "not_utf8": 1}  # fmt: skip


async def test_status_watcher_on_its_own_connection(mosquitto_session: Any) -> None:
    broker = mosquitto_session
    topic = f"betting-{uuid.uuid4().hex[:6]}/status"
    settings = settings_for(broker.url, betting_status_topic=topic)
    watcher = StatusWatcher(settings, "tp-own")
    async with asyncio.timeout(20), asyncio.TaskGroup() as group:
        task = group.create_task(watcher.run(), name="betting-status")
        async with aiomqtt.Client(broker.host, broker.port) as betting:
            await betting.publish(topic, b'{"state":"online"}', qos=1, retain=True)
            await watcher.online.wait()
            watcher.changed.clear()
            await betting.publish(topic, b'{"state":"offline"}', qos=1, retain=True)
            await watcher.changed.wait()
        assert watcher.state == "offline"
        await watcher.stop()
        await task
    with pytest.raises(TablectlError, match="no betting status topic"):
        StatusWatcher(settings_for(broker.url, betting_status_topic=None), "t")
