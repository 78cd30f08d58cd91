"""``tablectl check-config`` against a real pty, real TCP listeners and a real Mosquitto."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli.check_config import register
from tests.integration._secure_broker import SecureBroker, make_password_file
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import free_port, have_mosquitto

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING)


@pytest.fixture(autouse=True)
def _no_tablectl_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TABLECTL_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """Anonymous on ``port``; user ``table-tp-01`` / ``secret`` required on ``tls_port``...

    ...which is a second plain listener here (no TLS needed for this test): per-listener
    settings let one broker serve both cases.
    """
    directory = tmp_path_factory.mktemp("check-broker")
    passwd = make_password_file(directory / "passwd", {"table-tp-01": "secret"})
    config = (
        "per_listener_settings true\n"
        "persistence false\n"
        "log_dest stderr\n"
        "listener {port} 127.0.0.1\n"
        "allow_anonymous true\n"
        "listener {tls_port} 127.0.0.1\n"
        "allow_anonymous false\n"
        f"password_file {passwd}\n"
    )
    with SecureBroker(config, directory) as running:
        yield running


@pytest.fixture
def pty_path() -> Iterator[str]:
    controller_end, device_end = os.openpty()
    path = os.ttyname(device_end)
    yield path
    os.close(controller_end)
    os.close(device_end)


def write_config(
    directory: Path,
    *,
    device: str,
    brokers: list[str],
    extra: str = "",
    mqtt_extra: str = "",
) -> Path:
    urls = ", ".join(f'"{url}"' for url in brokers)
    text = (
        'table_id = "tp-01"\n'
        'game = "teen-patti-20-20"\n'
        f"{extra}\n"
        "[device]\n"
        f'url = "{device}"\n'
        "[mqtt]\n"
        f"urls = [{urls}]\n"
        f"{mqtt_extra}\n"
        "[journal]\n"
        f'path = "{directory / "journal.sqlite"}"\n'
    )
    path = directory / "tp-01.toml"
    path.write_text(text)
    return path


def check(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    parser = argparse.ArgumentParser(prog="tablectl")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check-config", *argv])
    code: int = args.func(args)
    return code, capsys.readouterr().out.splitlines()


def line(lines: list[str], name: str) -> str:
    found = [text for text in lines if text.split(maxsplit=1)[1].startswith(f"{name}:")]
    assert len(found) == 1, lines
    return found[0]


def test_good_config_with_pty_and_broker(
    tmp_path: Path, pty_path: str, broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path,
        device=f"serial://{pty_path}?baud=115200",
        brokers=[f"mqtt://127.0.0.1:{broker.port}"],
    )
    code, lines = check([str(config), "--timeout", "10"], capsys)
    assert code == 0, lines
    assert line(lines, "config").startswith("OK")
    assert "table tp-01" in line(lines, "config")
    assert line(lines, "device").startswith("OK")
    assert pty_path in line(lines, "device")
    assert line(lines, "broker").startswith("OK")
    assert line(lines, "journal").startswith("OK")


def test_broken_config_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(
        tmp_path,
        device="serial:///dev/null",
        brokers=["mqtt://127.0.0.1:1883"],
        extra="[rounds]\nbetting_seconds = -4\n",
    )
    code, lines = check([str(config), "--offline"], capsys)
    assert code == 1
    assert line(lines, "config").startswith("FAIL")
    assert "rounds.betting_seconds" in line(lines, "config")
    assert str(config) in line(lines, "config")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('[paytables.no_such_bet]\nwin = "1:1"\n', "no_such_bet"),
        ('[paytables.pair_plus_a]\nno_such_outcome = "1:1"\n', "no_such_outcome"),
        ('[paytables.pair_plus_a]\ntrail = "lots"\n', "paytables"),
    ],
)
def test_pay_table_overrides_are_checked_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, expected: str
) -> None:
    config = write_config(
        tmp_path, device="serial:///dev/null", brokers=["mqtt://127.0.0.1:1"], extra=extra
    )
    code, lines = check([str(config), "--offline"], capsys)
    assert code == 1, lines
    assert line(lines, "config").startswith("FAIL")
    assert expected in line(lines, "config")


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = check([str(tmp_path / "nope.toml")], capsys)
    assert code == 1
    assert "does not exist" in line(lines, "config")


def test_offline_checks_only_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(
        tmp_path,
        device="serial:///dev/does-not-exist",
        brokers=[f"mqtt://127.0.0.1:{free_port()}"],
    )
    code, lines = check([str(config), "--offline"], capsys)
    assert code == 0, lines
    assert len(lines) == 1
    assert lines[0].startswith("OK")
    # The same file online fails on both.
    code, lines = check([str(config), "--timeout", "5"], capsys)
    assert code == 1
    assert line(lines, "device").startswith("FAIL")
    assert "does not exist" in line(lines, "device")
    assert line(lines, "broker").startswith("FAIL")


def test_unreachable_broker_fails(
    tmp_path: Path, pty_path: str, broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = free_port()
    config = write_config(
        tmp_path,
        device=f"serial://{pty_path}",
        brokers=[f"mqtt://127.0.0.1:{broker.port}", f"mqtt://127.0.0.1:{dead}"],
    )
    code, lines = check([str(config), "--timeout", "5"], capsys)
    assert code == 1, lines
    brokers = [text for text in lines if " broker: " in f" {text}"]
    assert len(brokers) == 2
    assert brokers[0].startswith("OK")
    assert brokers[1].startswith("FAIL")
    assert str(dead) in brokers[1]
    assert lines[-1] == "1 check(s) failed"


def test_not_an_mqtt_broker_fails(
    tmp_path: Path, pty_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Something listens but never answers CONNECT: the timeout applies."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        config = write_config(
            tmp_path, device=f"serial://{pty_path}", brokers=[f"mqtt://127.0.0.1:{port}"]
        )
        code, lines = check([str(config), "--timeout", "1"], capsys)
    assert code == 1
    assert line(lines, "broker").startswith("FAIL")


def test_broker_credentials_are_used(
    tmp_path: Path, pty_path: str, broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"mqtt://127.0.0.1:{broker.tls_port}"
    good = write_config(
        tmp_path,
        device=f"serial://{pty_path}",
        brokers=[url],
        mqtt_extra='username = "table-tp-01"\npassword = "secret"\n',
    )
    code, lines = check([str(good), "--timeout", "10"], capsys)
    assert code == 0, lines
    assert "'table-tp-01'" in line(lines, "broker")

    wrong = write_config(
        tmp_path,
        device=f"serial://{pty_path}",
        brokers=[url],
        mqtt_extra='username = "table-tp-01"\npassword = "guess"\n',
    )
    code, lines = check([str(wrong), "--timeout", "10"], capsys)
    assert code == 1
    assert line(lines, "broker").startswith("FAIL")
    assert "Not authorized" in line(lines, "broker")
    assert "password" in line(lines, "broker")

    anonymous = write_config(tmp_path, device=f"serial://{pty_path}", brokers=[url])
    code, lines = check([str(anonymous), "--timeout", "10"], capsys)
    assert code == 1
    assert "anonymously" in line(lines, "broker")


def test_busy_serial_port_fails(
    tmp_path: Path, pty_path: str, broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    import serial

    holder = serial.Serial(pty_path, exclusive=True)
    try:
        config = write_config(
            tmp_path,
            device=f"serial://{pty_path}",
            brokers=[f"mqtt://127.0.0.1:{broker.port}"],
        )
        code, lines = check([str(config)], capsys)
    finally:
        holder.close()
    assert code == 1
    assert line(lines, "device").startswith("FAIL")
    assert "cannot open" in line(lines, "device")


def test_socket_device(
    tmp_path: Path, broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as bridge:
        bridge.bind(("127.0.0.1", 0))
        bridge.listen()
        port = bridge.getsockname()[1]
        config = write_config(
            tmp_path,
            device=f"socket://127.0.0.1:{port}",
            brokers=[f"mqtt://127.0.0.1:{broker.port}"],
        )
        code, lines = check([str(config)], capsys)
        assert code == 0, lines
        assert line(lines, "device").startswith("OK")
    # Nobody listens there any more.
    code, lines = check([str(config)], capsys)
    assert code == 1
    assert line(lines, "device").startswith("FAIL")


@pytest.mark.parametrize(
    "url", ["usb://1209:7ab1", "carrier-pigeon://loft", "serial://host/dev/ttyUSB0"]
)
def test_device_urls_without_a_driver_fail(
    tmp_path: Path, broker: SecureBroker, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    config = write_config(tmp_path, device=url, brokers=[f"mqtt://127.0.0.1:{broker.port}"])
    code, lines = check([str(config)], capsys)
    assert code == 1
    assert line(lines, "device").startswith("FAIL")
    assert url in line(lines, "device")


def test_journal_directory_must_be_creatable(
    tmp_path: Path, pty_path: str, broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path, device=f"serial://{pty_path}", brokers=[f"mqtt://127.0.0.1:{broker.port}"]
    )
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    text = config.read_text().replace(
        str(tmp_path / "journal.sqlite"), str(blocker / "var" / "j.sqlite")
    )
    config.write_text(text)
    code, lines = check([str(config)], capsys)
    assert code == 1
    assert line(lines, "journal").startswith("FAIL")
    assert f"{blocker} is not a directory" in line(lines, "journal")


def test_a_running_table_is_not_checked_at_its_broker(
    tmp_path: Path, pty_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal locked by a running controller: no CONNECT as its user (it would take over).

    On the shipped broker the client id is the user name (docs/security.md, "Client ids"), so a
    probe as the table's user would end the running table's session. The listener here counts
    connections: while the journal is locked none is made; once released the check connects.
    """
    from controller.journal.opening import lock, unlock

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    config = write_config(
        tmp_path, device=f"serial://{pty_path}?baud=115200", brokers=[f"mqtt://127.0.0.1:{port}"]
    )
    held = lock(tmp_path / "journal.sqlite")
    try:
        code, lines = check([str(config), "--timeout", "1"], capsys)
    finally:
        unlock(held)
    assert line(lines, "broker").startswith("SKIP"), lines
    assert "table tp-01 is running" in line(lines, "broker")
    with pytest.raises(TimeoutError):
        listener.accept()  # nothing connected
    assert code == 0, lines

    code, lines = check([str(config), "--timeout", "1"], capsys)
    connection, _ = listener.accept()  # now it tries (and fails: not an MQTT broker)
    connection.close()
    listener.close()
    assert line(lines, "broker").startswith("FAIL"), lines
