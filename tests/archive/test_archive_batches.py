"""How the archive's consumer cuts what it reads into batches (controller/archive/consumer.py).

The reader task queues each message as received, and its end (the broker connection's error)
after them; the batches hand on every message read before that end, then raise it.
"""

from __future__ import annotations

import asyncio

import pytest

from controller.archive.config import ArchiveSettings
from controller.archive.consumer import BATCH_MAX, Linger, Received, _ReadEnded, _waiting
from controller.archive.embedded import LINGER_SECONDS, archive_settings
from controller.mqtt.client import MqttLinkError
from controller.mqtt.settings import MqttSettings


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


async def test_a_lingering_batch_takes_what_comes_within_its_linger_and_no_more():
    queue: asyncio.Queue[Received | _ReadEnded] = asyncio.Queue()
    batches: list[list[int]] = []
    loop = asyncio.get_running_loop()
    handed: list[float] = []

    async def collect() -> None:
        async for batch in _waiting(queue, Linger(0.4)):
            batches.append([m.mid for m in batch])
            handed.append(loop.time())

    task = asyncio.create_task(collect())
    start = loop.time()
    queue.put_nowait(_received(0))
    for n in (1, 2):
        await asyncio.sleep(0.1)  # within the first message's linger
        queue.put_nowait(_received(n))
    await asyncio.sleep(0.5)  # past it: the next message opens a batch of its own
    queue.put_nowait(_received(3))
    async with asyncio.timeout(5):
        while len(batches) < 2:
            await asyncio.sleep(0.02)
    queue.put_nowait(_ReadEnded(None))
    await asyncio.wait_for(task, 5)
    assert batches == [[1, 2, 3], [4]]
    assert 0.4 <= handed[0] - start < 0.45 + 0.3  # its linger, not the later message's


async def test_hurry_ends_a_linger_and_no_batch_lingers_after():
    queue: asyncio.Queue[Received | _ReadEnded] = asyncio.Queue()
    linger = Linger(30.0)
    batches = _waiting(queue, linger)
    queue.put_nowait(_received(0))
    first = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0.05)
    assert not first.done(), "the batch lingers"
    queue.put_nowait(_received(1))
    linger.hurry()  # the table stopped
    async with asyncio.timeout(1):
        assert [m.mid for m in await first] == [1, 2]
        queue.put_nowait(_received(2))
        assert [m.mid for m in await anext(batches)] == [3], "hurried: no linger any more"


async def test_enough_waiting_ends_a_linger():
    """A broker sends only so many unacknowledged messages (Mosquitto: 20 by default): a
    batch that waited for more than that would wait out its whole linger for nothing."""
    queue: asyncio.Queue[Received | _ReadEnded] = asyncio.Queue()
    linger = Linger(30.0, enough=4)
    batches = _waiting(queue, linger)
    queue.put_nowait(_received(0))
    first = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0.05)
    for n in (1, 2):
        queue.put_nowait(_received(n))
        linger.queued(queue.qsize())  # as the reader tells it
    await asyncio.sleep(0.05)
    assert not first.done(), "three of four: it still lingers"
    queue.put_nowait(_received(3))
    linger.queued(queue.qsize())
    async with asyncio.timeout(1):
        assert [m.mid for m in await first] == [1, 2, 3, 4]
    for n in range(4, 8):  # enough already waiting when a batch begins: no linger at all
        queue.put_nowait(_received(n))
    async with asyncio.timeout(1):
        assert [m.mid for m in await anext(batches)] == [5, 6, 7, 8]


def test_the_archive_beside_a_table_lingers_and_an_instance_does_not(tmp_path):
    beside = archive_settings(MqttSettings(), f"sqlite:///{tmp_path}/a.sqlite", "t-1")
    assert beside.consumer.linger_seconds == LINGER_SECONDS > 0
    assert (
        ArchiveSettings.model_validate({"database": {"url": "sqlite:///x"}}).consumer.linger_seconds
        == 0
    )
