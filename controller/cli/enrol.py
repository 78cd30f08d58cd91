"""``tablectl enrol``: scan a deck in a shown order and write its code table.

The library is :mod:`drivers.enrolment`; the device is a ``profile+serial://`` URL read
without a code table (the codes as the device sends them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

DECKS = ("standard", "standard-joker")
"""The decks that can be enrolled: one code a card (Mahjong's pairs of equal tiles cannot
be told apart by a code table that maps a tile to one code)."""


def deck_cards(name: str) -> list[str]:
    """The cards of a deck, in the order the operator is asked for them."""
    from controller.cards import Deck

    deck = Deck.with_joker() if name == "standard-joker" else Deck.standard()
    return [str(piece) for piece in deck]


async def enrol_deck(url: str, deck: str, out: Path) -> int:
    """Enrol ``deck`` from the device at ``url`` into ``out``; 0 when written."""
    from drivers.enrolment import enrol, write_code_table
    from drivers.errors import UnsupportedUrl
    from drivers.profile_source import ProfileCardSource
    from drivers.source import DriverSettings, ProfileSpec, parse_url

    spec = parse_url(url)
    if not isinstance(spec, ProfileSpec):
        raise UnsupportedUrl("enrolment reads a profile+serial:// device", url=url)
    source = ProfileCardSource(url, spec, DriverSettings(heartbeat_timeout=None), raw_codes=True)
    await source.open()
    try:
        table = await enrol(
            source, deck_cards(deck), deck=deck, say=lambda text: print(text, flush=True)
        )
    finally:
        await source.close()
    write_code_table(table, out)
    print(f'wrote {out}: {len(table.codes)} codes (name it in the profile: code_table = "{out}")')
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the enrolment."""
    import asyncio

    return asyncio.run(enrol_deck(args.device, args.deck, Path(args.out)))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``enrol`` sub-command."""
    parser = subparsers.add_parser(
        "enrol",
        help="scan a deck in a shown order and write its code table",
        description="Ask for each card of the deck in turn, bind the code the device reads "
        "to it, refuse a tag already enrolled or a record the profile cannot read, and write "
        "a code table file a device profile names (code_table = FILE).",
    )
    parser.add_argument(
        "--device", required=True, help="profile+serial:///dev/ttyUSB0?profile=NAME"
    )
    parser.add_argument("--deck", choices=DECKS, default="standard", help="the deck to enrol")
    parser.add_argument("--out", required=True, help="the code table file to write")
    parser.set_defaults(func=run)
