"""Replays are limited per role (issue 21, medium: ``cmd/replay from_seq 1`` had no limit).

Against a real Mosquitto: a table's outbox and command router, the replay command answered by
the outbox's own replay (as the orchestrator does), and the requests sent the way the pit CLI
and the archive send them (:func:`controller.pitcli.send_command`). Before the limit, 20
replays from seq 1 in well under a second were all answered by re-sending every result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from controller.commands import (
    REPLAY_WINDOW,
    Answer,
    Command,
    CommandRouter,
    ReplayLimiter,
)
from controller.journal import Journal
from controller.messages import Topics
from controller.mqtt.settings import MqttSettings
from controller.pitcli import EXIT_ACCEPTED, EXIT_REFUSED, Outcome, Target, send_command
from controller.publisher import Publisher
from controller.settings import ReplayLimitSettings, load_settings
from tests.integration.conftest import running_publisher
from tests.support.mosquitto import MISSING, have_mosquitto

TABLE = "tp-rl"
RESULTS = 4


def _settings(url: str) -> MqttSettings:
    return MqttSettings(
        urls=[url],
        reconnect_min_seconds=0.05,
        reconnect_max_seconds=0.3,
        publish_timeout=3.0,
        connect_timeout=3.0,
    )


def _journal(path: Path) -> Journal:
    journal = Journal.open(path)
    for n in range(1, RESULTS + 1):
        round_id = f"{TABLE}-{n:06d}"
        journal.append("round_opened", {"round_no": n, "game": "g"}, round_id=round_id)
        journal.append(
            "round_voided",
            {"reason": "x", "bets": {"A": {"outcome": "refund", "payout": "1"}}},
            round_id=round_id,
        )
    return journal


@contextlib.asynccontextmanager
async def _table(
    url: str, journal: Journal, limits: ReplayLimitSettings
) -> AsyncIterator[CommandRouter]:
    settings = _settings(url)
    async with running_publisher(settings, TABLE, journal, connect_within=10) as publisher:

        async def handler(command: Command) -> Answer:  # the orchestrator's replay answer
            return Answer(True, "", {"resent": await _replay(publisher, command)})

        router = CommandRouter(
            settings, TABLE, journal, handler, handler_timeout=10, replay_limits=limits
        )
        async with asyncio.TaskGroup() as group:
            task = group.create_task(router.run())
            async with asyncio.timeout(10):
                await router.subscribed.wait()
            try:
                yield router
            finally:
                await router.stop()
                await task


async def _replay(publisher: Publisher, command: Command) -> int:
    return await publisher.replay(int(command.data["from_seq"]), command.data.get("to_seq"))


async def _ask(url: str, role: str, n: int, tag: str = "", **extra: Any) -> list[Outcome]:
    """``n`` replays from seq 1 sent together, as the pit CLI sends them."""
    target = Target(_settings(url), TABLE)
    name = "replay"
    return list(
        await asyncio.gather(
            *(
                send_command(
                    target,
                    role,  # type: ignore[arg-type]
                    name,
                    {"command_id": f"{role}{tag}-{i}", "round": None, "from_seq": 1, **extra},
                    timeout=20,
                )
                for i in range(n)
            )
        )
    )


def _answers(journal: Journal) -> list[dict[str, Any]]:
    return [dict(e.body) for e in journal.entries() if e.kind == "command_answered"]


@pytest.mark.skipif(not have_mosquitto(), reason=MISSING)
async def test_a_burst_of_replays_is_cut_at_the_roles_limit(mosquitto: Any, tmp_path: Path) -> None:
    journal = _journal(tmp_path / "j.sqlite")
    resent: list[dict[str, Any]] = []
    async with (
        asyncio.timeout(60),
        aiomqtt.Client("127.0.0.1", mosquitto.port, identifier="rl-viewer") as viewer,
    ):
        await viewer.subscribe(Topics(table=TABLE).results, qos=1)
        async with _table(mosquitto.url, journal, ReplayLimitSettings(commands_per_minute=3)):
            outcomes = await _ask(mosquitto.url, "betting", 20)
            # The pit boss has a budget of its own: the betting role's flood leaves it alone.
            (pit,) = await _ask(mosquitto.url, "pit", 1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                async for message in viewer.messages:
                    resent.append(json.loads(bytes(message.payload)))
    accepted = [o for o in outcomes if o.code == EXIT_ACCEPTED]
    refused = [o for o in outcomes if o.code == EXIT_REFUSED]
    assert (len(accepted), len(refused)) == (3, 17), [o.text for o in outcomes]
    assert pit.code == EXIT_ACCEPTED, pit.text
    # (3 + 1 pit) replays of every result: not 21.
    assert len([m for m in resent if m.get("replayed")]) == 4 * RESULTS
    for outcome in refused:
        assert "too many replays for the betting role: 3 replays in the last 60 s" in outcome.text
        assert "(replay.commands_per_minute = 3)" in outcome.text
        found = re.search(r"ask again in (\d+) s \(after \d\d:\d\d:\d\dZ\)", outcome.text)
        assert found and 1 <= int(found.group(1)) <= 60, outcome.text
        assert outcome.answer is not None
    # Journalled as the other refusals are: answered, not received (not remembered).
    answers = _answers(journal)
    limited = [a for a in answers if "too many replays" in a["reason"]]
    assert len(limited) == 17 and all(not a["accepted"] for a in limited)
    assert all(1 <= a["data"]["retry_after"] <= 60 for a in limited)
    received = [e for e in journal.entries() if e.kind == "command_received"]
    assert len(received) == 3 + 1
    journal.close()


@pytest.mark.skipif(not have_mosquitto(), reason=MISSING)
async def test_replays_stop_once_the_roles_messages_are_spent(
    mosquitto: Any, tmp_path: Path
) -> None:
    journal = _journal(tmp_path / "j.sqlite")
    limits = ReplayLimitSettings(commands_per_minute=100, messages_per_minute=RESULTS + 1)
    async with asyncio.timeout(60), _table(mosquitto.url, journal, limits):
        first = await _ask(mosquitto.url, "betting", 1)
        second = await _ask(mosquitto.url, "betting", 1, "b", to_seq=2)  # 1 more: 5, spent
        third = await _ask(mosquitto.url, "betting", 1, "c")
    assert [o.code for o in first + second] == [EXIT_ACCEPTED, EXIT_ACCEPTED]
    assert f'"resent": {RESULTS}' in first[0].text
    assert third[0].code == EXIT_REFUSED
    assert "5 messages re-sent in the last 60 s (replay.messages_per_minute = 5)" in (third[0].text)
    journal.close()


async def test_a_limited_replay_may_be_asked_again_with_the_same_id(tmp_path: Path) -> None:
    """The refusal is not remembered as the command's answer (a repeat is a new request)."""
    journal = _journal(tmp_path / "j.sqlite")
    calls: list[Command] = []

    async def handler(command: Command) -> Answer:
        calls.append(command)
        return Answer(True, "", {"resent": 1})

    router = CommandRouter(
        _settings("mqtt://127.0.0.1:1"),
        TABLE,
        journal,
        handler,
        handler_timeout=2,
        replay_limits=ReplayLimitSettings(commands_per_minute=1),
    )
    topic = Topics(table=TABLE).cmd("replay")

    def payload(command_id: str) -> bytes:
        return json.dumps({"command_id": command_id, "round": None, "from_seq": 1}).encode()

    assert (await router.handle(topic, payload("a"))).body["accepted"]
    refused = await router.handle(topic, payload("b"))
    assert not refused.body["accepted"] and "too many replays" in refused.body["reason"]
    router.replays = ReplayLimiter(ReplayLimitSettings(commands_per_minute=5))  # time passed
    again = await router.handle(topic, payload("b"))
    assert again.body["accepted"] and "duplicate" not in again.body
    assert [c.command_id for c in calls] == ["a", "b"]
    journal.close()


def test_the_limiter_counts_a_sliding_minute_per_role() -> None:
    limiter = ReplayLimiter(ReplayLimitSettings(commands_per_minute=2, messages_per_minute=10))
    assert limiter.admit("betting", 0.0) is None
    assert limiter.admit("betting", 10.0) is None
    refused = limiter.admit("betting", 20.0)
    assert refused is not None and refused[0] == pytest.approx(REPLAY_WINDOW - 20.0)
    assert limiter.admit("pit", 20.0) is None  # another role
    assert limiter.admit("betting", REPLAY_WINDOW + 0.5) is None  # the first left the window
    limiter.charge("pit", 21.0, 6)
    limiter.charge("pit", 30.0, 6)
    assert limiter.admit("pit", 31.0) is not None  # 12 >= 10 (and 2 admitted... by messages:)
    wait = ReplayLimiter(ReplayLimitSettings(commands_per_minute=99, messages_per_minute=10))
    wait.charge("pit", 21.0, 6)
    wait.charge("pit", 30.0, 6)
    refused = wait.admit("pit", 31.0)
    # Below the limit once the charge at 21 s leaves the window (12 - 6 = 6 < 10).
    assert refused is not None and refused[0] == pytest.approx(21.0 + REPLAY_WINDOW - 31.0)
    assert "12 messages re-sent" in refused[1]
    assert wait.admit("pit", 21.0 + REPLAY_WINDOW + 0.1) is None


def test_the_limits_are_table_settings_with_defaults(tmp_path: Path) -> None:
    base = {"table_id": "tp-1", "device": {"url": "socket://127.0.0.1:9"}}
    assert load_settings(None, **base).replay == ReplayLimitSettings(
        commands_per_minute=10, messages_per_minute=1000
    )
    config = tmp_path / "t.toml"
    config.write_text(
        'table_id = "tp-1"\n[device]\nurl = "socket://127.0.0.1:9"\n'
        "[replay]\ncommands_per_minute = 2\nmessages_per_minute = 50\n"
    )
    assert load_settings(config).replay == ReplayLimitSettings(
        commands_per_minute=2, messages_per_minute=50
    )
