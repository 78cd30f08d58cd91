"""What a new user trips on (issue 25, items 3 and 4), on a real Mosquitto.

``tablectl watch`` on a table that never published says it waits, then that nothing came;
``pit`` commands' errors name the whole command; ``--hid`` alone deals with the
``barcode-crlf`` profile.
"""

from __future__ import annotations

import asyncio
import gc
import io

import pytest

from controller.cli import main
from controller.journal import Journal
from controller.watch import watch

pytestmark = pytest.mark.hil


class _Lines(io.StringIO):
    """A stream that sets ``said`` once a line containing ``wanted`` is written."""

    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted = wanted
        self.said = asyncio.Event()

    def write(self, text: str) -> int:
        if self.wanted in text:
            self.said.set()
        return super().write(text)


async def test_watch_on_an_unknown_table_says_it_waits_and_that_nothing_came(mosquitto):
    out = _Lines("nothing heard from table no-such-table")
    stop = asyncio.Event()
    task = asyncio.create_task(
        watch([mosquitto.url], "no-such-table", out=out, stop=stop, quiet_seconds=0.2)
    )
    try:
        async with asyncio.timeout(20):
            await out.said.wait()
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task
    text = out.getvalue()
    assert text.startswith("watching table no-such-table on ")
    assert "waiting for its messages" in text
    assert "check --table-id, --prefix and the broker" in text


async def test_watch_on_a_known_table_does_not_say_nothing_came(mosquitto):
    import aiomqtt

    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        status = b'{"schema_version":"2","table":"t-known","state":"online","session":1}'
        await client.publish("tables/t-known/status", status, qos=1, retain=True)
    out = _Lines("table t-known")
    stop = asyncio.Event()
    task = asyncio.create_task(
        watch([mosquitto.url], "t-known", out=out, stop=stop, quiet_seconds=1.0)
    )
    try:
        async with asyncio.timeout(20):
            await out.said.wait()
        # The quiet period's task ends without a line for a table that was heard.
        # (Not found: it has already ended, its quiet period over.)
        silence = [t for t in asyncio.all_tasks() if t.get_name() == "watch-silence"]
        async with asyncio.timeout(10):
            await asyncio.gather(*silence)
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task
    assert "nothing heard" not in out.getvalue()


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["pit", "resume"], "tablectl pit resume: "),
        (["pit", "void", "--reason", "test"], "tablectl pit void: "),
        (["replay", "--from-seq", "1"], "tablectl replay: "),
    ],
)
def test_a_pit_commands_error_names_the_whole_command(command, name, tmp_path, capsys):
    code = main([*command, "--config", str(tmp_path / "missing.toml")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(name), err
    assert "missing.toml" in err


def test_hid_without_a_profile_deals_with_a_barcode_scanner(mosquitto, tmp_path):
    """Issue 25: ``--hid`` alone was refused ("needs --profile"); it is barcode-crlf's."""
    journal = tmp_path / "hid.sqlite"
    args = ["run", "--simulate", "--hid", "kbd", "--rounds", "1", "--seed", "4"]
    args += ["--betting-seconds", "0.2", "--pause-seconds", "0", "--deal-delay", "0.02"]
    args += ["--broker", mosquitto.url, "--journal", str(journal), "--no-archive", "--no-studio"]
    assert main(args) == 0
    # Its table collected between cards; the program that ran it has its collector back.
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with Journal.open_readonly(journal) as reader:
        kinds = [entry.kind for entry in reader.entries()]
        devices = [e.body for e in reader.entries() if e.kind == "device_status"]
    assert "round_result" in kinds
    assert any("hidkbd://" in str(body) and "barcode-crlf" in str(body) for body in devices)


def test_decision_seconds_sets_the_games_windows(mosquitto, tmp_path):
    """Issue 25, item 2: ``--decision-seconds`` shortens the game's decision windows."""
    journal = tmp_path / "bp.sqlite"
    args = ["run", "--simulate", "--game", "break-poker", "--rounds", "1", "--seed", "2"]
    args += ["--decision-seconds", "1.5", "--betting-seconds", "0.2", "--pause-seconds", "0"]
    args += ["--deal-delay", "0.02", "--broker", mosquitto.url, "--journal", str(journal)]
    assert main([*args, "--no-archive", "--no-studio"]) == 0
    with Journal.open_readonly(journal) as reader:
        windows = [e.body for e in reader.entries() if e.kind == "decision_open"]
    assert windows and all(body["seconds"] == 1.5 for body in windows)


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_log_format_holds_when_the_output_is_captured(fmt, mosquitto, tmp_path, capsys):
    """Issue 25, item 1: captured output (not a terminal) gets the format asked for."""
    journal = tmp_path / "j.sqlite"
    args = ["run", "--simulate", "--rounds", "1", "--seed", "3", "--betting-seconds", "0.2"]
    args += ["--pause-seconds", "0", "--deal-delay", "0.01", "--broker", mosquitto.url]
    args += ["--journal", str(journal), "--no-archive", "--no-studio", "--log-format", fmt]
    assert main(args) == 0
    logs = [line for line in capsys.readouterr().err.splitlines() if "round settled" in line]
    assert logs, "no 'round settled' log line"
    if fmt == "json":
        assert all(line.startswith("{") for line in logs)
    else:
        assert all(not line.startswith("{") and "[info" in line for line in logs)
