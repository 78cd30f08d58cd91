"""A QoS 1 publish that fails loudly when the broker refuses it (MQTT v5 PUBACK reason code).

``aiomqtt.Client.publish`` returns normally when the broker answers a v5 publish with a
PUBACK whose reason code is a failure (``0x87 Not authorized`` from an ACL, ``0x97 Quota
exceeded``, ``0x99 Payload format invalid``...): aiomqtt ignores the reason code. paho-mqtt
2.x passes it to its public ``on_publish`` callback (``CallbackAPIVersion.VERSION2``:
``on_publish(client, userdata, mid, reason_code, properties)``), which
:class:`controller.mqtt.client.Client` drives, so :func:`publish_checked` raises
:class:`PublishRefused` with the code.

Limits, checked against Mosquitto 2.0.11 (tests/integration/test_mosquitto_security.py):

* MQTT v5 only. A v3.1.1 PUBACK has no reason code: Mosquitto acknowledges an ACL-refused
  v3.1.1 publish as if it were accepted and drops it. :func:`publish_checked` then returns
  normally; only a subscriber can tell.
* QoS 1 only. paho ignores the reason code of a QoS 2 PUBREC, and QoS 0 has no
  acknowledgement at all.
* The client must be :class:`controller.mqtt.client.Client` (an ``aiomqtt.Client`` hides
  the reason code): :func:`publish_checked` raises :class:`~controller.errors.PublishError`
  saying so instead of silently not checking.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from controller.errors import PublishError
from controller.mqtt.adapter import failure, hand_off

if TYPE_CHECKING:
    from controller.mqtt.adapter import Properties, ReasonCode
    from controller.mqtt.client import Client


class PublishRefused(PublishError):
    """The broker answered a publish with a failure reason code (>= 0x80) in its PUBACK.

    Attributes:
        topic: The topic published to.
        reason_code: The numeric MQTT v5 reason code (``135`` = not authorised).
        reason: Its name (``"Not authorized"``).
    """

    def __init__(self, topic: str, reason_code: int, reason: str, **context: Any) -> None:
        super().__init__(
            f"broker refused the publish to {topic!r}: {reason} (reason code 0x{reason_code:02X})",
            topic=topic,
            reason_code=reason_code,
            reason=reason,
            **context,
        )
        self.topic = topic
        self.reason_code = reason_code
        self.reason = reason


def refusal(topic: str, reason_code: ReasonCode, **context: Any) -> PublishRefused | None:
    """The :class:`PublishRefused` a PUBACK reason code means, or ``None`` for a success."""
    failed = failure(reason_code)
    if failed is None:
        return None
    return PublishRefused(topic, *failed, **context)


async def publish_checked(
    client: Client,
    topic: str,
    payload: str | bytes | bytearray | None,
    qos: int = 1,
    *,
    retain: bool = False,
    properties: Properties | None = None,
    timeout: float = 5.0,  # noqa: ASYNC109 (one deadline for the publish and its PUBACK)
) -> None:
    """Publish with QoS 1 and wait for the PUBACK; raise if the broker refused the message.

    Args:
        client: A connected :class:`~controller.mqtt.client.Client` (MQTT v5 for refusals
            to be visible).
        topic: Topic to publish to.
        payload: The message body.
        qos: Must be 1 (see the module notes on QoS 0 and 2).
        retain: Retain flag.
        properties: MQTT v5 properties (paho ``Properties`` of packet type PUBLISH).
        timeout: Seconds to wait for the PUBACK.

    Raises:
        PublishRefused: The PUBACK carried a failure reason code (e.g. 0x87 Not authorized).
        PublishError: ``qos`` is not 1, the client is not this project's, could not send
            (not connected...), or no PUBACK came within ``timeout`` seconds.
    """
    if qos != 1:
        raise PublishError(
            "publish_checked supports QoS 1 only (QoS 0 has no PUBACK; paho drops the "
            "reason code of a QoS 2 PUBREC)",
            topic=topic,
            qos=qos,
        )
    future = hand_off(client, topic, payload, qos, retain=retain, properties=properties)
    assert future is not None  # QoS 1
    try:
        async with asyncio.timeout(timeout):
            reason_code = await future
    except TimeoutError as exc:
        raise PublishError(
            f"no PUBACK for the publish to {topic!r} within {timeout} s",
            topic=topic,
            timeout=timeout,
        ) from exc
    refused = refusal(topic, reason_code, qos=qos)
    if refused is not None:
        raise refused
