"""One message to the broker, and what the broker's refusals mean for the outbox.

:class:`Sender` gives a message to the client, either handed off (the PUBACK's future is
returned: the pipelined outbox) or awaited (birth, goodbye, replay). :class:`Refusals`
keeps the refusal holding the outbox back and reports each refused (entry, topic) once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from controller.journal import JournalEntry
from controller.messages import Outbound
from controller.mqtt.ack import PublishRefused, publish_checked, refusal
from controller.mqtt.adapter import hand_off, publish_properties
from controller.mqtt.settings import MqttSettings

if TYPE_CHECKING:
    from controller.mqtt.adapter import Properties, ReasonCode
    from controller.mqtt.client import Client as MqttClient


class Refusals:
    """The broker's refusals (MQTT v5 PUBACK reason code >= 0x80) as the outbox meets them.

    Args:
        on_refused: Called with the refusal and the entry (``None`` for the birth), once per
            refused (entry, topic) until the outbox flows again. Must be quick; an exception
            is logged and ignored.
        log: The bound logger.

    Attributes:
        refused: The refusal holding the outbox back, or ``None`` while it flows.
        count: Essential refusals since the outbox last flowed (the back-off grows with it).
    """

    def __init__(
        self,
        on_refused: Callable[[PublishRefused, JournalEntry | None], None] | None,
        log: Any,
    ) -> None:
        self.on_refused = on_refused
        self.log = log
        self.refused: PublishRefused | None = None
        self.count = 0
        self._reported: set[tuple[int | None, str]] = set()

    def met(self, exc: PublishRefused, entry: JournalEntry | None, *, essential: bool) -> bool:
        """Report a refusal; return whether it holds the outbox back (``essential``).

        A refused non-essential message (retained snapshot, an answer on a reply topic) is
        logged and skipped.
        """
        self._report(exc, entry)
        if essential:
            self.refused = exc
            self.count += 1
            return True
        self.log.error(
            "broker refused a non-essential publish; skipped",
            topic=exc.topic,
            reason_code=exc.reason_code,
            reason=exc.reason,
            seq=entry.seq if entry is not None else None,
        )
        return False

    def flowing(self) -> None:
        """The outbox delivered again: forget past refusals."""
        if self.refused is not None:
            self.log.info("outbox flows again after a refused publish", topic=self.refused.topic)
        self.refused = None
        self.count = 0
        self._reported.clear()

    def _report(self, exc: PublishRefused, entry: JournalEntry | None) -> None:
        key = (entry.seq if entry is not None else None, exc.topic)
        if key in self._reported or self.on_refused is None:
            return
        self._reported.add(key)
        try:
            self.on_refused(exc, entry)
        except Exception:
            self.log.exception("on_refused callback failed", topic=exc.topic)


class Sender:
    """Gives messages to a connected client; counts them.

    Args:
        settings: Broker settings (protocol, publish timeout).
        refusals: Where refusals are reported.

    Attributes:
        published_messages: Messages given to the client so far (for logs, tests, benches).
    """

    def __init__(self, settings: MqttSettings, refusals: Refusals) -> None:
        self.settings = settings
        self.refusals = refusals
        self.published_messages = 0

    def hand(self, client: MqttClient, message: Outbound) -> asyncio.Future[ReasonCode] | None:
        """Hand ``message`` to the client now; the future of its PUBACK (``None`` for QoS 0).

        Raises:
            PublishError: The client did not take it (not connected...).
        """
        future = hand_off(
            client,
            message.topic,
            message.payload,
            message.qos,
            retain=message.retain,
            properties=self._properties(message),
        )
        self.published_messages += 1
        return future

    def check(
        self, message: Outbound, reason_code: ReasonCode, entry: JournalEntry
    ) -> PublishRefused | None:
        """The refusal holding the outbox back that a PUBACK means, if any (reported)."""
        refused = refusal(message.topic, reason_code, seq=entry.seq)
        if refused is None or not self.refusals.met(refused, entry, essential=message.essential):
            return None
        return refused

    async def send(self, client: MqttClient, message: Outbound) -> None:
        """Publish one message and wait for its PUBACK.

        MQTT v5, QoS 1: through :func:`~controller.mqtt.ack.publish_checked`, so a PUBACK with
        a failure reason code raises :class:`PublishRefused`. MQTT 3.1.1 has no reason code:
        a refused publish is acknowledged like any other and cannot be detected.
        """
        if self.settings.protocol == "5" and message.qos == 1:
            await publish_checked(
                client,
                message.topic,
                message.payload,
                message.qos,
                retain=message.retain,
                properties=self._properties(message),
                timeout=self.settings.publish_timeout,
            )
        else:
            await client.publish(
                message.topic,
                message.payload,
                qos=message.qos,
                retain=message.retain,
                timeout=self.settings.publish_timeout,
            )
        self.published_messages += 1

    async def publish(
        self, client: MqttClient, message: Outbound, entry: JournalEntry | None = None
    ) -> None:
        """:meth:`send`, with refusals reported.

        A refused essential message (an entry's ``events``/``results``/``secure`` message, the
        birth) raises: the entry stays undelivered and the connection is dropped, then retried
        after a growing back-off. A refused non-essential one (retained snapshot, an answer on
        a reply topic) is reported and skipped.
        """
        try:
            await self.send(client, message)
        except PublishRefused as exc:
            exc.context["seq"] = entry.seq if entry is not None else None
            if self.refusals.met(exc, entry, essential=message.essential):
                raise

    def _properties(self, message: Outbound) -> Properties | None:
        """The MQTT v5 PUBLISH properties of ``message`` (its correlation data), if any."""
        if self.settings.protocol != "5" or message.correlation_data is None:
            return None
        return publish_properties(message.correlation_data)
