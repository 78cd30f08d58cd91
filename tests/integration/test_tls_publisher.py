"""The outbox and the command router over TLS (mqtts://) to a real Mosquitto, with
passwords and client certificates, and the password kept out of logs and reprs."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from pydantic import SecretStr
from structlog.testing import capture_logs

from controller.commands import Answer, Command, CommandRouter
from controller.errors import ConfigError
from controller.journal import Journal
from controller.messages import Topics
from controller.mqtt.settings import MqttSettings
from controller.pitcli import Target, send_command
from controller.publisher import Publisher
from tests.integration._secure_broker import (
    ROLE_PASSWORDS,
    SecureBroker,
    TlsFiles,
    make_client_cert,
    make_password_file,
    make_tls,
)
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING)

ACL = Path(__file__).resolve().parents[2] / "config" / "mosquitto" / "acl"
SECRET = ROLE_PASSWORDS["table-tp-01"]


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecureBroker, TlsFiles]]:
    """Password + ACL on a TLS listener, and mutual TLS on a second one ({port})."""
    directory = tmp_path_factory.mktemp("tls-pub")
    tls = make_tls(directory / "certs")
    passwd = make_password_file(directory / "passwd", ROLE_PASSWORDS)
    config = (
        "per_listener_settings false\n"
        "allow_anonymous false\n"
        f"password_file {passwd}\n"
        f"acl_file {ACL}\n"
        "persistence false\n"
        "log_dest stderr\n"
        "listener {tls_port} 127.0.0.1\n"
        f"cafile {tls.ca_cert}\ncertfile {tls.server_cert}\nkeyfile {tls.server_key}\n"
        "listener {port} 127.0.0.1\n"
        f"cafile {tls.ca_cert}\ncertfile {tls.server_cert}\nkeyfile {tls.server_key}\n"
        "require_certificate true\n"
    )
    with SecureBroker(config, directory) as running:
        yield running, tls


def tls_settings(port: int, user: str, **extra: Any) -> MqttSettings:
    return MqttSettings(
        urls=[f"mqtts://127.0.0.1:{port}"],
        username=user,
        password=SecretStr(ROLE_PASSWORDS[user]),
        reconnect_min_seconds=0.05,
        reconnect_max_seconds=0.3,
        publish_timeout=3.0,
        connect_timeout=3.0,
        **extra,
    )


async def test_publisher_and_commands_over_tls_and_no_password_in_logs(
    tls_broker: tuple[SecureBroker, TlsFiles],
    journal: Journal,
    make_publisher: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker, tls = tls_broker
    settings = tls_settings(broker.tls_port, "table-tp-01", ca_file=tls.ca_cert)
    assert SECRET not in repr(settings) and SECRET not in str(settings)
    assert SECRET not in settings.model_dump_json()
    topics = Topics(table="tp-01")

    async def handler(command: Command) -> Answer:
        return Answer(True, "resumed")

    router = CommandRouter(settings, "tp-01", journal, handler, handler_timeout=2)
    caplog.set_level(logging.DEBUG)
    with capture_logs() as logs:
        async with (
            asyncio.timeout(30),
            make_publisher(settings, "tp-01", journal, version="t", connect_within=10),
            asyncio.TaskGroup() as group,
        ):
            cmd_task = group.create_task(router.run(), name="commands")
            async with asyncio.timeout(10):
                await router.subscribed.wait()
            viewer = aiomqtt.Client(
                "127.0.0.1",
                broker.tls_port,
                username="viewer",
                password=ROLE_PASSWORDS["viewer"],
                tls_context=ssl.create_default_context(cafile=str(tls.ca_cert)),
            )
            async with viewer:
                await viewer.subscribe(topics.events, qos=1)
                journal.append("table_status", {"state": "tls-ok"})
                async with asyncio.timeout(10):
                    message = await anext(aiter(viewer.messages))
                assert json.loads(message.payload)["data"]["state"] == "tls-ok"
            # The pit CLI's path, over TLS with the pitboss credential.
            pit = Target(tls_settings(broker.tls_port, "pitboss", ca_file=tls.ca_cert), "tp-01")
            outcome = await send_command(pit, "pit", "resume", {"round": None}, timeout=10)
            assert outcome.code == 0, outcome.text
            assert "ACCEPTED resume" in outcome.text
            await router.stop()
            await cmd_task
    assert journal.undelivered_count() == 0
    assert logs, "structlog output was captured"
    assert SECRET not in repr(logs)
    assert SECRET not in caplog.text
    assert ROLE_PASSWORDS["pitboss"] not in repr(logs) + caplog.text


async def test_untrusted_broker_certificate_is_not_accepted(
    tls_broker: tuple[SecureBroker, TlsFiles], tmp_path: Path, journal: Journal, make_publisher: Any
) -> None:
    broker, _tls = tls_broker
    stranger = make_tls(tmp_path / "other", ca_name="another CA")
    settings = tls_settings(broker.tls_port, "table-tp-01", ca_file=stranger.ca_cert)
    with capture_logs() as logs:
        async with (
            asyncio.timeout(20),
            make_publisher(settings, "tp-01", journal, version="t") as publisher,
        ):
            assert not await publisher.wait_connected(1.5)
    assert any("CERTIFICATE_VERIFY_FAILED" in str(e.get("error")) for e in logs), logs


async def test_mutual_tls_client_certificate(
    tls_broker: tuple[SecureBroker, TlsFiles], tmp_path: Path, journal: Journal, make_publisher: Any
) -> None:
    broker, tls = tls_broker
    cert, key = make_client_cert(tls, tmp_path / "client", "table-tp-01")
    with_cert = tls_settings(
        broker.port, "table-tp-01", ca_file=tls.ca_cert, cert_file=cert, key_file=key
    )
    async with asyncio.timeout(20), make_publisher(with_cert, "tp-01", journal, version="t") as up:
        assert await up.wait_connected(10)
    without = tls_settings(broker.port, "table-tp-01", ca_file=tls.ca_cert)
    async with (
        asyncio.timeout(20),
        make_publisher(without, "tp-01", journal, version="t") as publisher,
    ):
        assert not await publisher.wait_connected(1.5)


def test_unusable_tls_files_stop_at_start(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.sqlite")
    missing = tmp_path / "nope.crt"
    settings = tls_settings(1, "table-tp-01", ca_file=missing)
    with pytest.raises(ConfigError, match=r"mqtt.ca_file .*nope.crt"):
        Publisher(settings, "tp-01", journal, game="g", version="t")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    settings = tls_settings(1, "table-tp-01", cert_file=garbage)
    with pytest.raises(ConfigError, match=r"mqtt.cert_file .*garbage.pem"):
        Publisher(settings, "tp-01", journal, game="g", version="t")
    with pytest.raises(ConfigError, match="key_file is set without cert_file"):
        tls_settings(1, "table-tp-01", key_file=garbage)
    # Plain mqtt:// URLs do not read TLS files at all.
    plain = MqttSettings(urls=["mqtt://127.0.0.1:1"], ca_file=missing)
    Publisher(plain, f"t-{uuid.uuid4().hex[:4]}", journal, game="g", version="t")
    journal.close()
