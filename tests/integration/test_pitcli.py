"""``tablectl pit resume|void`` and ``tablectl replay`` against a real Mosquitto and a real
command router + outbox (the CLI runs in a thread with its own event loop, as it would in
its own process)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
import structlog
import structlog.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cli import main
from controller.commands import Answer, Command, CommandRouter
from controller.errors import TablectlError
from controller.inbound import RejectionLog
from controller.journal import Journal
from controller.messages import Topics
from controller.mqtt.settings import MqttSettings
from controller.pitcli import match_answer, prepare_command
from controller.publisher import Publisher
from tests.integration._secure_broker import (
    ROLE_PASSWORDS,
    SecureBroker,
    make_password_file,
)
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto

ACL = Path(__file__).resolve().parents[2] / "config" / "mosquitto" / "acl"


class Table:
    """A controller's MQTT side: outbox + command router with a scripted handler."""

    def __init__(self, url: str, table: str, journal: Journal, **mqtt: Any) -> None:
        settings = MqttSettings(
            urls=[url], reconnect_min_seconds=0.05, reconnect_max_seconds=0.3, **mqtt
        )
        self.publisher = Publisher(settings, table, journal, game="g", version="t")
        self.router = CommandRouter(settings, table, journal, self.handle, handler_timeout=2)
        self.calls: list[Command] = []

    async def handle(self, command: Command) -> Answer:
        self.calls.append(command)
        if command.name == "resume":
            raise TablectlError("no round is halted", table="x")
        if command.name == "replay":
            sent = await self.publisher.replay(command.data["from_seq"], command.data["to_seq"])
            return Answer(True, "", {"messages": sent})
        return Answer(True, "voided")


@contextlib.asynccontextmanager
async def running(table: Table) -> AsyncIterator[Table]:
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        pub = group.create_task(table.publisher.run(), name="publisher")
        cmd = group.create_task(table.router.run(), name="commands")
        assert await table.publisher.wait_connected(5)
        async with asyncio.timeout(5):
            await table.router.subscribed.wait()
        try:
            yield table
        finally:
            await table.router.stop()
            await table.publisher.stop()
            await pub
            await cmd


async def cli(argv: list[str]) -> int:
    return await asyncio.to_thread(main, argv)


async def test_pit_commands_and_replay_exit_codes(
    mosquitto_session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = mosquitto_session
    table_id = f"pit-{uuid.uuid4().hex[:6]}"
    journal = Journal.open(tmp_path / "j.sqlite")
    journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
    journal.append(
        "round_voided",
        {"reason": "x", "bets": {"A": {"outcome": "refund", "payout": "1"}}},
        round_id="r-1",
    )
    where = ["--broker", broker.url, "--table-id", table_id, "--timeout", "10"]
    async with running(Table(broker.url, table_id, journal)) as table:
        assert await cli(["pit", "void", "--reason", "dealer error", *where]) == 0
        voided = capsys.readouterr().out
        assert "\nACCEPTED void " in "\n" + voided
        assert ": voided" in voided

        assert await cli(["pit", "resume", "--round", "r-1", *where]) == 1
        err = capsys.readouterr().err
        assert "REFUSED resume" in err and "no round is halted" in err

        # The same command id again: the first answer, the handler is not called twice.
        again = ["pit", "void", "--reason", "dealer error", "--command-id", "fixed-1", *where]
        assert await cli(again) == 0
        assert await cli(again) == 0
        assert "(repeated command: first answer)" in capsys.readouterr().out

        # MQTT 3.1.1: no response topic; the answer is found on reply/betting by command id.
        replay = ["replay", "--from-seq", "1", "--as", "betting", "--protocol", "3.1.1"]
        assert await cli([*replay, *where]) == 0
        out = capsys.readouterr().out
        assert "\nACCEPTED replay" in "\n" + out and '{"messages": 1}' in out

        # Bad input is refused by the controller, naming the field.
        assert await cli(["replay", "--from-seq", "0", *where]) == 1
        assert "field 'from_seq'" in capsys.readouterr().err
    assert [(c.role, c.name) for c in table.calls] == [
        ("pit", "void"),
        ("pit", "resume"),
        ("pit", "void"),
        ("betting", "replay"),
    ]
    assert table.calls[1].round_id == "r-1"
    assert table.calls[0].data == {"reason": "dealer error"}
    journal.close()


async def test_no_controller_means_exit_2(
    mosquitto_session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["pit", "resume", "--broker", mosquitto_session.url, "--table-id", "nobody-home"]
    assert await cli([*argv, "--timeout", "0.5"]) == 2
    assert "NO ANSWER within 0.5 s to resume" in capsys.readouterr().err
    # Without --broker the default is the local broker (run --simulate's, issue 25): covered
    # by tests/unit/test_pit_defaults.py, not tried here (port 1883 may be anyone's).


async def test_config_file_gives_broker_and_table(
    mosquitto_session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table_id = f"cfg-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "table.toml"
    config.write_text(
        f'table_id = "{table_id}"\ngame = "teen-patti-20-20"\n'
        '[device]\nurl = "socket://127.0.0.1:9"\n'
        f'[mqtt]\nurls = ["{mosquitto_session.url}"]\n'
    )
    journal = Journal.open(tmp_path / "j.sqlite")
    async with running(Table(mosquitto_session.url, table_id, journal)):
        argv = ["pit", "void", "--reason", "r", "--config", str(config), "--timeout", "10"]
        assert await cli(argv) == 0
    assert "ACCEPTED void" in capsys.readouterr().out
    journal.close()


@pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING)
async def test_broker_refusal_is_reported_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A betting-system credential cannot send pit commands: the broker says so (v5)."""
    passwd = make_password_file(tmp_path / "passwd", ROLE_PASSWORDS)
    config = (
        "listener {port} 127.0.0.1\nallow_anonymous false\n"
        f"password_file {passwd}\nacl_file {ACL}\npersistence false\n"
    )
    with SecureBroker(config, tmp_path / "broker") as broker:
        url = f"mqtt://127.0.0.1:{broker.port}"
        base = ["--broker", url, "--table-id", "tp-01", "--timeout", "5"]
        betting = ["--username", "betting", "--password", ROLE_PASSWORDS["betting"]]
        assert await cli(["pit", "void", "--reason", "x", *base, *betting]) == 1
        err = capsys.readouterr().err
        assert "REFUSED by the broker: Not authorized (reason code 0x87)" in err
        assert ROLE_PASSWORDS["betting"] not in err


HOSTILE_ANSWERS = [
    b"",
    b"null",
    b"[" * 3000 + b"]" * 3000,  # raised RecursionError out of the CLI
    b'{"data": ' + b"{" * 3000 + b"}" * 3000 + b"}",
    b"\xff",
    b'{"data": {"command_id": NaN}}',
    b'{"data": {"command_id": ' + b"9" * 5000 + b"}}",
]


@settings(max_examples=200, deadline=None)
@given(
    payload=st.binary(max_size=150)
    | st.sampled_from(HOSTILE_ANSWERS)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["data", "command_id", "accepted", "name"]), inner)
        ),
        max_leaves=12,
    ).map(lambda value: json.dumps(value).encode())
)
def test_no_reply_payload_makes_the_answer_match_raise(payload: bytes) -> None:
    prepared = prepare_command(Topics(table="tp-1"), "pit", "resume", {}, v5=False)
    outcome = match_answer(prepared, payload, None, rejections=RejectionLog(reader="pitcli"))
    assert outcome is None or outcome.code in (0, 1)


async def test_a_hostile_retained_reply_does_not_stop_the_cli(
    mosquitto_session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 3,000-deep value retained on reply/pit (3.1.1: the CLI reads that topic) is logged
    as rejected; the real answer that follows is still read."""
    broker = mosquitto_session
    table_id = f"pit-{uuid.uuid4().hex[:6]}"
    journal = Journal.open(tmp_path / "j.sqlite")
    reply = f"tables/{table_id}/reply/pit"
    where = ["--broker", broker.url, "--table-id", table_id, "--timeout", "10"]
    async with aiomqtt.Client(broker.host, broker.port, timeout=5) as hostile:
        await hostile.publish(reply, HOSTILE_ANSWERS[2], qos=1, retain=True)
        try:
            async with running(Table(broker.url, table_id, journal)):
                argv = ["pit", "void", "--reason", "r", "--protocol", "3.1.1", *where]
                # The log lines as structlog emits them, whatever an earlier test configured.
                with structlog.testing.capture_logs() as logs:
                    assert await cli(argv) == 0
        finally:
            await hostile.publish(reply, b"", qos=1, retain=True)
    captured = capsys.readouterr()
    assert "ACCEPTED void" in captured.out
    rejected = [line for line in logs if line["event"] == "message rejected"]
    assert rejected and rejected[0]["reader"] == "pitcli", logs
    assert "payload nests 3000 levels" in rejected[0]["reason"]
    journal.close()
