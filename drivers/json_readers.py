"""The URLs of the JSON tag readers: MQTT-attached readers and JSON lines over USB serial.

An ESP32 or M5Stack reader (an RC522 or PN532 module) publishes one small JSON object a tag
read, as the open rfid-poker project's readers do::

    {"device_id": "seat-3", "seq": 2, "card_uid": "04A2B3C4D5E6F7"}

on an MQTT topic (``mqtt-reader://``) or as one line on its USB serial port
(``jsonl+serial://``). This module only reads the URLs (pure: no I/O, nothing of ours but
the errors), so :mod:`drivers.source` can resolve them without importing the drivers
(:mod:`drivers.reader_json` is the message codec, :mod:`drivers.mqtt_reader` and
:mod:`drivers.jsonl_source` the drivers).

``mqtt-reader://[USER[:PASSWORD]@]HOST[:PORT]/TOPIC[?options]``: the topic is the URL's path
without its first ``/``, percent-decoded (a wildcard ``#`` is written ``%23``; ``+`` as is).
Options: ``profile=NAME`` (a reader profile, ``drivers/profiles/readers/``: the latch's
times and the code table; default ``mqtt-json``), ``codes=FILE`` (the enrolled deck's code
table), ``device=ID`` (take only this
reader's messages when several share the topic), ``cmd=TOPIC`` (the reader takes cues as
JSON on this topic), ``status=TOPIC`` (the reader says ``online``/``offline`` there, its
Last Will ``offline``), ``place_after_ms``, ``remove_after_ms`` (the presence latch),
``keepalive`` (seconds, the MQTT keepalive that finds a silent broker), ``client_id``.

``jsonl+serial:///dev/ttyUSB0[?options]``: ``profile``, ``codes``, ``device``, ``place_after_ms``,
``remove_after_ms``, ``baud``, ``cues=1`` (the reader takes cues as JSON lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from drivers.errors import UnsupportedUrl

__all__ = [
    "DEFAULT_PROFILE",
    "JSON_READER_SCHEMES",
    "JsonLinesSpec",
    "MqttReaderSpec",
    "parse_json_reader_url",
]

JSON_READER_SCHEMES = ("mqtt-reader", "jsonl+serial")
"""The URL schemes of the JSON tag readers."""

DEFAULT_PROFILE = "mqtt-json"
"""The reader profile (``drivers/profiles/readers/``) when the URL names none: its presence
times and code table, which the URL's ``place_after_ms``, ``remove_after_ms`` and ``codes``
override."""

_MAX_TOPIC = 256


@dataclass(frozen=True, slots=True)
class MqttReaderSpec:
    """What an ``mqtt-reader://`` URL resolves to.

    Attributes:
        host: The broker's host.
        port: The broker's port.
        topic: The topic filter the readers publish on.
        device: The device URL without credentials (for logs, errors and the journal).
        username: The broker user, or ``None``.
        password: The broker password, or ``None``.
        profile: The reader profile's name or ``.toml`` path.
        codes: The code table file, or ``None`` for the profile's.
        device_id: Take only the messages of this reader (``None``: every reader).
        cmd_topic: Where cues go as JSON (``None``: the reader takes none).
        status_topic: Where the reader says ``online`` / ``offline`` (retained, its Last
            Will: ``offline``), ``None``: it says nothing.
        place_after_ms: The latch's stable time (``None``: the profile's).
        remove_after_ms: The latch's absence time (``None``: the profile's).
        keepalive: The MQTT keepalive (seconds).
        client_id: The MQTT client id (``None``: the broker's choice).
    """

    host: str
    port: int
    topic: str
    device: str
    username: str | None = None
    password: str | None = None
    profile: str = DEFAULT_PROFILE
    codes: str | None = None
    device_id: str | None = None
    cmd_topic: str | None = None
    status_topic: str | None = None
    place_after_ms: int | None = None
    remove_after_ms: int | None = None
    keepalive: int = 5
    client_id: str | None = None
    kind: Literal["mqtt-reader"] = "mqtt-reader"


@dataclass(frozen=True, slots=True)
class JsonLinesSpec:
    """What a ``jsonl+serial://`` URL resolves to.

    Attributes:
        port_url: The path handed to pyserial.
        device: The device path (for logs and errors).
        baud: The baud rate (``None``: the driver settings').
        profile: The reader profile's name or ``.toml`` path.
        codes: The code table file, or ``None`` for the profile's.
        device_id: Take only the lines of this reader (``None``: any).
        cues: The reader takes cues as JSON lines.
        place_after_ms: The latch's stable time (``None``: the profile's).
        remove_after_ms: The latch's absence time (``None``: the profile's).
    """

    port_url: str
    device: str
    baud: int | None = None
    profile: str = DEFAULT_PROFILE
    codes: str | None = None
    device_id: str | None = None
    cues: bool = False
    place_after_ms: int | None = None
    remove_after_ms: int | None = None
    kind: Literal["jsonl+serial"] = "jsonl+serial"


def _options(url: str, query: str, kind: str, known: tuple[str, ...]) -> dict[str, str]:
    try:
        options = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise UnsupportedUrl(f"the options of a {kind} URL do not read", url=url) from exc
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise UnsupportedUrl(
            f"unknown option in a {kind} URL (known: {', '.join(known)})",
            url=url,
            detail=", ".join(unknown),
        )
    out = {name: values[-1] for name, values in options.items()}
    for name, value in out.items():
        if value == "":
            raise UnsupportedUrl(f"the {name} option of a {kind} URL is empty", url=url)
    return out


def _number(url: str, options: dict[str, str], name: str, most: int) -> int | None:
    text = options.get(name)
    if text is None:
        return None
    if not text.isdigit() or int(text) > most:
        raise UnsupportedUrl(f"{name} is a whole number from 0 to {most}", url=url, detail=text)
    return int(text)


def _device_id(url: str, options: dict[str, str]) -> str | None:
    value = options.get("device")
    if value is not None and (len(value) > 64 or not value.isprintable()):
        raise UnsupportedUrl("device is a reader's id: 1-64 printable characters", url=url)
    return value


def _check_topic(url: str, topic: str, what: str, *, wildcards: bool) -> None:
    if not topic or len(topic) > _MAX_TOPIC or "\x00" in topic:
        raise UnsupportedUrl(f"{what} is 1-{_MAX_TOPIC} characters", url=url, detail=topic)
    levels = topic.split("/")
    for index, level in enumerate(levels):
        if not wildcards and ("+" in level or "#" in level):
            raise UnsupportedUrl(f"{what} takes no wildcard", url=url, detail=topic)
        if ("+" in level and level != "+") or ("#" in level and level != "#"):
            raise UnsupportedUrl(
                f"{what}: a wildcard stands for a whole level", url=url, detail=topic
            )
        if level == "#" and index != len(levels) - 1:
            raise UnsupportedUrl(f"{what}: '#' is the last level only", url=url, detail=topic)


def _latch_times(url: str, options: dict[str, str]) -> tuple[int | None, int | None]:
    place = _number(url, options, "place_after_ms", 60_000)
    remove = _number(url, options, "remove_after_ms", 600_000)
    if remove == 0:
        raise UnsupportedUrl(
            "remove_after_ms must exceed the reader's repeat interval (0 removes a tag "
            "between two repeats)",
            url=url,
        )
    return place, remove


_MQTT_OPTIONS = (
    "profile",
    "codes",
    "device",
    "cmd",
    "status",
    "place_after_ms",
    "remove_after_ms",
    "keepalive",
    "client_id",
)
_JSONL_OPTIONS = ("profile", "codes", "device", "cues", "baud", "place_after_ms", "remove_after_ms")


def _parse_mqtt(url: str) -> MqttReaderSpec:
    parts = urlsplit(url)
    try:
        port = parts.port or 1883
    except ValueError as exc:
        raise UnsupportedUrl("the port of an mqtt-reader URL is not a number", url=url) from exc
    if not parts.hostname:
        raise UnsupportedUrl(
            "an mqtt-reader URL names the broker: mqtt-reader://HOST[:PORT]/TOPIC", url=url
        )
    topic = unquote(parts.path.removeprefix("/"))
    if "#" in url:
        raise UnsupportedUrl("write a topic's '#' as %23 in an mqtt-reader URL", url=url)
    _check_topic(url, topic, "the reader topic", wildcards=True)
    options = _options(url, parts.query, "mqtt-reader", _MQTT_OPTIONS)
    cmd = options.get("cmd")
    if cmd is not None:
        _check_topic(url, cmd, "the cmd topic", wildcards=False)
    status = options.get("status")
    if status is not None:
        _check_topic(url, status, "the status topic", wildcards=False)
    place, remove = _latch_times(url, options)
    keepalive = _number(url, options, "keepalive", 3600)
    if keepalive is None:
        keepalive = 5
    if keepalive == 0:
        raise UnsupportedUrl("keepalive is at least 1 second (it finds a silent broker)", url=url)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return MqttReaderSpec(
        host=parts.hostname,
        port=port,
        topic=topic,
        device=f"mqtt-reader://{host}:{port}/{topic}",
        username=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
        profile=options.get("profile", DEFAULT_PROFILE),
        codes=options.get("codes"),
        device_id=_device_id(url, options),
        cmd_topic=cmd,
        status_topic=status,
        place_after_ms=place,
        remove_after_ms=remove,
        keepalive=keepalive,
        client_id=options.get("client_id"),
    )


def _parse_jsonl(url: str) -> JsonLinesSpec:
    parts = urlsplit(url)
    path = parts.path
    if parts.netloc or not path.startswith("/") or path == "/":
        raise UnsupportedUrl(
            "a jsonl+serial URL names a device path: jsonl+serial:///dev/ttyUSB0", url=url
        )
    options = _options(url, parts.query, "jsonl+serial", _JSONL_OPTIONS)
    baud = _number(url, options, "baud", 10_000_000)
    if baud == 0:
        raise UnsupportedUrl("baud must be a positive integer", url=url)
    cues = options.get("cues", "0")
    if cues not in ("0", "1"):
        raise UnsupportedUrl("cues is 0 or 1", url=url, detail=cues)
    place, remove = _latch_times(url, options)
    return JsonLinesSpec(
        port_url=path,
        device=path,
        baud=baud,
        profile=options.get("profile", DEFAULT_PROFILE),
        codes=options.get("codes"),
        device_id=_device_id(url, options),
        cues=cues == "1",
        place_after_ms=place,
        remove_after_ms=remove,
    )


def parse_json_reader_url(url: str, scheme: str) -> MqttReaderSpec | JsonLinesSpec:
    """Resolve an ``mqtt-reader://`` or ``jsonl+serial://`` URL.

    Raises:
        UnsupportedUrl: What is wrong with the URL, naming it.
    """
    if scheme == "mqtt-reader":
        return _parse_mqtt(url)
    if scheme == "jsonl+serial":
        return _parse_jsonl(url)
    raise UnsupportedUrl("not a JSON reader URL", url=url, detail=scheme)
