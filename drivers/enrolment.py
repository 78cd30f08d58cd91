"""Deck enrolment: scan every card of a deck in a shown order, write the code table.

RFID tags carry random UIDs and a studio's barcode decks may carry codes no vendor table
lists, so a deck is enrolled: the operator scans the cards in the order shown, each code is
bound to the card asked for, and the result is a code table file (``name = ...`` and
``[codes]``) a device profile names (``code_table = "..."``). Nothing is guessed: a code
already enrolled (the same card scanned twice, or two cards with one tag) and a record the
profile cannot read are refused with the reason, and the same card is asked for again; a
card whose tag does not answer (the reader's no-tag record, or nothing within the
``tag_timeout``) is asked for again with the question whether it is tagged. A set holding a
piece twice (Mahjong Pai Gow's tiles) enrols each copy's tag, both bound to the piece.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from drivers.errors import DriverError
from drivers.profile import CodeTable, load_code_table
from drivers.source import CardRemoved, CardSource, DeviceStatus, Misread

__all__ = ["EnrolmentError", "enrol", "write_code_table"]


class EnrolmentError(DriverError):
    """Enrolment cannot go on (an empty deck, a card twice in the order)."""


async def enrol(
    source: CardSource,
    cards: Sequence[str],
    *,
    deck: str,
    say: Callable[[str], None],
    copies: int = 1,
    tag_timeout: float | None = None,
) -> CodeTable:
    """Ask for each card in turn and bind the code the device reads to it.

    Args:
        source: An open source reading raw codes (``ProfileCardSource(..., raw_codes=True)``).
        cards: The deck, in the order shown to the operator; a card the set holds
            ``copies`` times (a Mahjong tile) is listed that many times, each copy with its
            own tag.
        deck: The deck's name (the code table's ``name``).
        say: Shows one line to the operator.
        copies: How many times a card may be listed (the table's ``codes_per_card``).
        tag_timeout: Seconds without any read after which the operator is told that no tag
            was read (a card without a tag?) and asked again; ``None``: wait silently.

    Returns:
        The code table (code → card), complete: every card listed has its code.

    Raises:
        EnrolmentError: The deck is empty or lists a card more than ``copies`` times.
        DriverError: The device went away.
    """
    counts = Counter(cards)
    if not cards or max(counts.values()) > copies:
        many = "once" if copies == 1 else f"at most {copies} times"
        raise EnrolmentError(f"a deck to enrol lists each card {many}", detail=", ".join(cards))
    codes: dict[str, str] = {}
    seen: Counter[str] = Counter()
    for index, card in enumerate(cards):
        seen[card] += 1
        label = card if counts[card] == 1 else f"{card} (copy {seen[card]} of {counts[card]})"
        # Each copy is its own cue (the device shows "1p/2"; a repeated cue would be ignored).
        slot = card if counts[card] == 1 else f"{card}/{seen[card]}"
        say(f"[{index + 1}/{len(cards)}] scan {label}")
        await source.expect(1, index, slot)
        code = await _one_tag(source, (index, slot, label), codes, say, tag_timeout)
        codes[code] = card
        say(f"  {label} = {code}")
    return CodeTable(name=deck, codes=codes, codes_per_card=max(counts.values()))


async def _one_tag(
    source: CardSource,
    asked: tuple[int, str, str],
    codes: dict[str, str],
    say: Callable[[str], None],
    tag_timeout: float | None,
) -> str:
    """Read until a tag not enrolled yet comes; say why each refusal was refused.

    ``asked``: the card's place in the order, its cue (slot) and its label.
    """
    index, slot, label = asked
    while True:
        try:
            async with asyncio.timeout(tag_timeout):
                read = await source.next_read()
        except TimeoutError:
            say(
                f"  no tag read in {tag_timeout:g} s: is {label} tagged? scan it again, or "
                "put it aside and bring a tagged one (nothing is skipped)"
            )
            continue
        if isinstance(read, DeviceStatus | CardRemoved):
            continue  # a latched reader's removal: the tag before taken off the antenna
        if isinstance(read, Misread):
            what = "no tag read" if read.cause == "device" else "refused"
            say(f"  {what}: {read.detail} ({read.cause}); scan {label} again")
            await source.request_rescan(slot, read.detail)
            continue
        if read.value in codes:
            say(
                f"  refused: tag {read.value} is already enrolled as {codes[read.value]}; "
                f"put it aside and scan {label}"
            )
            await source.reject(slot, f"duplicate tag {read.value}")
            await source.expect(1, index, slot)  # the same card, asked for again
            continue
        return read.value


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_code_table(table: CodeTable, path: Path) -> None:
    """Write the table atomically (a temporary file renamed), then read it back.

    Raises:
        ProfileError: What was written does not read back as the same table.
    """
    lines = [
        "# Written by tablectl enrol: device code -> card, in the order the cards were scanned.",
        f"name = {_quote(table.name)}",
        *([f"codes_per_card = {table.codes_per_card}"] if table.codes_per_card > 1 else []),
        "",
        "[codes]",
        *(f"{_quote(code)} = {_quote(card)}" for code, card in table.codes.items()),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if load_code_table(path) != table:
        raise EnrolmentError("the code table written does not read back", detail=str(path))
