"""``tablectl enrol`` against ``tablectl simulate-scanner --profile NAME`` (issue 24, 6).

Both commands run as processes, as an operator runs them in two terminals: the simulator
prints its pty first (a pty mode), its device URL and an enrol line; the enrolment reads the
whole deck from it (``profile+serial://`` for the line profiles; ``pepper+serial://``,
``mqtt-reader://`` through a real Mosquitto and ``jsonl+serial://`` for the reader profiles,
the printed enrol line run as it is) and writes the code table, which binds each tag to the
card the profile's own table binds it to.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shlex
import signal
import sys
from pathlib import Path

import aiomqtt
import pytest

from controller.cards import Deck
from drivers.profile import CodeTable, load_code_table, load_profile
from drivers.reader_profile import load_reader_profile
from tests.support.mosquitto import MosquittoProcess, free_port

pytestmark = pytest.mark.hil


async def _command(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.parametrize("profile", ["line-shoe", "rfid-ntag"])
async def test_enrol_reads_a_whole_deck_from_the_simulated_reader(
    profile: str, tmp_path: Path
) -> None:
    simulator = await _command(
        "simulate-scanner", "--profile", profile, "--pty", "--deal-delay", "0"
    )
    assert simulator.stdout is not None
    try:
        async with asyncio.timeout(30):
            path = (await simulator.stdout.readline()).decode().strip()
            device = (await simulator.stdout.readline()).decode().strip()
            hint = (await simulator.stdout.readline()).decode().strip()
        url = f"profile+serial://{path}?profile={profile}"
        assert path.startswith("/"), path
        assert device == f"device: {url}"
        assert hint.startswith("enrol:  tablectl enrol --device") and url in hint
        out = tmp_path / "deck.toml"
        enrol = await _command(
            "enrol", "--device", url, "--deck", "standard", "--out", str(out), "--tag-timeout", "0"
        )
        async with asyncio.timeout(60):
            said, errors = await enrol.communicate()
        assert enrol.returncode == 0, (said + errors).decode()
        assert "[52/52] scan" in said.decode()
    finally:
        if simulator.returncode is None:
            simulator.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            _, tail = await simulator.communicate()
    assert simulator.returncode == 0, tail.decode()
    assert "put 52 card(s) on the reader" in tail.decode()
    table = load_code_table(out)
    codes = load_profile(profile).table.codes
    assert len(table.codes) == 52
    assert all(codes[code] == card for code, card in table.codes.items())


async def test_a_profile_that_does_not_exist_is_named() -> None:
    simulator = await _command("simulate-scanner", "--profile", "no-such-reader", "--pty")
    async with asyncio.timeout(30):
        _, err = await simulator.communicate()
    assert simulator.returncode == 2
    assert "no-such-reader" in err.decode()


async def test_enrol_against_the_framed_simulator_says_how_to_simulate_a_reader(
    tmp_path: Path,
) -> None:
    out = tmp_path / "deck.toml"
    enrol = await _command(
        "enrol", "--device", "serial:///dev/null", "--deck", "standard", "--out", str(out)
    )
    async with asyncio.timeout(30):
        _, err = await enrol.communicate()
    assert enrol.returncode != 0
    assert "tablectl simulate-scanner --profile NAME --pty" in err.decode(), err.decode()
    assert not out.exists()


async def _enrol_from_printed_line(
    simulator: asyncio.subprocess.Process, out: Path, *, pty: bool
) -> str:
    """Read the simulator's lines, run its enrol line as printed (``--out`` in ``out``); the URL."""
    assert simulator.stdout is not None
    async with asyncio.timeout(30):
        path = (await simulator.stdout.readline()).decode().strip() if pty else None
        device = (await simulator.stdout.readline()).decode().strip()
        hint = (await simulator.stdout.readline()).decode().strip()
    assert device.startswith("device: "), device
    url = device.removeprefix("device: ")
    if path is not None:
        assert path.startswith("/") and path in url, (path, url)
    quoted = shlex.quote(url)
    assert hint == f"enrol:  tablectl enrol --device {quoted} --deck standard --out deck.toml"
    argv = shlex.split(hint.removeprefix("enrol:  "))
    assert argv[0] == "tablectl"
    enrol = await _command(*argv[1:], "--out", str(out), "--tag-timeout", "0")
    async with asyncio.timeout(90):
        said, errors = await enrol.communicate()
    assert enrol.returncode == 0, (said + errors).decode()
    assert "[52/52] scan" in said.decode()
    return url


async def _stopped(simulator: asyncio.subprocess.Process) -> str:
    """SIGTERM the simulator; its standard error once it exited 0."""
    if simulator.returncode is None:
        simulator.send_signal(signal.SIGTERM)
    async with asyncio.timeout(15):
        _, tail = await simulator.communicate()
    assert simulator.returncode == 0, tail.decode()
    return tail.decode()


def _assert_the_deck(out: Path, table: CodeTable) -> None:
    """The table written binds the 52 cards' tags as the simulated tags carry them."""
    written = load_code_table(out)
    assert sorted(written.codes.values()) == sorted(str(card) for card in Deck.standard())
    assert all(table.codes[code] == card for code, card in written.codes.items())


@pytest.mark.parametrize("where", [["--pty"], ["--tcp", "0"]], ids=["pty", "tcp"])
async def test_enrol_reads_a_whole_deck_from_a_simulated_pepper_c1(
    where: list[str], tmp_path: Path
) -> None:
    simulator = await _command(
        "simulate-scanner", "--profile", "pepper-c1", *where, "--deal-delay", "0"
    )
    out = tmp_path / "deck.toml"
    try:
        url = await _enrol_from_printed_line(simulator, out, pty=where == ["--pty"])
    finally:
        tail = await _stopped(simulator)
    scheme = "pepper+serial:///" if where == ["--pty"] else "pepper://127.0.0.1:"
    assert url.startswith(scheme) and url.endswith("?cues=1"), url
    assert "put 52 card(s) on the reader" in tail
    _assert_the_deck(out, load_reader_profile("pepper-c1").table)


async def test_enrol_reads_a_whole_deck_from_a_simulated_json_lines_reader(
    tmp_path: Path,
) -> None:
    simulator = await _command(
        "simulate-scanner", "--profile", "mqtt-json", "--pty", "--deal-delay", "0"
    )
    out = tmp_path / "deck.toml"
    try:
        url = await _enrol_from_printed_line(simulator, out, pty=True)
    finally:
        tail = await _stopped(simulator)
    assert url.startswith("jsonl+serial:///") and url.endswith("?cues=1"), url
    assert "put 52 card(s) on the reader" in tail
    _assert_the_deck(out, load_reader_profile("mqtt-json").table)


async def test_enrol_reads_a_whole_deck_from_a_simulated_mqtt_reader(
    mosquitto_session: MosquittoProcess, tmp_path: Path
) -> None:
    broker = mosquitto_session
    topic = f"studio/t-{secrets.token_hex(3)}/readers/seat-3"
    simulator = await _command(
        "simulate-scanner",
        "--profile",
        "mqtt-json",
        "--broker",
        broker.url,
        "--topic",
        topic,
        "--deal-delay",
        "0",
    )
    out = tmp_path / "deck.toml"
    try:
        url = await _enrol_from_printed_line(simulator, out, pty=False)
        assert url == (
            f"mqtt-reader://{broker.host}:{broker.port}/{topic}"
            f"?cmd={topic}/cmd&status={topic}/status"
        )
        # The last card still lies on the pad: the reader reports it on its topic, as seat-3.
        async with asyncio.timeout(10), aiomqtt.Client(broker.host, broker.port) as client:
            await client.subscribe(topic)
            message = await anext(aiter(client.messages))
        assert isinstance(message.payload, bytes)
        assert json.loads(message.payload)["device_id"] == "seat-3"
    finally:
        tail = await _stopped(simulator)
    assert "put 52 card(s) on the reader" in tail
    _assert_the_deck(out, load_reader_profile("mqtt-json").table)


async def test_a_broker_that_does_not_answer_is_named() -> None:
    """Nothing listens on the port: the simulated reader says so after its 5 s, status 1."""
    port = free_port("127.0.0.1")
    simulator = await _command(
        "simulate-scanner", "--profile", "mqtt-json", "--broker", f"mqtt://127.0.0.1:{port}"
    )
    async with asyncio.timeout(30):
        said, err = await simulator.communicate()
    assert simulator.returncode == 1
    assert said == b""  # no URL printed for a reader that is not there
    assert f"the broker mqtt://127.0.0.1:{port} did not take the reader's connection" in (
        err.decode()
    )
