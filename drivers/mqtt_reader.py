"""The card-source driver for MQTT-attached tag readers (``mqtt-reader://``).

ESP32 and M5Stack readers (RC522, PN532) publish one JSON object a tag read on a topic
(:mod:`drivers.reader_json`); this driver subscribes to it with aiomqtt (public API; QoS 1),
turns the messages into reads through the reader core (the latch, the code table, the
``seq`` book, the rejections) and, when the URL names a ``cmd`` topic, publishes the table's
cues there as JSON (``{"cue": "expect", "round": 3, "slot_index": 1, "slot": "A2"}``; ``cue``
is ``expect``, ``rescan`` or ``reject``) for a reader with a display or LEDs.

Every await on the broker is bounded: the connection and subscription by ``open_timeout``,
a cue's publish by ``write_timeout``, the close by ``write_timeout``; a broker that goes
silent is found by the MQTT keepalive (the URL's ``keepalive``, 5 s by default). A lost
broker ends the reader task with :class:`~drivers.errors.ConnectionLost`, which the
supervisor (:mod:`drivers.supervisor`) reports as ``lost`` and answers by reconnecting. A
retained message is an old read the broker kept, never a tag on the table now: refused.

With ``status=TOPIC`` the source also follows the reader's own word there (``online``,
retained, and its Last Will ``offline``): a reader whose WiFi is lost is ``lost`` for the
table, and its silence removes none of its cards (``ReaderCore.reader_status``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import aiomqtt
import structlog

from drivers.errors import ConnectionLost, DeviceTimeout, TransportError
from drivers.json_readers import MqttReaderSpec
from drivers.source import DriverSettings, Read
from drivers.tag_reader import TagReaderSource

__all__ = ["MqttReaderSource"]


def _payload(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if value is None:
        return b""
    return str(value).encode("utf-8", "surrogatepass")


class MqttReaderSource(TagReaderSource):
    """Tag readers publishing JSON on an MQTT topic, as one card source.

    Args:
        url: The URL as configured (for logs and errors).
        spec: What the URL resolved to.
        settings: Timeouts.
        raw_codes: Read UIDs as they are, without a code table (enrolment).

    Raises:
        ProfileError: The code table cannot be used.
    """

    def __init__(
        self,
        url: str,
        spec: MqttReaderSpec,
        settings: DriverSettings,
        *,
        raw_codes: bool = False,
    ) -> None:
        super().__init__(url, spec, settings, raw_codes=raw_codes)
        self._spec = spec
        self._log = structlog.get_logger(__name__).bind(device=spec.device)
        self._client: aiomqtt.Client | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Connect to the broker and subscribe, within ``open_timeout``.

        Raises:
            TransportError: Already open, or the broker refused or cannot be reached.
            DeviceTimeout: Connecting and subscribing took longer than ``open_timeout``.
        """
        if self._client is not None:
            raise self._error(TransportError, "card source is already open")
        spec, seconds = self._spec, self._settings.open_timeout
        client = aiomqtt.Client(
            spec.host,
            spec.port,
            username=spec.username,
            password=spec.password,
            identifier=spec.client_id,
            keepalive=spec.keepalive,
            timeout=seconds,
        )
        stack = contextlib.AsyncExitStack()
        try:
            async with asyncio.timeout(seconds):
                await stack.enter_async_context(client)
                await client.subscribe(spec.topic, qos=1, timeout=seconds)
                if spec.status_topic is not None:
                    await client.subscribe(spec.status_topic, qos=1, timeout=seconds)
        except TimeoutError as exc:
            await self._quietly(stack)
            raise self._error(
                DeviceTimeout, "connecting to the readers' broker timed out",
                f"open_timeout={seconds}s",
            ) from exc  # fmt: skip
        except (aiomqtt.MqttError, OSError, ValueError) as exc:
            await self._quietly(stack)
            raise self._error(
                TransportError, "cannot connect to the readers' broker", str(exc)
            ) from exc
        self._client, self._stack = client, stack
        self._opened()
        self._task = asyncio.create_task(self._read_loop(client), name=f"card-source {self._url}")
        self._log.info("card_source_opened", kind="mqtt-reader", topic=spec.topic)

    async def _quietly(self, stack: contextlib.AsyncExitStack) -> None:
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await stack.aclose()
        except Exception as exc:  # never raises: the error that closed it is reported
            self._log.debug("card_source_close_error", error=str(exc))

    async def close(self) -> None:
        """Stop reading and disconnect; reads not taken yet stay queued. Never raises."""
        task, stack = self._task, self._stack
        self._task, self._client, self._stack, self._opened_at = None, None, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._lost()
        self.keep_reads()
        if stack is not None:
            await self._quietly(stack)
            self._log.info("card_source_closed")

    async def next_read(self) -> Read:
        """The next card, misread, removal or status, in arrival order.

        Raises:
            ConnectionLost: The broker went away.
            TransportError: The source is not open.
        """
        return await self.take(is_open=self._client is not None)

    async def _read_loop(self, client: aiomqtt.Client) -> None:
        timers = asyncio.create_task(self.run_timers(), name=f"card-source timers {self._url}")
        try:
            status = self._spec.status_topic
            async for message in client.messages:
                if status is not None and message.topic.matches(status):
                    self._status(_payload(message.payload))
                else:
                    self._take(_payload(message.payload), retained=bool(message.retain))
            raise aiomqtt.MqttError("the message stream ended")
        except aiomqtt.MqttError as exc:
            error = self._error(ConnectionLost, "the readers' broker connection was lost", str(exc))
            self._lost()
            self._log.error("card_source_failed", error=str(error))
            self._queue.put_nowait(error)
        finally:
            timers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timers

    # ------------------------------------------------------------------ commands

    async def _cue(self, cue: str, slot: str, **fields: Any) -> None:
        topic = self._spec.cmd_topic
        if topic is None:
            self.skipped_commands += 1
            return
        client = self._client
        if client is None:
            raise self._error(TransportError, "card source is not open")
        body = json.dumps({"cue": cue, **fields, "slot": slot}, separators=(",", ":"))
        seconds = self._settings.write_timeout
        try:
            async with asyncio.timeout(seconds):
                await client.publish(topic, body, qos=1, timeout=seconds)
        except TimeoutError as exc:
            raise self._error(DeviceTimeout, "publishing a cue to the reader timed out") from exc
        except aiomqtt.MqttError as exc:
            raise self._error(ConnectionLost, "publishing a cue failed", str(exc)) from exc
        self.commands_sent += 1

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Cue the dealer for a slot (published when the URL names a ``cmd`` topic)."""
        await self._cue("expect", slot_name, round=round_no, slot_index=slot_index)

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask for the same card again (published when the URL names a ``cmd`` topic)."""
        await self._cue("rescan", slot_name, reason=reason)

    async def reject(self, slot_name: str, reason: str) -> None:
        """Tell the dealer the card is refused (published when the URL names a ``cmd`` topic)."""
        await self._cue("reject", slot_name, reason=reason)
