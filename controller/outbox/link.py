"""The outbox's connection: birth, delivery until a stop or a loss, goodbye.

:class:`OutboxLink` is what :class:`~controller.publisher.Publisher` does with each
connection the :class:`~controller.mqtt.connection.Connector` makes: publish the retained
birth, run :class:`~controller.outbox.delivery.Delivery` while watching the link, and on a
stop publish the offline status before the clean disconnect. It also gives the Last Will
and says which failures start over from the first URL (a refused publish).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controller.aio import first_completed
from controller.broker import BrokerAddress
from controller.errors import PublishError
from controller.journal import Journal
from controller.messages import Topics, birth_message, offline_message
from controller.mqtt.ack import PublishRefused
from controller.mqtt.settings import MqttSettings
from controller.outbox.delivery import Delivery
from controller.outbox.sending import Sender

if TYPE_CHECKING:
    from controller.mqtt.client import Client as MqttClient


class OutboxLink:
    """One connection after another, as the outbox lives them.

    Args:
        settings: Broker settings.
        journal: The table's journal.
        topics: The table's topics.
        sender: Gives messages to the client.
        delivery: The outbox's delivery.
        connected: Set while a connection is up (birth published).
        client_id: The MQTT client id (for logs).
        game: The game id announced in the status messages.
        version: The controller version announced in the status messages.
        log: The bound logger.

    Attributes:
        client: The connected client while the birth is out, else ``None``.
    """

    def __init__(
        self,
        settings: MqttSettings,
        journal: Journal,
        topics: Topics,
        sender: Sender,
        delivery: Delivery,
        *,
        connected: asyncio.Event,
        client_id: str,
        game: str,
        version: str,
        log: Any,
    ) -> None:
        self.settings = settings
        self.journal = journal
        self.topics = topics
        self.sender = sender
        self.delivery = delivery
        self.connected = connected
        self.client_id = client_id
        self.game = game
        self.version = version
        self.log = log
        self.client: MqttClient | None = None

    def will(self) -> tuple[str, bytes]:
        """The Last Will: the retained offline status, ``connection lost``."""
        will = offline_message(
            self.topics,
            journal=self.journal.identity,
            session=self.journal.session,
            game=self.game,
            version=self.version,
            at=None,
            reason="connection lost",
        )
        return will.topic, will.payload

    def on_error(self, address: BrokerAddress, exc: Exception) -> bool:
        """Log a lost or refused connection; a refusal starts over from the first URL."""
        import aiomqtt

        if isinstance(exc, PublishRefused):
            self.log.error(
                "broker refused a publish; the outbox holds it (and what follows) and retries "
                "after a back-off",
                url=address.url,
                topic=exc.topic,
                reason_code=exc.reason_code,
                reason=exc.reason,
                seq=exc.context.get("seq"),
                undelivered=self.journal.undelivered_count(),
            )
            return True
        if isinstance(exc, aiomqtt.MqttError | OSError | TimeoutError | PublishError):
            self.log.warning(
                "broker connection lost or refused",
                url=address.url,
                error=f"{type(exc).__name__}: {exc}",
                undelivered=self.journal.undelivered_count(),
            )
        else:
            self.log.exception("publisher failed; reconnecting", url=address.url)
        return False

    async def serve(self, client: MqttClient, address: BrokerAddress) -> None:
        """One connection's life: birth, outbox until the link drops (raises) or we stop."""
        clean_exit = False
        try:
            birth = birth_message(
                self.topics,
                journal=self.journal.identity,
                session=self.journal.session,
                game=self.game,
                version=self.version,
                at=datetime.now(UTC),
                chain_head=self.journal.chain_head,
            )
            await self.sender.publish(client, birth)
            self.client = client
            self.connected.set()
            self.log.info(
                "connected",
                url=address.url,
                protocol=self.settings.protocol,
                client_id=self.client_id,
                session=self.journal.session,
                undelivered=self.journal.undelivered_count(),
            )
            await self._outbox(client, address)
            # Stop requested: say goodbye while the link is still up.
            await self._goodbye(client)
            clean_exit = True
        finally:
            self.connected.clear()
            self.delivery.progress.set()  # wake wait_idle: nothing to wait for without a link
            self.client = None
            if not clean_exit:
                # Whatever was journalled and not acknowledged by now misses its live moment:
                # it is published after the outage, flagged delayed.
                self.delivery.lateness.lost()

    async def _outbox(self, client: MqttClient, address: BrokerAddress) -> None:
        """Run the outbox until a stop is requested (returns) or the link fails (raises)."""
        import aiomqtt

        watcher = asyncio.ensure_future(self._watch_link(client))
        outbox = asyncio.ensure_future(self.delivery.serve(client))
        done = await first_completed(watcher, outbox)
        if outbox in done and not outbox.cancelled():
            error = outbox.exception()
            if error is None:
                return
            if isinstance(error, TimeoutError):
                raise PublishError(
                    "broker did not acknowledge a publish in time",
                    url=address.url,
                    timeout=self.settings.publish_timeout,
                ) from error
            raise error
        error = watcher.exception() if watcher in done and not watcher.cancelled() else None
        if error is not None:
            raise error
        raise aiomqtt.MqttError("connection to the broker ended")

    async def _goodbye(self, client: MqttClient) -> None:
        message = offline_message(
            self.topics,
            journal=self.journal.identity,
            session=self.journal.session,
            game=self.game,
            version=self.version,
            at=datetime.now(UTC),
            reason="stopped",
        )
        try:
            await self.sender.publish(client, message)
        except Exception as exc:
            self.log.warning("could not publish the offline status", error=str(exc))
        self.log.info("stopped", undelivered=self.journal.undelivered_count())

    async def _watch_link(self, client: MqttClient) -> None:
        """Raise ``MqttError`` as soon as the connection drops (the messages iterator does).

        Inbound messages (none today: the publisher subscribes to nothing) are dropped.
        """
        async for _message in client.messages:
            pass
