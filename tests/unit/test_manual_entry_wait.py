"""The slot's wait and the inbox around a card entered by hand (pure and in-loop, no I/O)."""

from __future__ import annotations

import asyncio

from controller.orchestration.inbox import Inbox
from controller.orchestration.slot_wait import SlotWait, WaitState
from drivers.source import CardRead, Read


def test_a_card_entered_while_one_is_held_is_not_asked_for_again() -> None:
    wait = SlotWait()
    wait.start(halted=True)
    wait.hold_card()
    wait.card_entered()
    assert wait.state is WaitState.HALTED and wait.halted  # the halt stays
    wait.resume()
    assert wait.cue_again() is False  # no held card to rescan
    resumed = SlotWait(state=WaitState.RESUMED_CARD_HELD)
    resumed.card_entered()
    assert resumed.state is WaitState.RESUMED
    cued = SlotWait()
    cued.card_entered()
    assert cued.state is WaitState.CUED


class _Reads:
    """A card source's read side: hands out what is put in, in order."""

    url = "test://reads"

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Read] = asyncio.Queue()

    async def next_read(self) -> Read:
        return await self.queue.get()


async def test_a_read_given_back_comes_first_then_the_queued_ones_in_order() -> None:
    reads = _Reads()
    inbox = Inbox(reads)  # type: ignore[arg-type]  # the read side is all the inbox uses
    first = CardRead("Kc", None, 1, 0.0)
    second = CardRead("Ad", None, 2, 0.0)
    reads.queue.put_nowait(second)
    assert await inbox.next(5.0) == second
    inbox.unread(first)
    reads.queue.put_nowait(second)
    assert await inbox.next(5.0) == first
    assert await inbox.next(5.0) == second
    await inbox.close()
