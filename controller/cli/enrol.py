"""``tablectl enrol``: scan a deck in a shown order and write its code table.

The library is :mod:`drivers.enrolment`; the device is a ``profile+serial://`` URL read
without a code table (the codes as the device sends them): an RFID reader's UIDs
(``rfid-ntag``) or a barcode reader's codes; or a JSON tag reader (``mqtt-reader://``,
``jsonl+serial://``), its UIDs as it reports them, each once it is placed (latched).
Decks: 52 cards, 53 with the joker, the 20 Mahjong Pai Gow tiles.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drivers.json_readers import JsonLinesSpec, MqttReaderSpec
    from drivers.jsonl_source import JsonLinesCardSource
    from drivers.mqtt_reader import MqttReaderSource

DECKS = ("standard", "standard-joker", "mahjong-pai-gow-20")
"""The decks that can be enrolled: 52 cards, 53 with the joker, the 20 Mahjong Pai Gow tiles
(two of each: each copy has its own tag, both bound to the tile: ``codes_per_card = 2``)."""


def deck_cards(name: str) -> list[str]:
    """The cards of a deck, in the order the operator is asked for them (copies together)."""
    from controller.cards import Deck

    decks = {
        "standard": Deck.standard,
        "standard-joker": Deck.with_joker,
        "mahjong-pai-gow-20": Deck.mahjong_pai_gow,
    }
    return [str(piece) for piece in decks[name]()]


async def enrol_deck(url: str, deck: str, out: Path, *, tag_timeout: float | None = 30.0) -> int:
    """Enrol ``deck`` from the device at ``url`` into ``out``; 0 when written.

    ``tag_timeout``: seconds without a read before the operator is asked whether the card
    is tagged (``None``: never).
    """
    from drivers.enrolment import enrol, write_code_table
    from drivers.errors import UnsupportedUrl
    from drivers.json_readers import JsonLinesSpec, MqttReaderSpec
    from drivers.pcsc_url import PcscSpec
    from drivers.pepper_url import PepperSpec
    from drivers.profile_source import ProfileCardSource
    from drivers.source import CardSource, DriverSettings, ProfileSpec, parse_url

    spec = parse_url(url)
    source: CardSource
    if isinstance(spec, MqttReaderSpec | JsonLinesSpec):
        source = _tag_reader(url, spec)
    elif isinstance(spec, PcscSpec):
        from drivers.pcsc_source import PcscCardSource

        source = PcscCardSource(url, spec, DriverSettings(heartbeat_timeout=None), raw_codes=True)
    elif isinstance(spec, PepperSpec):
        from drivers.pepper_source import PepperCardSource

        settings = DriverSettings(heartbeat_timeout=None)
        source = PepperCardSource(url, spec, settings, raw_codes=True)
    elif not isinstance(spec, ProfileSpec):
        raise UnsupportedUrl(
            "enrolment reads a profile+serial:// device (wire protocol v1 sends cards, not "
            "codes: to try it without a reader, `tablectl simulate-scanner --profile NAME "
            "--pty` prints a URL to enrol from)",
            url=url,
        )
    else:
        settings = DriverSettings(heartbeat_timeout=None)
        source = ProfileCardSource(url, spec, settings, raw_codes=True)
    await source.open()
    try:
        cards = deck_cards(deck)
        table = await enrol(
            source,
            cards,
            deck=deck,
            say=lambda text: print(text, flush=True),
            copies=max(cards.count(card) for card in cards),
            tag_timeout=tag_timeout,
        )
    finally:
        await source.close()
    write_code_table(table, out)
    print(f'wrote {out}: {len(table.codes)} codes (name it in the profile: code_table = "{out}")')
    return 0


def _tag_reader(
    url: str, spec: MqttReaderSpec | JsonLinesSpec
) -> MqttReaderSource | JsonLinesCardSource:
    """A JSON tag reader (``mqtt-reader://``, ``jsonl+serial://``) reading UIDs as they are."""
    from drivers.json_readers import MqttReaderSpec
    from drivers.jsonl_source import JsonLinesCardSource
    from drivers.mqtt_reader import MqttReaderSource
    from drivers.source import DriverSettings

    settings = DriverSettings(heartbeat_timeout=None)
    if isinstance(spec, MqttReaderSpec):
        return MqttReaderSource(url, spec, settings, raw_codes=True)
    return JsonLinesCardSource(url, spec, settings, raw_codes=True)


def run(args: argparse.Namespace) -> int:
    """Run the enrolment."""
    import asyncio

    timeout = args.tag_timeout if args.tag_timeout > 0 else None
    return asyncio.run(enrol_deck(args.device, args.deck, Path(args.out), tag_timeout=timeout))


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
    parser.add_argument(
        "--tag-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds without a read before asking whether the card is tagged (0: never)",
    )
    parser.set_defaults(func=run)
