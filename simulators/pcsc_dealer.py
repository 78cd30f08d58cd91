"""A dealer putting RFID cards on a virtual PC/SC reader, one after the other.

For ``tablectl run --simulate --profile pcsc-uid``: the table reads a real ``pcscd``
(:class:`simulators.pcscd.PrivatePcscd`) through pyscard, exactly as it reads an ACR122U; this
dealer puts each card's tag on the reader's slot (:class:`simulators.vpcd.VirtualCard`),
waits until the reader has read its UID, leaves it there ``hold`` seconds, lifts it and deals
the next one ``interval`` seconds later. A PC/SC reader takes no cues, so the dealer deals on
its own (as a HID scanner's does); the table takes the cards in the order the round wants
them, the way a dealer at a single reader deals.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import structlog

from drivers.profile import CodeTable
from simulators.errors import SimulatorConfigError
from simulators.vpcd import VirtualCard

__all__ = ["PcscDealer"]

_log = structlog.get_logger(__name__)


class PcscDealer:
    """Deals cards onto one virtual PC/SC reader slot.

    Args:
        card: The virtual card on the reader's slot.
        table: The deck's code table (card -> tag UID).
        deck: The game's pieces, shuffled per shoe (``random.Random(f"{seed}:{n}")``).
        seed: The shuffle's seed.
        cards: A script of card values instead of shuffled shoes.
        interval: Seconds between a card lifted and the next placed.
        hold: Seconds a card stays on the reader after its UID was read.
        read_within: Seconds the reader may take to read a tag before the dealer lifts it
            and tries the same card again.

    Raises:
        SimulatorConfigError: A card the code table has no tag for.

    Attributes:
        drawn: The cards placed and read, in order.
    """

    def __init__(
        self,
        card: VirtualCard,
        table: CodeTable,
        deck: Sequence[str],
        *,
        seed: int = 1,
        cards: Sequence[str] | None = None,
        interval: float = 0.5,
        hold: float = 0.3,
        read_within: float = 5.0,
    ) -> None:
        for value in cards or deck:
            if table.code_of(value) is None:
                raise SimulatorConfigError(
                    "a card has no tag in the code table", card=value, table=table.name
                )
        self.card = card
        self.table = table
        self.deck = list(deck)
        self.seed = seed
        self.script = list(cards) if cards else None
        self.interval = interval
        self.hold = hold
        self.read_within = read_within
        self.drawn: list[str] = []

    def _shoe(self, number: int) -> list[str]:
        if self.script is not None:
            return list(self.script)
        shoe = list(self.deck)
        random.Random(f"{self.seed}:{number}").shuffle(shoe)
        return shoe

    async def run(self) -> None:
        """Deal until cancelled (a script is dealt once)."""
        number = 0
        try:
            while True:
                shoe = self._shoe(number)
                number += 1
                while shoe:
                    value = shoe[0]
                    if await self.deal(value):
                        shoe.pop(0)
                    await asyncio.sleep(self.interval)
                if self.script is not None:
                    await asyncio.Event().wait()  # the script is dealt: wait to be cancelled
        finally:
            await self.card.remove()

    async def deal(self, value: str) -> bool:
        """Put one card on the reader, wait for its read, hold it and lift it.

        Returns:
            Whether the reader read it within ``read_within``.
        """
        code = self.table.code_of(value)
        assert code is not None
        await self.card.place(bytes.fromhex(code))
        try:
            async with asyncio.timeout(self.read_within):
                await self.card.uid_read.wait()
        except TimeoutError:
            _log.warning("pcsc_card_not_read", card=value, within=self.read_within)
            await self.card.remove()
            return False
        self.drawn.append(value)
        await asyncio.sleep(self.hold)
        await self.card.remove()
        return True
