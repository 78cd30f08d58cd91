"""Deck check: a whole deck scanned at shift start, compared with what the deck must hold.

Before a deck goes into play the dealer puts every card on the reader once (``tablectl
deck-check --device URL --codes FILE``); the report says which cards are **missing** (never
read), **extra** (real cards this deck does not hold: a joker in a 52-card deck, a card in a
tile set), **duplicated** (read more often than the deck holds copies) and **unknown** (a tag
or barcode the code table does not know, or text that is no card at all: a tag of another
deck). Nothing is guessed: an unknown tag is reported as its code, never as the card it
might be.

:func:`compare` is pure (reads in, report out). :func:`scan_deck` reads a card source until
the deck is complete and the reader has been quiet for ``idle_seconds``, or it has been quiet
that long after the last read (every await bounded). What a device cannot tell: a card read
twice from one physical card is counted as two copies; an RFID reader behind the presence
latch reports a card lying on the antenna once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Deck
from controller.errors import NotationError, PieceRefused, TablectlError
from drivers.source import CardRead, CardSource, DeviceStatus, Misread


def cue_slot(number: int) -> str:
    """The slot a deck check's cue names: ``D1`` for the first card (a display shows it).

    Each card has a slot of its own, as enrolment's cues do: a device that deals on cues
    (a shoe) takes a cue for the same slot as a repeat, not as the next card.
    """
    return f"D{number}"


class DeckCheckError(TablectlError):
    """A deck check that could not be made (no read at all, a device lost)."""


@dataclass(frozen=True, slots=True)
class DeckReport:
    """What a deck check found.

    Attributes:
        deck: The deck's kind (``standard``, ``standard_joker``, ``mahjong_pai_gow``...).
        expected: How many pieces the deck holds.
        read: How many cards were read (every read, duplicates included).
        missing: Pieces of the deck never read (a copy per missing copy).
        extra: Real pieces read that this deck does not hold.
        duplicated: Pieces read more often than the deck holds them: piece -> times read.
        unknown: Codes the code table does not know, and text that is no piece at all.
        misreads: Reads that failed otherwise (a checksum, a line): the card is asked again.
    """

    deck: str
    expected: int
    read: int
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    duplicated: dict[str, int] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    misreads: int = 0

    @property
    def ok(self) -> bool:
        """Whether the deck may go into play: every card once, nothing else."""
        return not (self.missing or self.extra or self.duplicated or self.unknown)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-able document (the ``deck-check`` command's body)."""
        return {
            "deck": self.deck,
            "expected": self.expected,
            "read": self.read,
            "ok": self.ok,
            "missing": list(self.missing),
            "extra": list(self.extra),
            "duplicated": dict(self.duplicated),
            "unknown": list(self.unknown),
            "misreads": self.misreads,
        }

    def lines(self) -> list[str]:
        """The report in words, one finding a line."""
        verdict = (
            "the deck may go into play"
            if self.ok
            else "the deck must NOT go into play until this is resolved"
        )
        out = [f"deck check ({self.deck}, {self.expected} cards): {self.read} read; {verdict}"]
        if self.missing:
            out.append(f"  missing ({len(self.missing)}): {' '.join(self.missing)}")
        if self.extra:
            out.append(f"  extra, not in this deck ({len(self.extra)}): {' '.join(self.extra)}")
        if self.duplicated:
            listed = ", ".join(
                f"{card} read {times} times" for card, times in self.duplicated.items()
            )
            out.append(f"  duplicated ({len(self.duplicated)}): {listed}")
        if self.unknown:
            out.append(f"  unknown tags or codes ({len(self.unknown)}): {' '.join(self.unknown)}")
        if self.misreads:
            out.append(f"  misreads (asked again, not counted): {self.misreads}")
        return out


def compare(deck: Deck, reads: Iterable[str], unknown: Iterable[str] = ()) -> DeckReport:
    """Compare the values read with what ``deck`` holds (pure).

    Args:
        deck: The deck the cards must make up.
        reads: Each card value read, in order (as the source gives it).
        unknown: Codes the source could not map to a card (its code table's unknowns).
    """
    counted: Counter[str] = Counter()
    extra: list[str] = []
    odd = list(unknown)
    total = 0
    for value in reads:
        total += 1
        try:
            piece = deck.parse(value)
        except PieceRefused:
            extra.append(value)
            continue
        except NotationError:
            odd.append(value)
            continue
        counted[str(piece)] += 1
    missing: list[str] = []
    duplicated: dict[str, int] = {}
    for piece, copies in deck.copies.items():
        name = str(piece)
        seen = counted.get(name, 0)
        missing.extend([name] * max(0, copies - seen))
        if seen > copies:
            duplicated[name] = seen
    return DeckReport(
        deck=deck.kind.value,
        expected=len(deck),
        read=total,
        missing=tuple(missing),
        extra=tuple(extra),
        duplicated=duplicated,
        unknown=tuple(odd),
    )


@dataclass
class _Scan:
    reads: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    misreads: int = 0


async def scan_deck(
    source: CardSource,
    deck: Deck,
    *,
    idle_seconds: float,
    first_read_seconds: float,
    say: Callable[[str], None] = lambda _text: None,
) -> DeckReport:
    """Read ``source`` (opened) until the deck is done and compare it with ``deck``.

    Each card is cued (``expect``: a device with a display asks for the next card). The scan
    ends when the reader has been quiet for ``idle_seconds`` after a read (the operator has
    put every card down), or, before any read, after ``first_read_seconds``.

    Raises:
        DeckCheckError: No card was read within ``first_read_seconds``, or the device was
            lost during the scan (the report would be short by what it missed).
        DriverError: The source failed.
    """
    scan = _Scan()
    expected = len(deck)
    await source.expect(1, 0, cue_slot(1))
    while True:
        read_any = bool(scan.reads or scan.unknown)
        wait = idle_seconds if read_any else first_read_seconds
        try:
            async with asyncio.timeout(wait):
                read = await source.next_read()
        except TimeoutError:
            if not read_any:
                raise DeckCheckError(
                    f"no card was read within {first_read_seconds:g} s: is the reader "
                    "connected, and are the cards put on it?",
                    url=source.url,
                ) from None
            break
        if isinstance(read, CardRead):
            scan.reads.append(read.value)
            count = len(scan.reads) + len(scan.unknown)
            say(f"[{count}/{expected}] {read.value}")
            await source.expect(1, count, cue_slot(count + 1))
        elif isinstance(read, Misread):
            if read.cause == "unknown_code":
                scan.unknown.append(_code_of(read.detail))
                count = len(scan.reads) + len(scan.unknown)
                say(f"[{count}/{expected}] unknown: {read.detail}")
                await source.expect(1, count, cue_slot(count + 1))
            else:
                scan.misreads += 1
                say(f"misread ({read.cause}): put the same card on the reader again")
                slot = cue_slot(len(scan.reads) + len(scan.unknown) + 1)
                await source.request_rescan(slot, f"misread ({read.cause})")
        elif isinstance(read, DeviceStatus) and read.state == "lost":
            raise DeckCheckError(
                "the reader was lost during the deck check: scan the whole deck again",
                url=source.url,
                detail=read.detail,
            )
    report = compare(deck, scan.reads, scan.unknown)
    return DeckReport(
        deck=report.deck,
        expected=report.expected,
        read=report.read,
        missing=report.missing,
        extra=report.extra,
        duplicated=report.duplicated,
        unknown=report.unknown,
        misreads=scan.misreads,
    )


def _code_of(detail: str) -> str:
    """The code an ``unknown_code`` misread names (``code '04A2' is not in ...``), else all."""
    start = detail.find("'")
    end = detail.find("'", start + 1)
    if start >= 0 and end > start:
        return detail[start + 1 : end]
    return detail


def deck_named(name: str) -> Deck:
    """A deck by the name ``tablectl enrol`` gives it.

    ``standard``, ``standard-joker`` or ``mahjong-pai-gow-20``.

    Raises:
        DeckCheckError: Another name.
    """
    decks: dict[str, Callable[[], Deck]] = {
        "standard": Deck.standard,
        "standard-joker": Deck.with_joker,
        "mahjong-pai-gow-20": Deck.mahjong_pai_gow,
    }
    try:
        return decks[name]()
    except KeyError:
        raise DeckCheckError(
            f"unknown deck {name!r} (known: {', '.join(decks)})", deck=name
        ) from None


def with_codes(url: str, codes: str | None) -> str:
    """``url`` with ``codes=FILE`` added to its query (a profile URL's code table)."""
    if codes is None:
        return url
    return f"{url}{'&' if '?' in url else '?'}codes={codes}"


def public_url(url: str) -> str:
    """``url`` without a user name or password (what a report may carry and journal)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
