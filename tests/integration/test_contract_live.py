"""The published contract is what the tables send (issue #16, item 1).

Every game is run as ``tablectl run --simulate`` (the real controller, the scanner simulator on
a pty, the simulated betting system) against a real Mosquitto, with misreads and bounced reads
switched on. A recorder subscribed to ``#`` keeps every message of every topic: status, round
snapshot, events, results, secure events, commands, replies and the betting system's presence.
During the Teen Patti run it also sends pit and betting commands (a void, replays, a refused
command) so voids, replayed results and answers on reply and response topics are recorded too.

Every recorded message is validated against the committed JSON Schema of its topic and kind
(``docs/schemas``), with ``jsonschema`` Draft 2020-12 **and format checking** (``date-time``).
Nothing here is hand-written: if a game's live result, a model or a schema drifts, this fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from jsonschema import Draft202012Validator
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.games.registry import GAME_IDS
from tests.conftest import MosquittoBroker

pytestmark = [pytest.mark.hil, pytest.mark.slow]

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
ROUNDS = 3
TEEN_PATTI = "teen-patti-20-20"


@dataclass(frozen=True)
class Recorded:
    """One message as the broker delivered it."""

    topic: str
    payload: bytes


def _validators() -> dict[str, Draft202012Validator]:
    out = {}
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text())
        Draft202012Validator.check_schema(schema)
        out[path.stem] = Draft202012Validator(
            schema, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
    return out


def schema_for(topic: str, body: Any) -> str:
    """The committed schema (file stem) a message on ``topic`` must match."""
    levels = topic.split("/")
    if levels[:1] == ["betting"]:
        return "betting-status"
    rest = levels[2:]  # after tables/<table>
    kind = str(body.get("kind", "")).replace("_", "-") if isinstance(body, dict) else ""
    if rest == ["status"]:
        return "status"
    if rest == ["round"]:
        return "round-snapshot"
    if rest in (["events"], ["results"]):
        return f"event-{kind}"
    if rest == ["secure", "events"]:
        return f"secure-{kind}"
    if rest[:1] == ["reply"]:
        return "answer"
    if rest[:1] == ["cmd"]:
        return f"command-{rest[-1]}"
    raise AssertionError(f"a message on a topic outside the contract: {topic}")


class Recorder:
    """Subscribes to everything; sends the pit and betting commands of the Teen Patti run."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.messages: list[Recorded] = []
        self.ready = asyncio.Event()
        self.client: aiomqtt.Client | None = None
        self.sent_commands = False

    async def run(self) -> None:
        async with aiomqtt.Client(
            "127.0.0.1",
            self.port,
            identifier="contract-recorder",
            protocol=aiomqtt.ProtocolVersion.V5,
            timeout=10,
        ) as client:
            self.client = client
            await client.subscribe("#", qos=1)
            self.ready.set()
            async for message in client.messages:
                payload = message.payload if isinstance(message.payload, bytes) else b""
                self.messages.append(Recorded(str(message.topic), payload))
                await self._react(str(message.topic), payload)

    async def _react(self, topic: str, payload: bytes) -> None:
        """In the Teen Patti run: void round 2 while betting is open, then ask for replays."""
        if not topic.endswith("/events") or "/tp-" not in topic or self.client is None:
            return
        body = json.loads(payload)
        base = topic.rsplit("/", 1)[0]
        if body["kind"] == "round_opened" and body["data"]["round_no"] == 2:
            command = {"command_id": "void-1", "round": body["round"], "reason": "contract test"}
            await self.client.publish(f"{base}/cmd/pit/void", json.dumps(command), qos=1)
        if body["kind"] == "round_voided" and not self.sent_commands:
            self.sent_commands = True
            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            properties.ResponseTopic = f"{base}/reply/pit/recorder"
            properties.CorrelationData = b"\x00\x01"
            replay = {"command_id": "replay-1", "round": None, "from_seq": 1, "to_seq": None}
            await self.client.publish(
                f"{base}/cmd/pit/replay", json.dumps(replay), qos=1, properties=properties
            )
            betting = {"command_id": "replay-2", "round": None, "from_seq": 1, "to_seq": None}
            await self.client.publish(f"{base}/cmd/replay", json.dumps(betting), qos=1)
            stale = {"command_id": "resume-1", "round": "no-such-round"}
            await self.client.publish(f"{base}/cmd/pit/resume", json.dumps(stale), qos=1)


async def _run_game(broker: MosquittoBroker, game: str, table: str, workdir: Path) -> None:
    teen_patti = game == TEEN_PATTI
    args = [
        "-m",
        "controller.cli",
        "run",
        "--simulate",
        "--game",
        game,
        "--rounds",
        str(ROUNDS),
        "--broker",
        broker.url,
        "--table-id",
        table,
        "--journal",
        str(workdir / f"{table}.sqlite"),
        "--betting-seconds",
        "1.0" if teen_patti else "0.2",
        "--pause-seconds",
        "0.3" if teen_patti else "0",
        "--deal-delay",
        "0.01",
        "--misread-rate",
        "0.15",
        "--double-read-rate",
        "0.15",
        "--seed",
        "7",
        "--log-format",
        "json",
    ]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        async with asyncio.timeout(90):
            output, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, output.decode(errors="replace")[-3000:]


async def test_every_message_of_every_game_matches_the_committed_schemas(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    validators = _validators()
    recorder = Recorder(mosquitto.port)
    task = asyncio.create_task(recorder.run(), name="recorder")
    try:
        async with asyncio.timeout(10):
            await recorder.ready.wait()
        # The five tables play at once on the one broker, as in a studio (one after the
        # other took a minute).
        await asyncio.gather(
            *(
                _run_game(mosquitto, game, "tp-01" if game == TEEN_PATTI else f"g{n}", tmp_path)
                for n, game in enumerate(GAME_IDS, 1)
            )
        )
        await asyncio.sleep(0.5)  # the last messages in flight to the recorder
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    failures: list[str] = []
    seen: Counter[str] = Counter()
    for message in recorder.messages:
        if not message.payload:  # a retained message cleared: not a payload of the contract
            continue
        body = json.loads(message.payload)
        stem = schema_for(message.topic, body)
        seen[stem] += 1
        validator = validators.get(stem)
        if validator is None:
            failures.append(f"{message.topic}: no committed schema {stem}.json")
            continue
        for error in validator.iter_errors(body):
            where = "/".join(str(part) for part in error.absolute_path)
            failures.append(f"{message.topic} ({stem}) at {where or '.'}: {error.message[:300]}")
    assert not failures, f"{len(failures)} violations, first ones:\n" + "\n".join(failures[:15])

    # The run really covered the contract: every game's results, voids, replays and answers.
    results = [m for m in recorder.messages if m.topic.endswith("/results")]
    games = {json.loads(m.payload)["data"].get("game") for m in results}
    assert games >= set(GAME_IDS), games
    for stem in (
        "status",
        "round-snapshot",
        "event-round-result",
        "event-round-voided",
        "event-card-dealt",
        "event-rescan-requested",
        "event-decision-open",
        "event-decision-applied",
        "event-cards-revealed",
        "event-table-info",
        "event-command-answered",
        "secure-card-dealt",
        "secure-table-info",
        "secure-command-received",
        "answer",
        "command-decision",
        "command-replay",
        "command-void",
        "betting-status",
    ):
        assert seen[stem] > 0, f"no {stem} message was recorded: {sorted(seen)}"
    replayed = [m for m in results if json.loads(m.payload).get("replayed")]
    assert replayed, "no replayed result was recorded"
