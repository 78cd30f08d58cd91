"""What the pit console says, in words a pit boss uses (pure).

* :func:`device_words`: a device's state as a sentence ("card scanner disconnected 12 s ago,
  reconnected after 3 s"), from its last ``device_status`` and the loss before it; the raw
  detail (an exception's text, the device's URL) stays behind a click on the page.
* :func:`action_sentence`: the table's answer to a pit action as a sentence ("Round
  tp-01-000042 at table tp-01 voided: every bet is refunded."), not a command id and JSON.
* :func:`action_record`: a pit action as recall lists it, in the third person ("voided the
  round (cable pulled)", "asked to resume the round: refused (no round is in progress)").
* :func:`age_words`: "10 s ago", "3 min ago", "2 h ago" (the page counts ages with the same
  steps, every second).

Nothing here reads a clock: the caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

STATE_WORDS = {
    "lost": "disconnected",
    "recovered": "reconnected",
    "connected": "connected",
    "boot": "starting up",
    "ready": "ready",
}
"""Device states (``device_status.state``) in words; any other is "reports <state>"."""

BACK_STATES = frozenset({"recovered", "connected", "ready"})
"""States that end a loss."""


def age_words(seconds: float) -> str:
    """How long ago, for people: ``"10 s ago"``, ``"3 min ago"``, ``"2 h ago"``."""
    whole = max(0, round(seconds))
    if whole < 120:
        return f"{whole} s ago"
    if whole < 7200:
        return f"{round(whole / 60)} min ago"
    return f"{round(whole / 3600)} h ago"


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def device_label(device: str) -> str:
    """What a device is called: the table's scanner (named by its URL) or a named reader."""
    name = device.strip()
    if not name or "://" in name or name.startswith("/"):
        return "card scanner"
    return f"card reader {name}"


def state_words(state: str) -> str:
    """A device state in words (``lost`` -> ``disconnected``)."""
    known = STATE_WORDS.get(state)
    if known is not None:
        return known
    cleaned = " ".join(state.replace("_", " ").replace("-", " ").split()) or "an unknown state"
    return f"reports {cleaned}"


@dataclass(frozen=True)
class DeviceWords:
    """A device's state in words, in three parts (the page counts the age every second).

    The sentence is ``headline`` + " " + the age of ``age_at`` + ``tail``.

    Attributes:
        device: The device as the table names it (a URL, or a reader's name).
        label: What it is called ("card scanner").
        headline: The part before the age ("card scanner disconnected").
        age_at: The moment the age counts from (UTC ISO), if known.
        tail: The part after it (", reconnected after 3 s"), or "".
        ok: Whether the device works now.
        state: The raw state (``lost``, ``recovered``...).
        detail: The raw detail, for the click ("the connection to the device failed (...)").
        at: When the last state was published (UTC ISO).
    """

    device: str
    label: str
    headline: str
    age_at: str | None
    tail: str
    ok: bool
    state: str
    detail: str | None
    at: str | None

    def sentence(self, now: datetime) -> str:
        """The whole sentence at ``now``."""
        moment = _moment(self.age_at)
        age = f" {age_words((now - moment).total_seconds())}" if moment is not None else ""
        return f"{self.headline}{age}{self.tail}"

    def to_json(self) -> dict[str, Any]:
        """The page's form."""
        return {
            "device": self.device,
            "label": self.label,
            "headline": self.headline,
            "age_at": self.age_at,
            "tail": self.tail,
            "ok": self.ok,
            "state": self.state,
            "detail": self.detail,
            "at": self.at,
        }


def device_words(
    device: str,
    state: str,
    *,
    at: str | None,
    detail: str | None = None,
    lost_at: str | None = None,
) -> DeviceWords:
    """A device's state in words.

    Args:
        device: The device (``device_status.device``).
        state: Its last state.
        at: When that state was published (UTC ISO).
        detail: Its raw detail (kept for the click, never in the sentence).
        lost_at: When it was last lost, if it came back since (UTC ISO).

    Returns:
        The words: "card scanner disconnected 10 s ago" while lost, "card scanner
        disconnected 12 s ago, reconnected after 3 s" once back, "card scanner connected
        5 min ago" when it never was lost.
    """
    label = device_label(device)

    def said(headline: str, age_at: str | None, tail: str, ok: bool) -> DeviceWords:
        return DeviceWords(device, label, headline, age_at, tail, ok, state, detail, at)

    if state == "lost":
        return said(f"{label} disconnected", at, "", False)
    back = state in BACK_STATES
    if back and lost_at is not None:
        lost, since = _moment(lost_at), _moment(at)
        away = ""
        if lost is not None and since is not None and since >= lost:
            away = f" after {max(1, round((since - lost).total_seconds()))} s"
        return said(f"{label} disconnected", lost_at, f", {state_words('recovered')}{away}", True)
    return said(f"{label} {state_words(state)}", at, "", back)


# -- answers -----------------------------------------------------------------------------------

_DOING = {
    "void": "void",
    "resume": "resume",
    "replay": "re-send the results of",
    "ack": "take the acknowledgement of",
    "enter-card": "take the card entered by hand in",
    "deck-check": "record the deck check of",
}


def _round_words(round_id: str | None) -> str:
    return f"round {round_id}" if round_id else "the round"


def _clean(reason: str) -> str:
    return " ".join(reason.split()).rstrip(".")


def _accepted(action: str, table: str, round_id: str | None, data: Mapping[str, Any]) -> str:
    """An accepted pit action as a sentence."""
    where = f"at table {table}"
    if action == "void":
        return f"Round {round_id} {where} voided: every bet is refunded."
    if action == "resume":
        return f"Round {round_id} {where} resumed: the dealer deals on."
    if action == "replay":
        count = data.get("resent")
        many = (
            f"{count} result message{'' if count == 1 else 's'}"
            if isinstance(count, int)
            else "the result messages"
        )
        of = f" of round {round_id}" if round_id else ""
        return f"Table {table} re-sent {many}{of}."
    if action == "ack":
        seq = data.get("alert_seq")
        alert = f"the alert (entry {seq})" if isinstance(seq, int) else "the alert"
        return f"Table {table} recorded that you acknowledged {alert}."
    if action == "enter-card":
        slot = data.get("slot")
        into = f" for {slot}" if isinstance(slot, str) else ""
        return (
            f"Round {round_id} {where} took the card entered by hand{into}: it is recorded "
            "with your name and reason, and shown as entered by hand."
        )
    if action == "deck-check":
        return _deck_sentence(table, data)
    return f"Table {table} accepted the {action}."


def _deck_sentence(table: str, data: Mapping[str, Any]) -> str:
    """A deck check recorded at the table, with its findings in words."""
    if data.get("ok"):
        return f"Table {table} recorded the deck check: every card once, the deck may go into play."
    found = []
    for key, words in (
        ("missing", "missing"),
        ("extra", "not of this deck"),
        ("unknown", "unknown tags"),
    ):
        values = data.get(key)
        if isinstance(values, list) and values:
            found.append(f"{words}: {' '.join(str(v) for v in values[:20])}")
    duplicated = data.get("duplicated")
    if isinstance(duplicated, dict) and duplicated:
        found.append("read twice or more: " + " ".join(str(card) for card in list(duplicated)[:20]))
    listed = "; ".join(found) or "see the report"
    return f"Table {table} recorded the deck check: the deck must NOT go into play ({listed})."


def action_sentence(
    action: str,
    *,
    table: str,
    round_id: str | None,
    status: str,
    reason: str = "",
    data: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    by_broker: bool = False,
) -> str:
    """The answer to a pit action as a sentence.

    Args:
        action: ``void``, ``resume``, ``replay``, ``ack``, ``enter-card`` or ``deck-check``.
        table: The table.
        round_id: The round the action named (for a replay, the round replayed).
        status: ``accepted``, ``refused``, ``no_answer``, ``not_sent`` or ``invalid``.
        reason: The table's reason (refused), the broker's, or what was wrong (invalid).
        data: The answer's ``data`` (``resent`` of a replay, ``alert_seq`` of an ack).
        timeout: Seconds waited (``no_answer``).
        by_broker: The broker refused the publish (the table never saw it).

    Returns:
        One or two sentences, ending with a full stop.
    """
    data = data or {}
    if status == "accepted":
        return _accepted(action, table, round_id, data)
    if status == "refused":
        why = _clean(reason) or "no reason given"
        if by_broker:
            return (
                f"The broker did not pass the {action} on to table {table}: this console's "
                f"broker account may not send it ({why})."
            )
        doing = _DOING.get(action, action)
        target = "the alert" if action == "ack" else _round_words(round_id)
        return f"Table {table} refused to {doing} {target}: {why}."
    if status == "no_answer":
        waited = f" within {timeout:g} s" if timeout is not None else ""
        return (
            f"No answer from table {table}{waited}: is its controller running? Clicking again "
            "sends the same command (the table never applies it twice)."
        )
    if status == "not_sent":
        why = f" ({_clean(reason)})" if reason else ""
        return f"Not sent: the console is not connected to the broker{why}. Try again once it is."
    text = _clean(reason) or "the action cannot be sent as it is"
    return f"Not sent: {text[:1].upper()}{text[1:]}."


def _done(action: str, data: Mapping[str, Any], void_reason: str | None) -> str:
    """An accepted pit action as recall lists it."""
    if action == "void":
        return "voided the round" + (f" ({_clean(void_reason)})" if void_reason else "")
    if action == "resume":
        return "resumed the round"
    if action == "replay":
        count = data.get("resent")
        many = f" ({count} message{'' if count == 1 else 's'})" if isinstance(count, int) else ""
        return f"had the results re-sent{many}"
    if action == "ack":
        seq = data.get("alert_seq")
        return "acknowledged " + (
            f"the alert (entry {seq})" if isinstance(seq, int) else "an alert"
        )
    if action == "enter-card":
        slot = data.get("slot")
        return "entered a card by hand" + (f" for {slot}" if isinstance(slot, str) else "")
    if action == "deck-check":
        fit = "fit for play" if data.get("ok") else "NOT fit for play"
        return f"checked a deck ({fit})"
    return f"sent {action}: accepted"


def action_record(
    action: str,
    *,
    status: str,
    reason: str = "",
    data: Mapping[str, Any] | None = None,
    void_reason: str | None = None,
) -> str:
    """A pit action as recall lists it, after the operator's name (third person).

    Args:
        action: ``void``, ``resume``, ``replay``, ``ack``, ``enter-card`` or ``deck-check``.
        status: ``accepted`` or ``refused``.
        reason: The table's reason for a refusal.
        data: The answer's ``data`` (``resent``, ``alert_seq``).
        void_reason: The reason the pit boss gave for a void.

    Returns:
        E.g. "voided the round (dealer dropped the shoe)".
    """
    data = data or {}
    if status == "accepted":
        return _done(action, data, void_reason)
    what = {
        "void": "void the round",
        "resume": "resume the round",
        "replay": "re-send the results",
        "ack": "acknowledge an alert",
        "enter-card": "enter a card by hand",
        "deck-check": "record a deck check",
    }.get(action, action)
    return f"asked to {what}: refused ({_clean(reason) or 'no reason given'})"
