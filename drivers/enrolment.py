"""Deck enrolment: scan every card of a deck in a shown order, write the code table.

RFID tags carry random UIDs and a studio's barcode decks may carry codes no vendor table
lists, so a deck is enrolled: the operator scans the cards in the order shown, each code is
bound to the card asked for, and the result is a code table file (``name = ...`` and
``[codes]``) a device profile names (``code_table = "..."``). Nothing is guessed: a code
already enrolled (the same card scanned twice, or two cards with one tag) and a record the
profile cannot read are refused with the reason, and the same card is asked for again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from drivers.errors import DriverError
from drivers.profile import CodeTable, load_code_table
from drivers.source import CardRead, CardSource, DeviceStatus

__all__ = ["EnrolmentError", "enrol", "write_code_table"]


class EnrolmentError(DriverError):
    """Enrolment cannot go on (an empty deck, a card twice in the order)."""


async def enrol(
    source: CardSource,
    cards: Sequence[str],
    *,
    deck: str,
    say: Callable[[str], None],
) -> CodeTable:
    """Ask for each card in turn and bind the code the device reads to it.

    Args:
        source: An open source reading raw codes (``ProfileCardSource(..., raw_codes=True)``).
        cards: The deck, in the order shown to the operator.
        deck: The deck's name (the code table's ``name``).
        say: Shows one line to the operator.

    Returns:
        The code table (code → card).

    Raises:
        EnrolmentError: The deck is empty or names a card twice.
        DriverError: The device went away.
    """
    if not cards or len(set(cards)) != len(cards):
        raise EnrolmentError("a deck to enrol lists each card once", detail=", ".join(cards))
    codes: dict[str, str] = {}
    for index, card in enumerate(cards):
        say(f"[{index + 1}/{len(cards)}] scan {card}")
        await source.expect(1, index, card)
        while True:
            read = await source.next_read()
            if isinstance(read, DeviceStatus):
                continue
            if not isinstance(read, CardRead):
                say(f"  refused: {read.detail} ({read.cause}); scan {card} again")
                await source.request_rescan(card, read.detail)
                continue
            if read.value in codes:
                say(
                    f"  refused: tag {read.value} is already enrolled as {codes[read.value]}; "
                    f"put it aside and scan {card}"
                )
                await source.reject(card, f"duplicate tag {read.value}")
                await source.expect(1, index, card)  # the same card, asked for again
                continue
            codes[read.value] = card
            say(f"  {card} = {read.value}")
            break
    return CodeTable(name=deck, codes=codes)


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
