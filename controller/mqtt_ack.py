"""A QoS 1 publish that fails loudly when the broker refuses it (MQTT v5 PUBACK reason code).

``aiomqtt.Client.publish`` returns normally when the broker answers a v5 publish with a
PUBACK whose reason code is a failure (``0x87 Not authorized`` from an ACL, ``0x97 Quota
exceeded``, ``0x99 Payload format invalid``...): aiomqtt ignores the reason code. paho-mqtt
2.x, underneath, does pass it to the ``on_publish`` callback (``CallbackAPIVersion.VERSION2``:
``on_publish(client, userdata, mid, reason_code, properties)``), so :func:`publish_checked`
hooks that callback (keeping aiomqtt's own) and raises :class:`PublishRefused` with the code.

Limits, checked against Mosquitto 2.0.11 (tests/integration/test_mosquitto_security.py):

* MQTT v5 only. A v3.1.1 PUBACK has no reason code: Mosquitto acknowledges an ACL-refused
  v3.1.1 publish as if it were accepted and drops it. :func:`publish_checked` then returns
  normally; only a subscriber can tell.
* QoS 1 only. paho ignores the reason code of a QoS 2 PUBREC, and QoS 0 has no
  acknowledgement at all.
* It reaches into ``aiomqtt.Client._client`` (the paho client): aiomqtt 2.5 exposes no
  public hook. If a future aiomqtt renames it, :func:`publish_checked` raises
  :class:`~controller.errors.PublishError` saying so instead of silently not checking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from controller.errors import PublishError

if TYPE_CHECKING:
    import aiomqtt
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode

_TRACKER_ATTRIBUTE = "_tablectl_puback_tracker"


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


class _PubackTracker:
    """Sits in front of aiomqtt's ``on_publish``; resolves futures of awaited mids."""

    def __init__(self, paho_client: Any) -> None:
        self.pending: dict[int, asyncio.Future[ReasonCode]] = {}
        self.original: Callable[..., None] | None = paho_client.on_publish
        paho_client.on_publish = self.on_publish

    def on_publish(
        self,
        client: Any,
        userdata: Any,
        mid: int,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        future = self.pending.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(reason_code)
        if self.original is not None:
            self.original(client, userdata, mid, reason_code, properties)


def _tracker(client: aiomqtt.Client) -> _PubackTracker:
    paho_client = getattr(client, "_client", None)
    if paho_client is None or not hasattr(paho_client, "on_publish"):
        raise PublishError(
            "cannot check PUBACK reason codes: this aiomqtt.Client has no paho client "
            "(aiomqtt changed its internals?)",
            client=type(client).__name__,
        )
    tracker = getattr(paho_client, _TRACKER_ATTRIBUTE, None)
    # aiomqtt may (re)install its callback, e.g. on a new connection: hook again then.
    if not isinstance(tracker, _PubackTracker) or paho_client.on_publish != tracker.on_publish:
        tracker = _PubackTracker(paho_client)
        setattr(paho_client, _TRACKER_ATTRIBUTE, tracker)
    return tracker


def hand_off(
    client: aiomqtt.Client,
    topic: str,
    payload: str | bytes | bytearray | None,
    qos: int = 1,
    *,
    retain: bool = False,
    properties: Properties | None = None,
) -> asyncio.Future[ReasonCode] | None:
    """Give one publish to paho now; return the future of its PUBACK's reason code.

    paho writes the packet at once (or queues it behind its in-flight limit); nothing is
    awaited, so a caller can pipeline many publishes and check each acknowledgement later.
    MQTT 3.1.1 acknowledgements resolve with a success code (3.1.1 has no reason codes).

    Args:
        client: A connected ``aiomqtt.Client``.
        topic: Topic to publish to.
        payload: The message body.
        qos: 1, or 0 (no acknowledgement: ``None`` is returned).
        retain: Retain flag.
        properties: MQTT v5 properties (paho ``Properties`` of packet type PUBLISH).

    Returns:
        The PUBACK's reason code, when it comes (``None`` for QoS 0). The future is never
        resolved if the link drops first: bound the wait.

    Raises:
        PublishError: ``qos`` is 2, or the client could not take the publish (not connected...).
    """
    import paho.mqtt.client as mqtt

    if qos not in (0, 1):
        raise PublishError(
            "QoS 2 is not supported (paho drops the reason code of a QoS 2 PUBREC)",
            topic=topic,
            qos=qos,
        )
    tracker = _tracker(client)
    # paho's network I/O runs in this event loop (aiomqtt's socket callbacks), so the PUBACK
    # cannot be handled between publish() returning and the future being registered.
    info = client._client.publish(topic, payload, qos, retain, properties)
    if info.rc != mqtt.MQTT_ERR_SUCCESS:
        raise PublishError(
            f"could not send the publish to {topic!r}: {mqtt.error_string(info.rc)}",
            topic=topic,
            rc=int(info.rc),
        )
    if qos == 0:
        return None
    future: asyncio.Future[ReasonCode] = asyncio.get_running_loop().create_future()
    tracker.pending[info.mid] = future
    return future


def refusal(topic: str, reason_code: ReasonCode, **context: Any) -> PublishRefused | None:
    """The :class:`PublishRefused` a PUBACK reason code means, or ``None`` for a success."""
    if not reason_code.is_failure:
        return None
    return PublishRefused(topic, int(reason_code.value), reason_code.getName(), **context)


async def publish_checked(
    client: aiomqtt.Client,
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
        client: A connected ``aiomqtt.Client`` (MQTT v5 for refusals to be visible).
        topic: Topic to publish to.
        payload: The message body.
        qos: Must be 1 (see the module notes on QoS 0 and 2).
        retain: Retain flag.
        properties: MQTT v5 properties (paho ``Properties`` of packet type PUBLISH).
        timeout: Seconds to wait for the PUBACK.

    Raises:
        PublishRefused: The PUBACK carried a failure reason code (e.g. 0x87 Not authorized).
        PublishError: ``qos`` is not 1, the client could not send (not connected...), or no
            PUBACK came within ``timeout`` seconds.
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
