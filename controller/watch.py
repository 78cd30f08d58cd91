"""``tablectl watch``: a table's messages, as a consumer sees them, one readable line each.

:func:`describe` turns one received message into text (pure, tested); :func:`watch`
subscribes to a table's public topics, reads each message with the one hardened parse and
follows the table with the one table fold (:class:`controller.tablefold.TableFold`: repeats
dropped, gaps noticed, a ``seq`` beyond what the table could have sent rejected), and prints;
a rejected message is a line ``! topic: rejected: reason`` (and logged once, counted: reader
``watch``). The sub-command is :mod:`controller.cli.watch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import structlog

from controller.broker import Protocol, parse_broker_url
from controller.errors import ConfigError
from controller.inbound import Rejection, RejectionLog
from controller.journal import settlement_rows
from controller.messages import Envelope
from controller.mqtt.receive import take_until_stopped
from controller.tablefold import Channel, TableFold, wire
from controller.wording import reason_words, returns_words, settled_reason

log = structlog.get_logger(__name__)


def _time(envelope: Mapping[str, Any]) -> str:
    at = envelope.get("at")
    if isinstance(at, str) and "T" in at:
        return at.split("T", 1)[1].rstrip("Z")[:12]
    return "--:--:--.---"


def _parse_utc(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _fields(data: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in data.items())


_ROUND_NUMBER = re.compile(r"-(\d{6,})$")
"""A round id's number (``sim-1-3f9a1c2e-000042``: 42)."""


def _round_label(
    envelope: Mapping[str, Any],
    data: Mapping[str, Any],
    *,
    with_id: bool = False,
    game: Any = None,
) -> str:
    """``round 42``: one name for a round on every line (the number people count by).

    ``with_id``: ``round 42 (sim-1-3f9a1c2e-000042)``, on the lines where the id is what a
    command asks for next (halted: ``pit resume --round ID``); ``game``: ``round 42
    (sim-1-3f9a1c2e-000042, teen-patti-20-20)``, the round opened (``tablectl recall ID``).
    """
    round_id = envelope.get("round")
    number = data.get("round_no")
    if number is None and isinstance(round_id, str):
        found = _ROUND_NUMBER.search(round_id)
        number = int(found.group(1)) if found else None
    if number is None:
        return f"round {round_id}" if round_id else "table"
    named = [str(part) for part in (round_id if with_id or game else None, game) if part]
    return f"round {number} ({', '.join(named)})" if named else f"round {number}"


def _describe_status(envelope: Mapping[str, Any]) -> str:
    table = envelope.get("table", "?")
    if envelope.get("state") == "online":
        return (
            f"{_time(envelope)} table {table} ONLINE: {envelope.get('game')} "
            f"(controller {envelope.get('version')}, session {envelope.get('session')})"
        )
    reason = envelope.get("reason") or "offline"
    at = "" if envelope.get("at") else " (last will)"
    return f"{_time(envelope)} table {table} OFFLINE: {reason}{at}"


def _round_opened(
    envelope: Mapping[str, Any], data: Mapping[str, Any], now: datetime | None
) -> str:
    """``round_opened`` (or, after steps before betting, ``betting_opened``)."""
    if data.get("before_betting"):
        return (
            f"{_round_label(envelope, data, with_id=True, game=data.get('game'))}: opened; betting "
            f"({data.get('betting_seconds')} s) opens after the bank offers"
        )
    closes = data.get("betting_closes_at")
    text = (
        f"{_round_label(envelope, data, with_id=True, game=data.get('game'))}: betting open for "
        f"{data.get('betting_seconds')} s, closes {closes}"
    )
    closes_at = _parse_utc(closes)
    if now is not None and closes_at is not None:
        left = (closes_at - now).total_seconds()
        text += f" (in {left:.1f} s)" if left > 0 else " (already closed)"
    return text


def _bank(bank: Mapping[str, Any]) -> str:
    """Mahjong Pai Gow's ``table_info`` of kind ``bank``: who banks, who declined."""
    declined = [o.get("position") for o in bank.get("offers") or [] if o.get("choice") == "decline"]
    passed = f" (declined: {', '.join(str(p) for p in declined)})" if declined else ""
    return f"  {bank.get('banker')} banks{passed}"


def _round_result(envelope: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    winner = data.get("winner")
    verdict = "tie" if winner == "tie" else f"{winner} wins"
    hands = data.get("hands") or {}
    cards = data.get("cards") or {}
    parts = []
    for hand, summary in hands.items():
        description = summary.get("description") if isinstance(summary, Mapping) else summary
        shown = " ".join(cards.get(hand, [])) if isinstance(cards, Mapping) else ""
        parts.append(f"{hand} [{shown}] {description}" if shown else f"{hand} {description}")
    details = data.get("details")
    ended = details.get("ended") if isinstance(details, Mapping) else None
    if not parts:  # a Hold'em hand won by folds shows no hand
        how = " (the others folded)" if ended == "folds" else ""
        return f"{_round_label(envelope, data)} result: {verdict}{how}"
    return f"{_round_label(envelope, data)} result: {verdict}; " + "; ".join(parts)


def _detail(data: Mapping[str, Any]) -> str:
    return f" ({data['detail']})" if data.get("detail") else ""


def _rescan(data: Mapping[str, Any]) -> str:
    detail = f": {data['detail']}" if data.get("detail") else ""
    return (
        f"  {data.get('slot')} misread ({data.get('cause')}{detail}), rescan requested "
        f"(attempt {data.get('attempt')})"
    )


def _decision_open(data: Mapping[str, Any]) -> str:
    seat = f" seat {data['seat']}" if data.get("seat") else ""
    options = "/".join(str(o) for o in data.get("options") or [])
    return (
        f"  decision {data.get('window')}{seat}: {data.get('kind')} [{options}] "
        f"within {data.get('seconds')} s"
    )


def _decision_applied(data: Mapping[str, Any]) -> str:
    decision = data.get("decision") or {}
    if not decision:
        return (
            f"  decision {data.get('window')}: nothing chosen by the deadline "
            "(the game's default applies)"
        )
    how = " (default at the deadline)" if data.get("default") else ""
    if data.get("source") == "removal":
        how = " (the cards left the reader)"
    return f"  decision {data.get('window')}: {_fields(decision)}{how}"


def _card_refused(data: Mapping[str, Any]) -> str:
    """A refused card: at its slot, or read before the deal (a stray read during betting)."""
    card = data.get("card") or "a card"
    reason = reason_words(data.get("reason"))
    if data.get("slot") is None:
        return f"  {card} read before the deal, refused: {reason}"
    return f"  {data.get('slot')} refused {card}: {reason}"


def _command_answered(data: Mapping[str, Any]) -> str:
    verdict = "accepted" if data.get("accepted") else f"refused: {data.get('reason')}"
    return f"command {data.get('name')} ({data.get('command_id')}) {verdict}"


def _pit_alert(data: Mapping[str, Any]) -> str:
    where = f" at {data['slot']}" if data.get("slot") else ""
    rest = {k: v for k, v in data.items() if k not in ("slot", "reason") and v is not None}
    said = [str(data["reason"])] if data.get("reason") else []
    said += [_fields(rest)] if rest else []
    return f"PIT ALERT{where}: {'; '.join(said) or 'the pit boss is needed'}"


_Data = Mapping[str, Any]
_Envelope = Mapping[str, Any]

_DATA_LINES: dict[str, Callable[[_Data], str]] = {
    "card_dealt": lambda d: (
        f"  {d.get('slot')} {d.get('card') or '[hidden]'}"
        + (" (entered by hand)" if d.get("source") == "manual" else "")
    ),
    "rescan_requested": _rescan,
    "card_refused": _card_refused,
    "device_status": lambda d: f"device {d.get('device')}: {d.get('state')}{_detail(d)}",
    "table_status": lambda d: f"table: {d.get('state')}{_detail(d)}",
    "decision_open": _decision_open,
    "decision_applied": _decision_applied,
    "cards_revealed": lambda d: f"  {d.get('hand')} revealed: {' '.join(d.get('cards') or [])}",
    "command_received": lambda d: (
        f"command {d.get('name')} from {d.get('role')} ({d.get('command_id')})"
    ),
    "command_answered": _command_answered,
    "pit_alert": _pit_alert,
}
"""Event kinds whose line depends on the entry's data only."""

_ROUND_LINES: dict[str, Callable[[_Envelope, _Data], str]] = {
    "betting_closed": lambda e, d: f"{_round_label(e, d)}: betting closed, dealing",
    "round_result": _round_result,
    "round_voided": lambda e, d: f"{_round_label(e, d)} VOIDED: {reason_words(d.get('reason'))}",
    "round_halted": lambda e, d: (
        f"{_round_label(e, d, with_id=True)} HALTED: {reason_words(d.get('reason'))}"
    ),
    "round_resumed": lambda e, d: f"{_round_label(e, d)} resumed by {d.get('by')}",
}
"""Event kinds whose line names the round."""


def _describe_event(
    kind: str, envelope: Mapping[str, Any], data: Mapping[str, Any], now: datetime | None
) -> str:
    if kind in ("round_opened", "betting_opened"):
        return _round_opened(envelope, data, now)
    if (
        kind == "table_info"
        and data.get("kind") == "bank"
        and isinstance(data.get("data"), Mapping)
    ):
        return _bank(data["data"])
    round_line = _ROUND_LINES.get(kind)
    if round_line is not None:
        return round_line(envelope, data)
    data_line = _DATA_LINES.get(kind)
    if data_line is not None:
        return data_line(data)
    if kind == "table_info" and "data" not in data:
        return f"table info {data.get('kind')} (secure)"
    return f"{kind.replace('_', ' ')}: {_fields(data)}"


_MAX_LINES_PER_GROUP = 8


def _bet_lines(bets: Mapping[str, Any], indent: str = "    ") -> list[str]:
    """One line per settled bet (``settlement_rows``: its qualifiers, then its bet id).

    A leaf is ``{"outcome", "payout", "reason"?}``; a nested map is shown as a group. Long
    lists are cut after a few lines, with the count of the rest.
    """
    lines: list[str] = []
    leaves = {k: v for k, v in bets.items() if isinstance(v, Mapping) and "outcome" in v}
    width = max((len(str(bet)) for bet in leaves), default=0)
    for shown, (bet, settled) in enumerate(bets.items()):
        if shown == _MAX_LINES_PER_GROUP:
            lines.append(f"{indent}... and {len(bets) - shown} more")
            break
        if isinstance(settled, Mapping) and "outcome" in settled:
            why = settled_reason(settled)
            reason = f" ({why})" if why else ""
            lines.append(
                f"{indent}{bet:<{width}}  {settled.get('outcome', '?'):<6} "
                f"{returns_words(settled.get('payout'))}{reason}"
            )
        elif isinstance(settled, Mapping):
            lines.append(f"{indent}{bet}:")
            lines.extend(_bet_lines(settled, indent + "  "))
        else:
            lines.append(f"{indent}{bet}: {settled}")
    return lines


def _describe_results(kind: str, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    title = "refunds" if kind == "round_voided" else "settlement"
    lines = [f"{_round_label(envelope, data)} {title}:"]
    lines.extend(_bet_lines(settlement_rows(data.get("bets"))))
    details = data.get("details")
    pots = details.get("pots") if isinstance(details, Mapping) else None
    if isinstance(pots, list):  # player-banked games (Hold'em): the pots and who took them
        for number, pot in enumerate(pots, 1):
            if isinstance(pot, Mapping):
                shares = ", ".join(
                    f"{seat} {chips}" for seat, chips in dict(pot.get("shares") or {}).items()
                )
                lines.append(f"    pot {number}: {pot.get('amount')} chips -> {shares}")
    return "\n".join(lines)


def describe(topic: str, envelope: Mapping[str, Any], *, now: datetime | None = None) -> str | None:
    """One message as text for people, or ``None`` for messages not worth a line.

    Args:
        topic: The topic it arrived on.
        envelope: The decoded JSON payload.
        now: The current time (aware), to show the betting countdown; omitted in tests.

    Returns:
        A line (settlements: a title line and one indented line per bet), or ``None`` for
        the retained round snapshot, ``secure/``, ``cmd/`` and ``reply/`` topics.
    """
    levels = topic.split("/")
    if "secure" in levels or "cmd" in levels or "reply" in levels:
        return None
    leaf = levels[-1]
    if leaf == "status":
        return _describe_status(envelope)
    kind = str(envelope.get("kind", "?"))
    raw = envelope.get("data")
    data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    delayed = " [delayed]" if envelope.get("delayed") else ""
    if leaf == "events":
        text = _describe_event(kind, envelope, data, now)
    elif leaf == "results":
        text = _describe_results(kind, envelope, data)
    else:
        return None
    stamp = f"{_time(envelope)} #{envelope.get('seq', '?')}{delayed}"
    return f"{stamp} {text}"


async def watch(
    urls: Sequence[str],
    table_id: str,
    *,
    protocol: Protocol = "5",
    prefix: str = "tables",
    out: TextIO | None = None,
    stop: asyncio.Event | None = None,
    reconnect_seconds: float = 1.0,
    username: str | None = None,
    password: str | None = None,
    ca_file: str | None = None,
    subscribed: asyncio.Event | None = None,
    on_event_seq: Callable[[int], None] | None = None,
    quiet_seconds: float | None = None,
    on_results_seq: Callable[[int], None] | None = None,
) -> None:
    """Print a table's public messages until ``stop`` is set (or forever), reconnecting.

    Subscribes to ``{prefix}/{table}/#`` and skips ``secure/``, ``cmd/`` and ``reply/``.
    ``mqtts://`` URLs use TLS (the broker verified against ``ca_file`` or the system trust
    store); ``username``/``password`` for brokers without anonymous access (``viewer``).
    ``subscribed`` is set once the subscription is acknowledged (``tablectl run --show`` opens
    no round before, so the view misses nothing); ``on_event_seq`` is called with the ``seq``
    of each ``events`` message shown (so ``run --show`` can wait for the last one at exit),
    ``on_results_seq`` with that of each ``results`` message shown (a settlement).
    ``quiet_seconds`` (``tablectl watch``: 5): once subscribed, a line says it is waiting,
    and when nothing of the table has come after that long, a line says so (a table that
    ever ran has a retained status, so silence is most often a wrong id or prefix).
    Stopping (``stop`` set, or the task cancelled) is quiet: no traceback.

    Raises:
        ConfigError: No URL, or a URL that cannot be read.
    """
    import aiomqtt

    if not urls:
        raise ConfigError("watch needs a broker URL", table=table_id)
    addresses = [parse_broker_url(url) for url in urls]
    stream = out if out is not None else sys.stdout
    stop_event = stop if stop is not None else asyncio.Event()
    base = f"{prefix.rstrip('/')}/{table_id}" if prefix else table_id
    reader = Reader(base, TableFold(table_id), RejectionLog(reader="watch"))
    version = aiomqtt.ProtocolVersion.V5 if protocol == "5" else aiomqtt.ProtocolVersion.V311
    index = 0
    while not stop_event.is_set():
        address = addresses[index % len(addresses)]
        index += 1
        try:
            async with aiomqtt.Client(
                address.host,
                address.port,
                identifier=f"tablectl-watch-{uuid.uuid4().hex[:10]}",
                protocol=version,
                timeout=5.0,
                username=username,
                password=password,
                tls_context=ssl.create_default_context(cafile=ca_file) if address.tls else None,
            ) as client:
                await client.subscribe(f"{base}/#", qos=1)
                if subscribed is not None:
                    subscribed.set()
                silence = None
                if quiet_seconds is not None and not reader.heard:
                    print(
                        f"watching table {table_id} on {address.url} ({base}/#): waiting "
                        "for its messages (Ctrl-C stops)",
                        file=stream,
                        flush=True,
                    )
                    # A task of this connection's life only (not a TaskGroup's: the broker's
                    # errors below stay plain MqttErrors, caught to reconnect).
                    silence = asyncio.create_task(
                        _say_if_silent(reader, table_id, base, quiet_seconds, stream),
                        name="watch-silence",
                    )
                try:
                    await take_until_stopped(
                        client,
                        lambda message: _show_message(
                            message, stream, reader, on_event_seq, on_results_seq
                        ),
                        stop_event,
                    )
                finally:
                    if silence is not None:
                        silence.cancel()
                        await asyncio.gather(silence, return_exceptions=True)
                return
        except aiomqtt.MqttError as exc:
            print(f"! broker {address.url}: {exc}; reconnecting", file=stream, flush=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(reconnect_seconds):
                await stop_event.wait()


async def _say_if_silent(
    reader: Reader, table_id: str, base: str, seconds: float, stream: TextIO
) -> None:
    """After ``seconds`` with nothing of the table read, say so (once)."""
    await asyncio.sleep(seconds)
    if not reader.heard:
        print(
            f"nothing heard from table {table_id} in {seconds:g} s: no table with this id "
            f"has published on {base}/ (a table that ever ran keeps its status there); check "
            "--table-id, --prefix and the broker. Still waiting.",
            file=stream,
            flush=True,
        )


READ_LEAVES: dict[str, Channel] = {
    "status": "status",
    "round": "round",
    "events": "events",
    "results": "results",
}
"""The topics of a table ``watch`` reads (after ``{prefix}/{table}/``): never ``secure/``."""


class Reader:
    """What ``watch`` reads a table's messages with: the table fold and the rejection log.

    Args:
        base: The table's topic (``{prefix}/{table}``).
        fold: The table fold.
        rejections: Where rejections are logged and counted.
        clock: Epoch seconds.
    """

    def __init__(
        self,
        base: str,
        fold: TableFold,
        rejections: RejectionLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base = base
        self.fold = fold
        self.rejections = rejections
        self.clock = clock
        self.shown_event: int | None = None
        self.shown_results: int | None = None
        self.heard = False
        """Whether any message of the table was read (taken or rejected)."""

    def channel(self, topic: str) -> Channel | None:
        """What ``topic`` carries, or ``None`` for a topic ``watch`` does not read."""
        if not topic.startswith(self.base + "/"):
            return None
        return READ_LEAVES.get(topic[len(self.base) + 1 :])

    def lines(self, topic: str, payload: bytes, *, now: datetime | None = None) -> list[str]:
        """The lines one message prints (none for a repeat or a topic not read; never raises).

        :attr:`shown_event` is the ``seq`` of the ``events`` message shown, else ``None``;
        :attr:`shown_results` that of the ``results`` message shown.
        """
        self.shown_event = None
        self.shown_results = None
        channel = self.channel(topic)
        if channel is None:
            return []
        self.heard = True
        change = self.fold.journal_change
        read = self.fold.read(channel, payload, self.clock())
        if isinstance(read, Rejection):
            self.rejections.record(read.at(topic, self.fold.table))
            return [f"! {topic}: rejected: {read.reason}"]
        step, message = read
        lines = [step.gap_text] if step.gap_text else []
        if self.fold.journal_change is not None and self.fold.journal_change is not change:
            lines.append(f"! {self.fold.journal_change.text}")  # a new journal (issue 22)
        if step.new and message is not None:
            line = describe(topic, wire(message), now=now)
            if line is not None:
                lines.append(line)
            if channel == "events" and isinstance(message, Envelope):
                self.shown_event = message.seq
            if channel == "results" and isinstance(message, Envelope):
                self.shown_results = message.seq
        return lines


def _payload(raw: Any) -> bytes:
    """A received payload as bytes (aiomqtt hands bytes, or a str, number or ``None``)."""
    if isinstance(raw, bytes | bytearray):
        return bytes(raw)
    if raw is None:
        return b""
    return str(raw).encode("utf-8", "surrogatepass")


def _show_message(
    message: Any,
    stream: TextIO,
    reader: Reader,
    on_event_seq: Callable[[int], None] | None,
    on_results_seq: Callable[[int], None] | None = None,
) -> None:
    """Print one received message as lines (or a rejection), noting an event's ``seq``."""
    topic = str(message.topic)
    for line in reader.lines(topic, _payload(message.payload), now=datetime.now(UTC)):
        print(line, file=stream, flush=True)
    if on_event_seq is not None and reader.shown_event is not None:
        on_event_seq(reader.shown_event)
    if on_results_seq is not None and reader.shown_results is not None:
        on_results_seq(reader.shown_results)
