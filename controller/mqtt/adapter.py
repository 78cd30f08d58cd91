"""The few MQTT helpers the product shares, on :class:`~controller.mqtt.client.Client`.

Everything here uses public API only (paho-mqtt 2's and this project's own client); the one
module that reaches into paho's internals is :mod:`controller.mqtt.drain`, used only by the
archive. The rest of the product sees:

* :func:`hand_off`: give one publish to the client now, get the future of its PUBACK's
  reason code (:meth:`Client.hand_off <controller.mqtt.client.Client.hand_off>`).
* :func:`failure`: the ``(code, name)`` of a failure reason code, ``None`` for a success.
* :func:`publish_properties` / :func:`connect_properties`: MQTT v5 properties (paho objects).
* :func:`session_taken_over`: whether the broker ended the link with 0x8E.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from controller.errors import PublishError
from controller.mqtt.client import READ_PACKETS_MAX, Client, MqttLinkError

if TYPE_CHECKING:
    # paho's types, re-exported for annotations elsewhere (so they name this module only).
    from paho.mqtt.properties import Properties as Properties  # noqa: PLC0414
    from paho.mqtt.reasoncodes import ReasonCode as ReasonCode  # noqa: PLC0414

__all__ = [
    "READ_PACKETS_MAX",
    "SESSION_TAKEN_OVER",
    "connect_properties",
    "failure",
    "hand_off",
    "publish_properties",
    "session_taken_over",
]


def hand_off(
    client: Client,
    topic: str,
    payload: str | bytes | bytearray | None,
    qos: int = 1,
    *,
    retain: bool = False,
    properties: Properties | None = None,
) -> asyncio.Future[ReasonCode] | None:
    """Give one publish to the client now; return the future of its PUBACK's reason code.

    Args:
        client: A connected :class:`~controller.mqtt.client.Client`.
        topic: Topic to publish to.
        payload: The message body.
        qos: 1, or 0 (no acknowledgement: ``None`` is returned).
        retain: Retain flag.
        properties: MQTT v5 properties (:func:`publish_properties`).

    Returns:
        The PUBACK's reason code, when it comes (``None`` for QoS 0). The future is never
        resolved if the link drops first: bound the wait.

    Raises:
        PublishError: ``client`` is not this project's client (an ``aiomqtt.Client`` hides
            the PUBACK's reason code), ``qos`` is 2, or the client could not take the publish.
    """
    if not isinstance(client, Client):
        raise PublishError(
            "cannot check PUBACK reason codes on this client: use "
            "controller.mqtt.client.Client (aiomqtt.Client hides them)",
            topic=topic,
            client=type(client).__name__,
        )
    return client.hand_off(topic, payload, qos, retain=retain, properties=properties)


def failure(reason_code: ReasonCode) -> tuple[int, str] | None:
    """The numeric value and name of a failure reason code (>= 0x80); ``None`` for a success."""
    if not reason_code.is_failure:
        return None
    return int(reason_code.value), reason_code.getName()


def publish_properties(correlation_data: bytes) -> Properties:
    """MQTT v5 PUBLISH properties carrying ``correlation_data``."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.CorrelationData = correlation_data
    return properties


def connect_properties(session_expiry_seconds: int) -> Properties:
    """MQTT v5 CONNECT properties asking the broker to keep the session that long."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    properties.SessionExpiryInterval = session_expiry_seconds
    return properties


SESSION_TAKEN_OVER = 0x8E
"""MQTT 5 DISCONNECT reason code: another client connected with this client id."""


def _reason_value(code: Any) -> int | None:
    value = getattr(code, "value", code)
    return value if isinstance(value, int) else None


def session_taken_over(client: Client, error: BaseException | None = None) -> bool:
    """Whether the broker ended ``client``'s connection with 0x8E "Session taken over".

    Read from the client's :attr:`~controller.mqtt.client.Client.disconnect_reason`, or from
    an error in ``error``'s cause chain that carries the reason code (MQTT 5 only: a 3.1.1
    broker just closes the socket).
    """
    import aiomqtt

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MqttLinkError) and error.reason_code == SESSION_TAKEN_OVER:
            return True
        if (
            isinstance(error, aiomqtt.MqttCodeError)
            and _reason_value(error.rc) == SESSION_TAKEN_OVER
        ):
            return True
        error = error.__cause__ or error.__context__
    reason = getattr(client, "disconnect_reason", None)
    return reason is not None and _reason_value(reason) == SESSION_TAKEN_OVER
