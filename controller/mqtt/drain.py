"""The archive's drain: the two measured gains that need paho-mqtt's internals (archive only).

Every other MQTT client of the product (table, studio, pit) uses paho's public API only
(:mod:`controller.mqtt.client`). The archive drains backlogs of tens of thousands of messages,
and two of paho's costs there have no public way around them (docs/archive.md, "Speed"):

* :func:`share_property_tables`: paho decodes every received MQTT 5 packet into a new
  ``Properties`` whose ``__init__`` builds its own copy of three constant tables (about 60
  objects a packet; with the garbage collections they bring on, the drain's largest single
  cost). This installs, process-wide and once, a ``Properties`` subclass for paho's packet
  decoder (``paho.mqtt._packet``) whose ``__init__`` points at one set of tables built by paho
  itself. Objects behave as paho's own (same class hierarchy, attributes and values).
* :func:`ack_all`: a committed batch's PUBACKs written to the socket together (the 4 bytes
  paho would write for each, queued as one packet through paho's own ``_packet_queue``, so
  they keep their place among paho's other packets); paho's public ``ack`` sends each with a
  ``send`` of its own (2,000 system calls a 2,000-message batch).

Both rely on paho-mqtt **exactly** :data:`PAHO_VERSION`, which the ``archive`` extra pins
(``pip install 'tablectl[archive]'``; ``dev`` pins it too). With any other paho (an install
without the extra), :func:`relied_on` says why, and both fall back to the public API: the
archive stays correct, only slower (:func:`ack_all` acknowledges one message at a time;
the property tables stay paho's), and says so once in its log.
``tests/unit/test_mqtt_drain.py`` fails loudly when the installed paho is not the pinned one
or no longer has what this module uses.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import structlog

from controller.errors import PublishError

if TYPE_CHECKING:
    from controller.mqtt.client import Client

__all__ = [
    "PAHO_VERSION",
    "ack_all",
    "forget",
    "install",
    "relied_on",
    "share_property_tables",
]

log = structlog.get_logger(__name__)

PAHO_VERSION = "2.2.0"
"""The paho-mqtt release this module was written and measured against (pyproject's pin)."""

_PUBACK = struct.Struct("!BBH")
"""A PUBACK without reason code or properties: type, remaining length 2, packet id."""

_state: dict[str, Any] = {"checked": None, "warned": False}


def relied_on() -> str | None:
    """Why this module's fast paths cannot be used here, or ``None`` when they can.

    Checks the installed paho's version against :data:`PAHO_VERSION`, and that what this
    module uses is there: ``paho.mqtt._packet.Properties`` (the decoder's class) and
    ``Client._packet_queue(command, packet, mid, qos)``.
    """
    import inspect

    import paho.mqtt
    import paho.mqtt.client as paho_client
    from paho.mqtt.properties import Properties

    version = getattr(paho.mqtt, "__version__", "?")
    if version != PAHO_VERSION:
        return f"paho-mqtt {version} is installed; the archive's drain relies on {PAHO_VERSION}"
    try:
        from paho.mqtt import _packet as decoder
    except ImportError:
        return "paho.mqtt._packet (paho's packet decoder) is gone"
    current = getattr(decoder, "Properties", None)
    if current is not Properties and not getattr(current, "tablectl_shared_tables", False):
        return "paho.mqtt._packet.Properties is not paho.mqtt.properties.Properties"
    queue = getattr(paho_client.Client, "_packet_queue", None)
    if queue is None:
        return "paho.mqtt.client.Client._packet_queue is gone"
    parameters = list(inspect.signature(queue).parameters)[1:5]
    if parameters != ["command", "packet", "mid", "qos"]:
        return f"paho.mqtt.client.Client._packet_queue takes {parameters}"
    return None


def _usable() -> bool:
    if _state["checked"] is None:
        _state["checked"] = relied_on() or ""
    return _report()


def _report() -> bool:
    why: str = _state["checked"]
    if why and not _state["warned"]:
        _state["warned"] = True
        log.warning(
            "the archive's MQTT drain uses paho's public API only (slower): "
            f"{why} (pip install 'tablectl[archive]' pins it)",
            paho_pin=PAHO_VERSION,
        )
    return not why


def forget() -> None:
    """Check the installed paho again at the next use (tests that stand in for another paho)."""
    _state["checked"] = None
    _state["warned"] = False


def install() -> None:
    """Install what this module can on this paho (the archive calls it for each client)."""
    if _usable():
        share_property_tables()


def share_property_tables() -> None:
    """Build received packets' MQTT 5 properties on shared, read-only lookup tables.

    paho only reads these tables after ``__init__`` (``getIdentFromName``, ``__setattr__``'s
    checks, ``pack``/``unpack``), so one set, built once by paho itself, is shared by every
    object decoded. Installed once per process.

    Raises:
        PublishError: paho's decoder no longer builds ``Properties`` where this expects it
            (paho changed its internals): nothing is installed.
    """
    from paho.mqtt import _packet as paho_packet
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    decoder: Any = paho_packet
    current: Any = getattr(decoder, "Properties", None)
    if getattr(current, "tablectl_shared_tables", False):
        return
    if current is not Properties:
        raise PublishError(
            "cannot share paho's property tables: paho.mqtt._packet.Properties is not "
            "paho.mqtt.properties.Properties (paho changed its internals?)",
            found=repr(current),
        )
    tables = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    attributes = frozenset(name.replace(" ", "") for name in tables.names)

    class SharedTables(Properties):
        """paho's ``Properties`` on the shared tables (no per-object copies)."""

        tablectl_shared_tables = True

        def __init__(self, packetType: int) -> None:
            state = self.__dict__  # paho's __setattr__ is for property names only
            state["packetType"] = packetType
            state["types"] = tables.types
            state["names"] = tables.names
            state["properties"] = tables.properties

        def clear(self) -> None:
            """Delete every property set, as paho's ``clear`` does, trying only the ones set.

            paho's ``unpack`` clears first: paho's own tries each of the 27 names
            (``hasattr``), a tenth of a received message's cost in the drain.
            """
            for name in [name for name in self.__dict__ if name in attributes]:
                delattr(self, name)

    decoder.Properties = SharedTables


def ack_all(client: Client, received: Iterable[tuple[int, int]]) -> None:
    """Acknowledge received messages ``(mid, qos)``, in order, on a ``manual_acks`` client.

    On the pinned paho, the QoS 1 acknowledgements are written together (the bytes paho
    would write: ``0x40``, length 2, the packet id; a success needs no reason code in MQTT 5
    either); otherwise, and for QoS 2, through paho's public ``ack`` one by one. On a link
    already gone this does nothing: the broker sends the messages again on the next one.
    """
    if not client.connected:
        return
    if not _usable():
        for mid, qos in received:
            client.ack(mid, qos)
        return
    from paho.mqtt.client import PUBACK

    paho: Any = client.paho
    pubacks = bytearray()
    for mid, qos in received:
        if qos == 1:
            pubacks += _PUBACK.pack(PUBACK, 2, mid)
        elif qos == 2:  # pragma: no cover - the archive subscribes with QoS 1
            if pubacks:
                paho._packet_queue(PUBACK, bytes(pubacks), 0, 1)
                pubacks.clear()
            client.ack(mid, qos)
    if pubacks:
        paho._packet_queue(PUBACK, bytes(pubacks), 0, 1)
