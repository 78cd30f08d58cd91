"""The archive's drain (``controller/mqtt/drain.py``): what it relies on in paho, and its tables.

* Fails loudly when the installed paho-mqtt is not the one the drain relies on (the exact pin
  of pyproject's ``archive`` extra), or no longer has what the drain uses.
* ``share_property_tables``: received MQTT 5 properties decode as paho's own do. The PUBLISH
  packets are packed by paho itself (its ``Properties.pack``), decoded by paho's packet decoder
  once the shared tables are installed, and compared with paho's original class decoding the
  same bytes.
"""

from __future__ import annotations

import struct
import tomllib
from pathlib import Path
from typing import Any

import pytest
from paho.mqtt import _packet as paho_packet
from paho.mqtt.enums import MQTTProtocolVersion
from paho.mqtt.exception import MQTTException
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.mqtt import drain
from controller.mqtt.adapter import publish_properties
from controller.mqtt.drain import share_property_tables

ROOT = Path(__file__).resolve().parents[2]

decoder: Any = paho_packet


def publish_packet(topic: str, mid: int, payload: bytes, properties: Any) -> bytes:
    """A PUBLISH's variable header and payload (after the fixed header), MQTT 5."""
    name = topic.encode()
    return bytes(
        struct.pack("!H", len(name)) + name + struct.pack("!H", mid) + properties.pack() + payload
    )


def sent_properties(n: int) -> Any:
    properties: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.CorrelationData = f"corr-{n}".encode()
    properties.UserProperty = [("table", f"t-{n}"), ("k", "v")]
    properties.MessageExpiryInterval = 60 + n
    properties.ContentType = "application/json"
    properties.PayloadFormatIndicator = 1
    return properties


NAMES = [
    "CorrelationData",
    "UserProperty",
    "MessageExpiryInterval",
    "ContentType",
    "PayloadFormatIndicator",
]


def test_decoded_properties_equal_pahos_own_and_share_one_set_of_tables() -> None:
    share_property_tables()
    share_property_tables()  # once: a second call changes nothing
    decoded: list[Any] = []
    for n in range(3):
        body = publish_packet(f"tables/t-{n}/events", n + 1, b'{"x":1}', sent_properties(n))
        packet = decoder.decode_publish(0x32, body, MQTTProtocolVersion.MQTTv5)
        reference: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        reference.unpack(body[2 + len(f"tables/t-{n}/events") + 2 :])
        assert packet.properties is not None
        assert isinstance(packet.properties, Properties)
        assert type(packet.properties) is not Properties  # the shared-tables class
        for name in NAMES:
            assert getattr(packet.properties, name) == getattr(reference, name), name
        assert packet.properties.json() == reference.json()  # type: ignore[no-untyped-call]
        assert packet.payload == b'{"x":1}' and packet.mid == n + 1
        decoded.append(packet.properties)
    first, second = decoded[0], decoded[1]
    assert first.names is second.names and first.properties is second.properties
    assert first.CorrelationData == b"corr-0" and second.CorrelationData == b"corr-1"


def test_shared_tables_still_check_what_is_set() -> None:
    share_property_tables()
    properties = decoder.Properties(PacketTypes.PUBACK)
    with pytest.raises(MQTTException, match="does not apply to packet type"):
        properties.CorrelationData = b"x"  # a PUBLISH property, not a PUBACK one
    with pytest.raises(MQTTException, match="Property name must be one of"):
        properties.NotAProperty = 1
    # The tables are untouched by a failed assignment: a new object still decodes.
    assert decoder.Properties(PacketTypes.PUBLISH).names["Correlation Data"] == 9


def test_properties_built_by_the_product_stay_pahos_own() -> None:
    share_property_tables()
    built: Any = publish_properties(b"abc")
    assert built.CorrelationData == b"abc"
    assert type(built) is Properties


def test_an_unpack_over_set_properties_clears_them_as_pahos_own_does() -> None:
    """paho's ``unpack`` clears first: a decoded object unpacked again holds only the new
    packet's properties, as paho's own class does."""
    share_property_tables()
    first: Any = sent_properties(1)
    second: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    second.ResponseTopic = "reply/here"
    ours: Any = decoder.Properties(PacketTypes.PUBLISH)
    reference: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    for properties in (ours, reference):
        properties.unpack(first.pack())
        properties.unpack(second.pack())
    assert ours.json() == reference.json() == {"ResponseTopic": "reply/here"}
    for name in NAMES:
        assert not hasattr(ours, name), name
    ours.clear()
    assert ours.json() == {} and ours.names["Response Topic"] == 8


def test_the_installed_paho_is_the_one_the_drain_relies_on() -> None:
    """If this fails, paho-mqtt changed under the archive's drain: read controller/mqtt/drain.py
    against the new paho, measure again (docs/archive.md, "Speed"), then move the pin."""
    import paho.mqtt

    assert paho.mqtt.__version__ == drain.PAHO_VERSION
    assert drain.relied_on() is None


@pytest.mark.infra
def test_the_archive_extra_pins_exactly_that_paho() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert f"paho-mqtt=={drain.PAHO_VERSION}" in extras["archive"]
    # The tests run on the pin: the dev extra includes the archive extra (or pins it itself).
    dev = extras["dev"]
    assert f"paho-mqtt=={drain.PAHO_VERSION}" in dev or any(
        requirement.startswith("tablectl[") and "archive" in requirement for requirement in dev
    )
    # Everything else keeps the range: a table, studio or pit install is not held to one paho.
    assert "paho-mqtt>=2.1,<3" in project["dependencies"]


def test_another_paho_is_named_and_the_drain_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import paho.mqtt

    monkeypatch.setattr(paho.mqtt, "__version__", "2.3.0")
    try:
        why = drain.relied_on()
        assert (
            why
            == f"paho-mqtt 2.3.0 is installed; the archive's drain relies on {drain.PAHO_VERSION}"
        )
    finally:
        drain.forget()
