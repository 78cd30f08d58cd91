"""The presence latch: raw tag observations in, placements and removals out.

An RFID reader reports a tag again and again while it lies on the antenna (an Eccel Pepper
C1, an MQTT reader polling its RC522), or once when it arrives and once when it leaves (a
PC/SC reader's card-present / card-removed events). A card table wants neither: it wants to
know that a card was *placed* (once, however often it is repeated) and that it was *removed*
(not every time the field flickers). :class:`PresenceLatch` turns the one into the other:

* a tag counts as **placed** once it has been stable for ``place_after`` seconds: seen at
  the start of that window and still there at its end, with no absence longer than
  ``remove_after`` in between;
* a placed tag counts as **removed** once it has been absent for ``remove_after`` seconds;
  a drop shorter than that (a hand over the antenna, a missed poll) is no removal, and the
  card that comes back within it is still the same placement (no second :class:`Placed`).

"Absent" depends on how the reader reports (:attr:`PresenceTimes.repeats`):

* ``repeats=True`` (Pepper C1, MQTT readers): the reader repeats a tag while it is there, so
  a tag is absent from its last sighting on; a :class:`FieldEmpty` changes nothing (the
  repeats stopping already say so);
* ``repeats=False`` (PC/SC): the reader says a tag once; it stays until the reader reports the
  antenna empty (:class:`FieldEmpty`), from which time it is absent.

A tag is tracked per antenna: the same tag moved to another antenna is placed there (after
``place_after``) and removed from the first (after ``remove_after``). Several tags on one
antenna (a Hold'em seat's two cards) are tracked independently.

The latch is pure: no I/O and no clock of its own. The caller (a source's reader task) feeds
observations stamped with ``time.monotonic()`` and calls :meth:`PresenceLatch.due` when
:meth:`PresenceLatch.next_deadline` passes. Every event is emitted in time order, and a
:meth:`~PresenceLatch.feed` first emits what fell due before the observation's time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "MUCK",
    "FieldEmpty",
    "Placed",
    "PresenceEvent",
    "PresenceLatch",
    "PresenceTimes",
    "Removed",
    "TagSeen",
]


MUCK = "muck"
"""The position of a muck antenna: a card read there left its hand (a source maps the antenna
named so in its URL to this position; a Hold'em seat's cards reaching it fold the hand)."""


@dataclass(frozen=True, slots=True)
class TagSeen:
    """One raw observation of a tag (repeats are normal).

    Attributes:
        uid: The tag's code as the code table keys it.
        antenna: The antenna (or reader) it was seen on; ``None`` for a single-antenna reader.
        at: ``time.monotonic()`` when the observation arrived.
    """

    uid: str
    antenna: str | None
    at: float


@dataclass(frozen=True, slots=True)
class FieldEmpty:
    """The reader says no tag is on this antenna now (a PC/SC card-removed event).

    Attributes:
        antenna: The antenna (``None`` for a single-antenna reader).
        at: ``time.monotonic()`` when the report arrived.
    """

    antenna: str | None
    at: float


@dataclass(frozen=True, slots=True)
class PresenceTimes:
    """The latch's times, from the profile's ``[presence]`` (``place_after_ms``, ...).

    Attributes:
        place_after: Seconds a tag must be stable before it counts as placed (0: at once).
        remove_after: Seconds a placed tag must be absent before it counts as removed; a
            shorter drop is no removal. With ``repeats``, this must exceed the reader's
            repeat interval (else a tag lying still is removed between two repeats).
        repeats: The reader repeats a tag while it is there (absence = no repeat); ``False``:
            it reports a tag once and the antenna's emptiness with :class:`FieldEmpty`.

    Raises:
        ValueError: A negative or non-finite time.
    """

    place_after: float
    remove_after: float
    repeats: bool = True

    def __post_init__(self) -> None:
        for name in ("place_after", "remove_after"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise ValueError(f"presence {name} is a finite number of seconds >= 0: {value!r}")

    @classmethod
    def from_ms(
        cls, place_after_ms: float, remove_after_ms: float, *, repeats: bool = True
    ) -> PresenceTimes:
        """The times as a profile writes them (milliseconds)."""
        return cls(place_after_ms / 1000, remove_after_ms / 1000, repeats)


@dataclass(frozen=True, slots=True)
class Placed:
    """A tag became placed on an antenna.

    Attributes:
        uid: The tag's code.
        antenna: Where (``None``: a single-antenna reader).
        at: When the latch decided: the observation that completed the stable time, or
            (``repeats=False``) the end of the stable time.
    """

    uid: str
    antenna: str | None
    at: float


@dataclass(frozen=True, slots=True)
class Removed:
    """A placed tag left its antenna for ``remove_after`` seconds.

    Attributes:
        uid: The tag's code.
        antenna: Where it had been placed.
        at: When the latch decided: the start of the absence plus ``remove_after``.
    """

    uid: str
    antenna: str | None
    at: float


PresenceEvent = Placed | Removed
"""What the latch emits."""


@dataclass(slots=True)
class _Tag:
    """One tag on one antenna: its sightings and whether it is placed."""

    first_seen: float
    last_seen: float
    placed: bool = False
    absent_since: float | None = field(default=None)


class PresenceLatch:
    """Placements and removals from raw tag observations (pure; see the module's doc).

    Args:
        times: The stable and absence times, and how the reader reports.
    """

    def __init__(self, times: PresenceTimes) -> None:
        self._times = times
        self._tags: dict[tuple[str | None, str], _Tag] = {}
        self._now = float("-inf")

    @property
    def times(self) -> PresenceTimes:
        """The latch's times."""
        return self._times

    def placed(self) -> list[tuple[str | None, str]]:
        """The tags placed now, as ``(antenna, uid)``, in the order they were first seen."""
        return [key for key, tag in self._tags.items() if tag.placed]

    def resumed(self, now: float) -> None:
        """The reader was away (unplugged, reconnected) until ``now``.

        Its silence meanwhile says nothing, so absences count from ``now``: nothing is removed
        for the time away; what is no longer there is removed ``remove_after`` after ``now``.
        """
        self._now = max(self._now, now)
        for tag in self._tags.values():
            tag.last_seen = max(tag.last_seen, self._now)
            if tag.absent_since is not None:
                tag.absent_since = max(tag.absent_since, self._now)

    def feed(self, obs: TagSeen | FieldEmpty) -> list[Placed | Removed]:
        """Take one observation.

        Returns:
            What fell due up to the observation's time, then what the observation decides
            (in time order). An observation older than one already fed counts as of that
            time (the latch's time never goes back).
        """
        events = self.due(obs.at)
        now = self._now
        if isinstance(obs, FieldEmpty):
            for (antenna, _uid), tag in self._tags.items():
                if antenna == obs.antenna and tag.absent_since is None:
                    tag.absent_since = now
            return events
        key = (obs.antenna, obs.uid)
        known = self._tags.get(key)
        if known is None:
            tag = self._tags[key] = _Tag(first_seen=now, last_seen=now)
        else:
            tag = known
            tag.last_seen = now
            tag.absent_since = None
        if not tag.placed and now - tag.first_seen >= self._times.place_after:
            tag.placed = True
            events.append(Placed(obs.uid, obs.antenna, now))
        return events

    def due(self, now: float) -> list[Placed | Removed]:
        """What fell due by ``now`` (placements of a non-repeating reader, removals, drops).

        Returns:
            The events whose time is ``<= now``, in time order.
        """
        self._now = max(self._now, now)
        now = self._now
        events: list[Placed | Removed] = []
        while True:
            step = self._next(now)
            if step is None:
                break
            at, key, what = step
            tag = self._tags[key]
            antenna, uid = key
            if what == "place":
                tag.placed = True
                events.append(Placed(uid, antenna, at))
            else:
                del self._tags[key]
                if tag.placed:
                    events.append(Removed(uid, antenna, at))
        return events

    def next_deadline(self) -> float | None:
        """When :meth:`due` has something next (``None``: nothing is pending)."""
        step = self._next(float("inf"))
        return step[0] if step is not None else None

    def _gone_since(self, tag: _Tag) -> float | None:
        """Since when the tag counts as absent (``None``: it is there)."""
        if self._times.repeats:
            return tag.last_seen
        return tag.absent_since

    def _next(self, limit: float) -> tuple[float, tuple[str | None, str], str] | None:
        """The earliest deadline at or before ``limit``: ``(at, key, "place" | "gone")``."""
        best: tuple[float, tuple[str | None, str], str] | None = None
        times = self._times
        for key, tag in self._tags.items():
            gone = self._gone_since(tag)
            candidates: list[tuple[float, str]] = []
            if gone is not None:
                candidates.append((gone + times.remove_after, "gone"))
            if not tag.placed and not times.repeats and gone is None:
                candidates.append((tag.first_seen + times.place_after, "place"))
            for at, what in candidates:
                if at <= limit and (best is None or at < best[0]):
                    best = (at, key, what)
        return best
