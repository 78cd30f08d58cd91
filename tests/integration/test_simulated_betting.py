"""The simulated betting system against a real Mosquitto, with a fake table and router.

The fake table publishes real :class:`controller.messages.Envelope` ``decision_open`` events;
the fake command router reads ``cmd/decision`` and answers on ``reply/betting``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import aiomqtt
import pytest

from controller.journal.entries import DecisionOpenData
from controller.messages import Envelope
from simulators.betting import BettingPolicy, BettingStats, run_simulated_betting
from tests.conftest import MosquittoBroker

TABLE = "sim-1"
BASE = f"tables/{TABLE}"
ROUND = f"{TABLE}-000007"


def envelope(seq: int, kind: str, data: dict[str, Any], *, round_id: str = ROUND) -> bytes:
    return Envelope(
        table=TABLE,
        round=round_id,
        seq=seq,
        session=1,
        kind=kind,
        at=datetime.now(UTC),
        data=data,
    ).to_bytes()


def answer_to(table: str, body: dict[str, Any], *, seq: int) -> bytes:
    """The fake router's answer: the mulligan decision is accepted, any other refused."""
    refused = body["window"] != "mulligan"
    return Envelope(
        table=table,
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
    """The two decisions sent: the mulligan (v5: with a response topic) and the action."""
    (first, first_props), (second, _) = commands
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
            assert stats.refusals == [(commands[1][0]["command_id"], "not seat1's turn")]
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
