"""The pit commands as the console builds them: ``operator``, shared building and matching."""

from __future__ import annotations

import json

import pytest

from controller.commands import Command, Refusal, parse_command
from controller.messages import Topics
from controller.pitcli import EXIT_ACCEPTED, EXIT_REFUSED, match_answer, prepare_command
from controller.studio.pit.console import ActionInvalid, ActionRequest, PitConsole, check_action
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.settings import PitUser, pit_settings
from tests.studio.test_pit_floor import env

TOPICS = Topics(prefix="tables", table="tp-01")
ALICE = PitUser(name="alice", role="pitboss", password_hash=hash_password("x", n=1024))
SAM = PitUser(name="sam", role="observer", password_hash=hash_password("x", n=1024))


def test_the_operator_is_accepted_and_kept_with_the_command():
    payload = json.dumps({"command_id": "v-1", "reason": "cable", "operator": "alice"}).encode()
    command = parse_command(TOPICS, "tables/tp-01/cmd/pit/void", payload)
    assert isinstance(command, Command)
    assert command.data == {"reason": "cable", "operator": "alice"}


def test_a_command_without_operator_reads_as_before():
    command = parse_command(TOPICS, "tables/tp-01/cmd/pit/resume", b'{"command_id": "r-1"}')
    assert isinstance(command, Command) and command.data == {}


def test_an_empty_operator_is_refused_naming_the_field():
    payload = b'{"command_id": "r-2", "operator": ""}'
    refused = parse_command(TOPICS, "tables/tp-01/cmd/pit/resume", payload)
    assert isinstance(refused, Refusal) and "field 'operator'" in refused.reason


def test_prepared_commands_carry_the_console_reply_topic_and_match_only_their_answer():
    prepared = prepare_command(
        TOPICS, "pit", "void", {"command_id": "c-1", "reason": "r"}, v5=True, reply_leaf="pit-x"
    )
    assert prepared.topic == "tables/tp-01/cmd/pit/void"
    assert prepared.reply_topic == "tables/tp-01/reply/pit/pit-x"
    assert json.loads(prepared.payload) == {"command_id": "c-1", "reason": "r"}

    def answer(command_id: str, accepted: bool) -> bytes:
        data = {"command_id": command_id, "name": "void", "accepted": accepted, "reason": "no"}
        return json.dumps({"kind": "command_answered", "data": data}).encode()

    assert match_answer(prepared, answer("c-2", True), prepared.correlation) is None
    assert match_answer(prepared, answer("c-1", True), b"other correlation") is None
    assert match_answer(prepared, b"garbage", prepared.correlation) is None
    accepted = match_answer(prepared, answer("c-1", True), prepared.correlation)
    assert accepted is not None and accepted.code == EXIT_ACCEPTED
    refused = match_answer(prepared, answer("c-1", False), None)
    assert refused is not None and refused.code == EXIT_REFUSED
    assert refused.text == "REFUSED void c-1: no"


def test_the_page_request_becomes_a_command_body_naming_the_user():
    tables = {"tp-01"}
    void = ActionRequest("tp-01", "void", "abcdefgh", round_id="tp-01-000001", reason=" cable ")
    assert check_action(ALICE, void, tables) == {
        "round": "tp-01-000001",
        "operator": "alice",
        "reason": "cable",
    }
    replay = ActionRequest("tp-01", "replay", "abcdefgh", round_id="tp-01-000001", from_seq=5)
    # A replay asked by round names the round (so recall lists it); its range is the round's.
    assert check_action(ALICE, replay, tables) == {
        "round": "tp-01-000001",
        "operator": "alice",
        "from_seq": 5,
        "to_seq": None,
    }
    ack = ActionRequest("tp-01", "ack", "abcdefgh", round_id="tp-01-000001", alert_seq=9)
    assert check_action(ALICE, ack, tables) == {
        "round": "tp-01-000001",
        "operator": "alice",
        "alert_seq": 9,
    }
    for user, request, says in [
        (SAM, void, "may not send pit actions"),
        (ALICE, ActionRequest("tp-01", "shutdown", "abcdefgh"), "unknown action"),
        (ALICE, ActionRequest("tp-01", "resume", "short"), "action id"),
        (ALICE, ActionRequest("tp-01", "replay", "abcdefgh", from_seq=0), "1 or more"),
        (ALICE, ActionRequest("tp-01", "replay", "abcdefgh", from_seq=5, to_seq=4), "below"),
        (ALICE, ActionRequest("tp-01", "void", "abcdefgh", reason="x" * 501), "500"),
        (ALICE, ActionRequest("tp-01", "ack", "abcdefgh"), "alert's seq"),
        (ALICE, ActionRequest("tp-01", "replay", "abcdefgh", round_id="r-9"), "not seen"),
    ]:
        with pytest.raises(ActionInvalid, match=says):
            check_action(user, request, tables)


def test_an_ack_is_a_pit_command_journalled_with_its_operator():
    payload = json.dumps({"command_id": "ack-alice-1", "alert_seq": 12, "operator": "alice"})
    command = parse_command(TOPICS, "tables/tp-01/cmd/pit/ack", payload.encode())
    assert isinstance(command, Command)
    assert (command.role, command.name, command.data) == (
        "pit",
        "ack",
        {"alert_seq": 12, "operator": "alice"},
    )
    refused = parse_command(
        TOPICS, "tables/tp-01/cmd/pit/ack", b'{"command_id": "a", "alert_seq": 0}'
    )
    assert isinstance(refused, Refusal) and "alert_seq" in refused.reason


async def test_the_console_acks_only_a_listed_alert_and_says_why_not_in_words():
    settings = pit_settings(
        {
            "users": [{"name": "alice", "role": "pitboss", "password_hash": ALICE.password_hash}],
            "session_secret": "s" * 40,
            "mqtt": {"urls": ["mqtt://127.0.0.1:1"]},
            "tables": ["tp-01"],
        }
    )
    console = PitConsole(settings)  # never connected: nothing can be sent
    halted = env("round_halted", 6, {"reason": "card reader lost"})
    assert console.floor.apply("tables/tp-01/events", halted) == "tp-01"
    unknown = await console.act(ALICE, ActionRequest("tp-01", "ack", "abcdefgh", alert_seq=99))
    assert (unknown.status, unknown.sentence) == (
        "invalid",
        "Not sent: No alert at seq 99 is listed for tp-01.",
    )
    listed = await console.act(ALICE, ActionRequest("tp-01", "ack", "abcdefgh", alert_seq=6))
    assert listed.status == "no_answer"
    assert listed.sentence == (
        "Not sent: the console is not connected to the broker (not connected yet). "
        "Try again once it is."
    )
    replay = ActionRequest("tp-01", "replay", "abcdefgh", round_id="tp-01-000009")
    assert (await console.act(ALICE, replay)).sentence.startswith(
        "Not sent: Round tp-01-000009 was not seen by this console"
    )
    assert console.round_span("tp-01", "tp-01-000001") == (6, 6)
