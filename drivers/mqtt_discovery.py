"""Which MQTT-attached tag readers publish on a broker: what ``tablectl devices --mqtt`` lists.

It listens to a topic filter for a few seconds (every await bounded) and lists each reader
heard, by topic and ``device_id``, with the ``mqtt-reader://`` URL that takes only its
messages. Each message goes through the readers' one bounded parse
(:func:`drivers.reader_json.parse_message`); what does not read is counted, never listed as a
reader. A reader lists only while a tag lies on it (readers publish reads, not presence):
put a card on each.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from urllib.parse import quote

import aiomqtt

from drivers.errors import DeviceTimeout, TransportError
from drivers.json_readers import MqttReaderSpec
from drivers.reader_json import ReaderMessage, parse_message

__all__ = ["HeardReader", "ReaderSurvey", "listen_for_readers", "render_readers"]

MAX_READERS_LISTED = 256
"""Readers one survey keeps (a flood of made-up ids stops being listed, and is counted)."""


@dataclass
class HeardReader:
    """One reader heard.

    Attributes:
        topic: Where it publishes.
        device_id: Its ``device_id``.
        url: The ``mqtt-reader://`` URL that reads it (and no other on its topic).
        messages: Its messages heard.
        tags: The distinct tags it reported.
        last_seq: Its last ``seq``, if it sends one.
    """

    topic: str
    device_id: str
    url: str
    messages: int = 0
    tags: set[str] = field(default_factory=set)
    last_seq: int | None = None


@dataclass
class ReaderSurvey:
    """What a listen heard: the readers, and how many messages did not read."""

    readers: dict[tuple[str, str], HeardReader] = field(default_factory=dict)
    unreadable: int = 0
    not_listed: int = 0

    def take(self, spec: MqttReaderSpec, topic: str, payload: bytes) -> None:
        """Count one message."""
        message = parse_message(payload)
        if not isinstance(message, ReaderMessage):
            self.unreadable += 1
            return
        key = (topic, message.device_id)
        reader = self.readers.get(key)
        if reader is None:
            if len(self.readers) >= MAX_READERS_LISTED:
                self.not_listed += 1
                return
            reader = self.readers[key] = HeardReader(
                topic, message.device_id, _url(spec, topic, message.device_id)
            )
        reader.messages += 1
        if message.uid is not None:
            reader.tags.add(message.uid)
        reader.last_seq = message.seq if message.seq is not None else reader.last_seq


def _url(spec: MqttReaderSpec, topic: str, device_id: str) -> str:
    host = f"[{spec.host}]" if ":" in spec.host else spec.host
    path = quote(topic, safe="/+")
    return f"mqtt-reader://{host}:{spec.port}/{path}?device={quote(device_id, safe='')}"


async def listen_for_readers(
    spec: MqttReaderSpec, seconds: float, *, open_timeout: float = 5.0
) -> ReaderSurvey:
    """Listen on ``spec``'s broker and topic filter for ``seconds``.

    Raises:
        TransportError: The broker refused or cannot be reached.
        DeviceTimeout: Connecting took longer than ``open_timeout``.
    """
    survey = ReaderSurvey()
    client = aiomqtt.Client(
        spec.host,
        spec.port,
        username=spec.username,
        password=spec.password,
        timeout=open_timeout,
        keepalive=spec.keepalive,
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.timeout(open_timeout):
                await stack.enter_async_context(client)
                await client.subscribe(spec.topic, qos=0, timeout=open_timeout)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    async for message in client.messages:
                        if message.retain:
                            continue  # an old read the broker kept: no reader heard now
                        payload = message.payload
                        data = payload if isinstance(payload, bytes) else str(payload).encode()
                        survey.take(spec, str(message.topic), data)
    except TimeoutError as exc:
        raise DeviceTimeout("connecting to the readers' broker timed out", url=spec.device) from exc
    except (aiomqtt.MqttError, OSError) as exc:
        raise TransportError(
            "cannot listen on the readers' broker", url=spec.device, detail=str(exc)
        ) from exc
    return survey


def render_readers(survey: ReaderSurvey, where: str, seconds: float) -> list[str]:
    """The lines ``tablectl devices --mqtt`` prints for a survey."""
    lines = [
        f"reader   {reader.url:<44}  {len(reader.tags)} tag(s) in {reader.messages} message(s)"
        + (f", last seq {reader.last_seq}" if reader.last_seq is not None else "")
        for reader in sorted(survey.readers.values(), key=lambda r: (r.topic, r.device_id))
    ]
    if not lines:
        lines.append(
            f"no tag reader heard on {where} in {seconds:g} s (a reader publishes while a "
            "tag lies on it: put a card on each)"
        )
    if survey.unreadable:
        lines.append(f"note: {survey.unreadable} message(s) on {where} were no reader's")
    if survey.not_listed:
        lines.append(f"note: {survey.not_listed} more reader id(s) not listed")
    return lines
