"""How the archive's consumer cuts what it reads into batches (controller/archive/consumer.py).

The reader task queues each message as received, and its end (the broker connection's error)
after them; the batches hand on every message read before that end, then raise it.
"""

from __future__ import annotations

import asyncio

import pytest

from controller.archive.consumer import BATCH_MAX, Received, _ReadEnded, _waiting
from controller.mqtt.client import MqttLinkError


def _received(n: int) -> Received:
    return Received(f"tables/t/events/{n}", b"{}", mid=n + 1, qos=1)


async def _collect(queue: asyncio.Queue[Received | _ReadEnded], into: list[list[int]]) -> None:
    """Every batch's packet ids, until the batches end (or raise)."""
    async with asyncio.timeout(5):
        async for batch in _waiting(queue):
            into.append([m.mid for m in batch])


async def test_what_was_read_before_the_link_failed_is_handed_on_then_the_error():
    queue: asyncio.Queue[Received | _ReadEnded] = asyncio.Queue()
    for n in range(3):
        queue.put_nowait(_received(n))
    queue.put_nowait(_ReadEnded(MqttLinkError("the link failed: reset")))
    batches: list[list[int]] = []
    with pytest.raises(MqttLinkError, match="reset"):
        await _collect(queue, batches)
    assert batches == [[1, 2, 3]]


async def test_a_batch_waits_for_its_first_message_and_is_bounded():
    queue: asyncio.Queue[Received | _ReadEnded] = asyncio.Queue()
    batches = _waiting(queue)
    first = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0.05)
    assert not first.done(), "no batch without a message"
    for n in range(BATCH_MAX + 5):
        queue.put_nowait(_received(n))
    async with asyncio.timeout(5):
        assert [m.mid for m in await first] == list(range(1, BATCH_MAX + 1))
        assert [m.mid for m in await anext(batches)] == list(range(BATCH_MAX + 1, BATCH_MAX + 6))
    queue.put_nowait(_ReadEnded(None))
    with pytest.raises(StopAsyncIteration):
        await anext(batches)


async def test_the_error_comes_after_a_wait_when_nothing_was_read():
    queue: asyncio.Queue[Received | _ReadEnded] = asyncio.Queue()

    async def fail_later() -> None:
        await asyncio.sleep(0.05)
        queue.put_nowait(_ReadEnded(MqttLinkError("the link failed: closed")))

    task = asyncio.create_task(fail_later())
    batches: list[list[int]] = []
    with pytest.raises(MqttLinkError, match="closed"):
        await _collect(queue, batches)
    await task
    assert batches == []
