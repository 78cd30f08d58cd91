"""The simulated betting system against a real Mosquitto, with a fake table and router.

The fake table publishes real :class:`controller.messages.Envelope` ``decision_open`` events;
the fake command router reads ``cmd/decision`` and answers on ``reply/betting``.
"""

from __future__ import annotations

import asyncio
import functools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import aiomqtt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.journal.entries import DecisionOpenData
from controller.messages import ChainHead, Envelope, StatusMessage
from simulators.betting import BettingPolicy, BettingStats, run_simulated_betting
from tests.conftest import MosquittoBroker

TABLE = "sim-1"
BASE = f"tables/{TABLE}"
ROUND = f"{TABLE}-000007"
JOURNAL = "c3" * 16
"""The journal id the fake table's messages name."""


def envelope_of(
    seq: int, kind: str, data: dict[str, Any], *, round_id: str = ROUND, table: str = TABLE
) -> bytes:
    return Envelope(
        table=table,
        journal=JOURNAL,
        round=round_id,
        seq=seq,
        session=1,
        kind=kind,
        at=datetime.now(UTC),
        data=data,
    ).to_bytes()


envelope = envelope_of


def answer_to(table: str, body: dict[str, Any], *, seq: int) -> bytes:
    """The fake router's answer: the mulligan decision is accepted, any other refused."""
    refused = body["window"] != "mulligan"
    return Envelope(
        table=table,
        journal=JOURNAL,
        round=body["round"],
        seq=seq,
        session=1,
        kind="command_answered",
        at=datetime.now(UTC),
        data={
            "command_id": body["command_id"],
            "role": "betting",
            "name": "decision",
            "accepted": not refused,
            "reason": "not seat1's turn" if refused else "",
        },
    ).to_bytes()


async def publish_windows(
    broker: MosquittoBroker,
    events: str,
    mulligan: dict[str, Any],
    action: dict[str, Any],
    late: dict[str, Any],
) -> None:
    """The fake table's events: round 7 opens; the mulligan window (twice), garbage, an
    action window and a window already closed."""
    table = events.split("/")[1]
    envelope = functools.partial(envelope_of, table=table)
    async with aiomqtt.Client(broker.host, broker.port, timeout=5) as fake_table:
        await fake_table.publish(events, envelope(1, "round_opened", {"round_no": 7}), qos=1)
        await fake_table.publish(events, envelope(2, "decision_open", mulligan), qos=1)
        await fake_table.publish(events, envelope(2, "decision_open", mulligan), qos=1)
        await fake_table.publish(events, b"not json", qos=1)
        await fake_table.publish(events, envelope(3, "decision_open", action), qos=1)
        await fake_table.publish(events, envelope(4, "decision_open", late), qos=1)


def check_commands(
    commands: list[tuple[dict[str, Any], Any]],
    policy: BettingPolicy,
    action: dict[str, Any],
    *,
    v5: bool,
    base: str,
) -> None:
    """The two decisions sent: the mulligan (v5: with a response topic) and the action.

    In either order: each simulated player thinks a random time (issue 25).
    """
    (first, first_props), (second, _) = sorted(commands, key=lambda c: c[0]["window"] != "mulligan")
    assert first == {
        "command_id": first["command_id"],
        "round": ROUND,
        "window": "mulligan",
        "decision": {"choice": "mulligan"},
    }
    assert second["window"] == "action-1"
    assert second["decision"] == policy.decide({**action, "round": ROUND})
    assert first["command_id"] != second["command_id"]
    if v5:
        assert first_props.ResponseTopic == f"{base}/reply/betting"
        assert first_props.CorrelationData == first["command_id"].encode()


def window(
    name: str, kind: str, options: list[str], info: dict[str, Any], *, closes_in: float
) -> dict[str, Any]:
    closes = datetime.now(UTC) + timedelta(seconds=closes_in)
    data = {
        "window": name,
        "kind": kind,
        "seat": "seat1" if kind == "action" else None,
        "seconds": 5,
        "options": options,
        "info": info,
        "closes_at": closes.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    DecisionOpenData.model_validate(data)  # the controller's own contract for this event
    return data


async def wait_for(predicate: Any, seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not predicate():
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_decisions_round_trip(mosquitto_session: MosquittoBroker, protocol: str) -> None:
    broker = mosquitto_session
    table = f"{TABLE}-{protocol.replace('.', '')}"
    base = f"tables/{table}"
    status_topic = f"betting/status-{table}"  # the shared broker keeps other runs' retained one
    stop = asyncio.Event()
    stats = BettingStats()
    policy = BettingPolicy(seed=3, abstain=0.0)
    mulligan = window(
        "mulligan",
        "mulligan",
        ["stay", "mulligan"],
        {"player": ["2c", "7d", "9h"], "house_way": "mulligan"},
        closes_in=5,
    )
    action = window(
        "action-1",
        "action",
        ["fold", "call", "raise", "all_in"],
        {"to_call": 100, "raises": [{"multiple": 2}, {"multiple": 3}], "bets": []},
        closes_in=5,
    )
    late = window("bank-offer-P1", "bank", ["accept", "decline"], {}, closes_in=-1)
    version = aiomqtt.ProtocolVersion.V5 if protocol == "5" else aiomqtt.ProtocolVersion.V311
    async with aiomqtt.Client(
        broker.host, broker.port, identifier=f"router-{table}", protocol=version, timeout=5
    ) as router:
        await router.subscribe(f"{base}/cmd/decision", qos=1)
        await router.subscribe(status_topic, qos=1)
        betting = asyncio.create_task(
            run_simulated_betting(
                [broker.url],
                table,
                protocol="5" if protocol == "5" else "3.1.1",
                seed=3,
                stop=stop,
                think_seconds=0.05,
                network_timeout=5,
                policy=policy,
                stats=stats,
                status_topic=status_topic,
            ),
            name="betting-under-test",
        )
        statuses: list[dict[str, Any]] = []
        commands: list[tuple[dict[str, Any], Any]] = []

        async def route() -> None:
            async for message in router.messages:
                body = json.loads(message.payload)
                if str(message.topic) == status_topic:
                    statuses.append(body)
                    if body == {"state": "online"} and not commands and len(statuses) == 1:
                        await publish_windows(broker, f"{base}/events", mulligan, action, late)
                    continue
                commands.append((body, message.properties))
                answer = answer_to(table, body, seq=100 + len(commands))
                await router.publish(f"{base}/reply/betting", answer, qos=1)

        router_task = asyncio.create_task(route(), name="fake-router")
        try:
            await wait_for(lambda: stats.accepted + stats.refused == 2)
            assert stats.windows == 3
            assert stats.skipped == 1
            assert stats.sent == 2
            assert stats.accepted == 1
            action_command = next(c for c, _ in commands if c["window"] == "action-1")
            assert stats.refusals == [(action_command["command_id"], "not seat1's turn")]
            check_commands(commands, policy, action, v5=protocol == "5", base=base)
            stop.set()
            result = await asyncio.wait_for(betting, 10)
            assert result is stats
            await wait_for(lambda: statuses[-1:] == [{"state": "offline"}])
            assert statuses[0] == {"state": "online"}
        finally:
            stop.set()
            router_task.cancel()
            await asyncio.gather(router_task, betting, return_exceptions=True)


async def test_an_unreachable_broker_keeps_retrying_until_stopped() -> None:
    stop = asyncio.Event()
    stats = BettingStats()
    task = asyncio.create_task(
        run_simulated_betting(
            ["mqtt://127.0.0.1:9"],
            TABLE,
            stop=stop,
            network_timeout=1,
            retry_seconds=0.1,
            stats=stats,
        ),
        name="betting-unreachable",
    )
    await asyncio.sleep(0.3)
    assert not task.done()
    stop.set()
    assert await asyncio.wait_for(task, 5) is stats
    assert stats.sent == 0


async def test_bad_arguments_are_refused() -> None:
    from simulators.errors import SimulatorConfigError

    with pytest.raises(SimulatorConfigError, match="broker URL"):
        await run_simulated_betting([], TABLE, stop=asyncio.Event())
    with pytest.raises(SimulatorConfigError, match="think_seconds"):
        await run_simulated_betting(["mqtt://x"], TABLE, stop=asyncio.Event(), think_seconds=-1)
    with pytest.raises(SimulatorConfigError, match="table id"):
        await run_simulated_betting(["mqtt://x"], "a/b", stop=asyncio.Event())
    with pytest.raises(SimulatorConfigError, match="mqtt://"):
        await run_simulated_betting(["http://x"], TABLE, stop=asyncio.Event())
    with pytest.raises(SimulatorConfigError, match="status_topic"):
        await run_simulated_betting(["mqtt://x"], TABLE, stop=asyncio.Event(), status_topic="a/#")


# --- hostile input ----------------------------------------------------------------------------

DEEP = b"[" * 3000 + b"]" * 3000


def hostile_payloads(table: str = TABLE) -> list[bytes]:
    """The probe's payloads, the envelopes among them naming ``table``."""
    envelope = functools.partial(envelope_of, table=table)
    return [
        b"",
        b"null",
        b"{}",
        DEEP,
        b'{"seq": ' + b"[" * 3000 + b"]" * 3000 + b"}",
        b"\xff\xfe{}",
        b'{"schema_version": "2", "seq": NaN}',
        b'"' + b"x" * 300_000 + b'"',
        envelope(10**9, "table_note", {"x": 1}),  # became last_seq before: real events ignored
        envelope(2**63, "round_opened", {"round_no": 8}),
        envelope(5, "decision_open", {"window": 7, "kind": [], "options": "x"}),
        envelope(5, "decision_open", {**DecisionOpenData.model_json_schema()["properties"]}),
        Envelope(
            table="other",
            journal=JOURNAL,
            round=None,
            seq=5,
            session=1,
            kind="x",
            at=datetime.now(UTC),
            data={},
        ).to_bytes(),
        envelope(5, "no_such_kind", {"anything": [1, {"x": None}]}),
        json.dumps({"kind": "command_answered", "data": {"command_id": "betting-x-1"}}).encode(),
    ]


HOSTILE_PAYLOADS = hostile_payloads()

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=16,
)

DECISION_FIELDS = st.fixed_dictionaries(
    {
        "window": st.text(min_size=1, max_size=8),
        "kind": st.sampled_from(["mulligan", "setting", "bank", "action", "other"]),
        "seat": st.none() | st.text(max_size=5),
        "seconds": st.floats(-10, 1e6, allow_nan=False),
        "options": st.lists(
            st.sampled_from(["fold", "check", "call", "bet", "raise", "all_in", "stay",
                             "mulligan", "close", "accept", "decline"]) | st.text(max_size=5),
            max_size=6,
        ),
        "info": st.dictionaries(
            st.sampled_from(["bets", "bet_shares", "raises", "raise_multiples", "house_way"]),
            JSON_VALUES,
        ),
        "closes_at": st.sampled_from(
            ["2026-11-27T12:00:00Z", "2026-11-27T12:00:00", "0001-01-01T00:00:00+01:00",
             "9999-12-31T23:59:59-23:59", "not a time", datetime.now(UTC).isoformat()]
        ),
    }
)  # fmt: skip


def online_status(table: str, *, seq: int) -> bytes:
    """The table's retained online status, its journal at ``seq`` now."""
    return StatusMessage(
        state="online", table=table, journal=JOURNAL, session=1, game="g", version="1",
        at=datetime.now(UTC), chain_head=ChainHead(seq=seq, hash="0" * 64),
    ).to_bytes()  # fmt: skip


def hostile_session(stats: BettingStats) -> Any:
    from simulators.betting import _Session

    stop = asyncio.Event()
    stop.set()  # a decision sent from a window is given up at once: no client needed
    return _Session(
        base=BASE,
        policy=BettingPolicy(seed=1, abstain=0.0),
        think_seconds=0.0,
        timeout=1.0,
        protocol="5",
        stop=stop,
        stats=stats,
        status_topic="betting/status",
        table=TABLE,
    )


async def feed_all(session: Any, messages: list[tuple[str, bytes]]) -> None:
    async with asyncio.TaskGroup() as group:
        for topic, payload in messages:
            if topic == "events":
                session._on_event(None, group, payload)
            elif topic == "reply":
                session._on_reply(payload)
            else:
                session._on_status(payload)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(
        st.tuples(
            st.sampled_from(["events", "reply", "status"]),
            st.binary(max_size=120)
            | st.sampled_from(HOSTILE_PAYLOADS)
            | JSON_VALUES.map(lambda value: json.dumps(value).encode())
            | DECISION_FIELDS.map(lambda data: envelope(3, "decision_open", data)),
        ),
        max_size=6,
    )
)
def test_no_message_makes_the_simulated_betting_system_raise(
    messages: list[tuple[str, bytes]],
) -> None:
    """Every reader of the betting system's topics (events, its replies, the table's status)
    takes any bytes: before, a 3,000-deep reply or a window with a naive closes_at raised."""
    asyncio.run(feed_all(hostile_session(BettingStats()), messages))


def test_hostile_messages_are_rejected_counted_and_the_real_table_still_followed() -> None:
    stats = BettingStats()
    session = hostile_session(stats)
    hostile = [("events", p) for p in HOSTILE_PAYLOADS] + [("reply", DEEP), ("status", DEEP)]
    real = window("w-9", "bank", ["accept", "decline"], {}, closes_in=5)
    asyncio.run(
        feed_all(
            session,
            [("status", online_status(TABLE, seq=3)), *hostile,
             ("events", envelope(6, "decision_open", real))],
        )
    )  # fmt: skip
    assert stats.windows == 1  # the real window after seq 10**9 was still seen
    assert session.last_seq == 6
    assert stats.rejected["seq_ahead"] == 1
    assert stats.rejected["too_deep"] == 4
    assert {"not_json", "not_utf8", "out_of_range", "too_large", "invalid", "wrong_table",
            "not_object", "schema_version"} <= set(stats.rejected)  # fmt: skip
    assert session.rejections.total == sum(stats.rejected.values())


async def test_hostile_messages_on_a_real_broker_leave_it_answering(
    mosquitto_session: MosquittoBroker,
) -> None:
    """The probe's payloads on every topic it reads, then a real window: it is answered."""
    broker = mosquitto_session
    table = f"{TABLE}-hostile"
    base = f"tables/{table}"
    status_topic = f"betting/status-{table}"
    stop = asyncio.Event()
    stats = BettingStats()
    async with aiomqtt.Client(broker.host, broker.port, timeout=5) as other:
        await other.subscribe(f"{base}/cmd/decision", qos=1)
        await other.subscribe(status_topic, qos=1)
        await other.publish(f"{base}/status", online_status(table, seq=3), qos=1, retain=True)
        betting = asyncio.create_task(
            run_simulated_betting(
                [broker.url], table, seed=3, stop=stop, think_seconds=0.01,
                network_timeout=5, policy=BettingPolicy(seed=3, abstain=0.0), stats=stats,
                status_topic=status_topic,
            ),
            name="betting-hostile",
        )  # fmt: skip
        try:
            async with asyncio.timeout(15):
                async for message in other.messages:
                    if str(message.topic) == status_topic:
                        break
            for payload in hostile_payloads(table):
                for topic in (f"{base}/events", f"{base}/reply/betting", f"{base}/status"):
                    await other.publish(topic, payload, qos=1)
            real = window("w-1", "bank", ["accept", "decline"], {}, closes_in=5)
            real_event = Envelope(
                table=table, journal=JOURNAL, round=ROUND, seq=6, session=1,
                kind="decision_open",
                at=datetime.now(UTC), data=real,
            ).to_bytes()  # fmt: skip
            await other.publish(f"{base}/events", real_event, qos=1)
            async with asyncio.timeout(10):
                async for message in other.messages:
                    if str(message.topic) == f"{base}/cmd/decision":
                        assert json.loads(message.payload)["window"] == "w-1"
                        break
            assert not betting.done()
            assert stats.rejected["too_deep"] >= 6 and stats.rejected["seq_ahead"] >= 1
        finally:
            stop.set()
            await asyncio.wait_for(betting, 10)
            await other.publish(f"{base}/status", b"", qos=1, retain=True)


async def test_a_presence_overwritten_by_another_client_is_said_again(
    mosquitto_session: MosquittoBroker,
) -> None:
    """A forged ``offline`` on its status topic while it is up: online again (retained)."""
    broker = mosquitto_session
    table = f"{TABLE}-presence"
    status_topic = f"betting/status-{table}"
    stop = asyncio.Event()
    stats = BettingStats()
    async with aiomqtt.Client(broker.host, broker.port, timeout=5) as other:
        await other.subscribe(status_topic, qos=1)
        betting = asyncio.create_task(
            run_simulated_betting(
                [broker.url], table, seed=3, stop=stop, think_seconds=0.01,
                network_timeout=5, stats=stats, status_topic=status_topic,
            ),
            name="betting-presence",
        )  # fmt: skip
        try:
            states = []
            async with asyncio.timeout(15):
                async for message in other.messages:
                    states.append(json.loads(message.payload)["state"])
                    if states == ["online"]:
                        forged = json.dumps({"state": "offline"}).encode()
                        await other.publish(status_topic, forged, qos=1, retain=True)
                    if states[-2:] == ["offline", "online"]:
                        break
            assert stats.reasserted == 1
        finally:
            stop.set()
            await asyncio.wait_for(betting, 10)
            await other.publish(status_topic, b"", qos=1, retain=True)
