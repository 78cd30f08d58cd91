"""The fast tier's in-process broker (controller/mqtt/memory.py) keeps MQTT's promises the
table relies on: filters, retained messages, the Will on a lost link, one session an id."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from controller.errors import PublishError
from controller.mqtt.client import MqttLinkError, Will
from controller.mqtt.memory import SESSION_TAKEN_OVER, MemoryClient, broker, forget_brokers


@pytest.fixture
def name():
    yield f"b-{uuid.uuid4().hex[:8]}"
    forget_brokers()


async def test_filters_and_retained_messages(name):
    async with MemoryClient(name, identifier="pub") as pub:
        await pub.publish("tables/t1/status", b"online", qos=1, retain=True)
        await pub.publish("tables/t2/status", b"gone", qos=1, retain=True)
        await pub.publish("tables/t2/status", b"", qos=1, retain=True)  # cleared
        async with MemoryClient(name, identifier="sub") as sub:
            await sub.subscribe("tables/+/status", qos=1)
            first = await sub.next_message()
            assert (first.topic, first.payload, first.retain) == (
                "tables/t1/status",
                b"online",
                True,
            )
            await sub.subscribe("tables/#", qos=0)
            await pub.publish("tables/t1/events", b"e1", qos=1)
            await pub.publish("other/t1", b"x", qos=1)
            queued = [m for m in sub.take_queued() if not m.retain]
            assert [(m.topic, m.payload, m.qos) for m in queued] == [("tables/t1/events", b"e1", 0)]
    assert broker(name).topic("tables/t1/events") == [b"e1"]


async def test_a_lost_link_publishes_the_will_and_a_clean_close_does_not(name):
    will = Will("tables/t1/status", b"offline", qos=1, retain=True)
    async with MemoryClient(name, identifier="watch") as watcher:
        await watcher.subscribe("tables/t1/status", qos=1)
        async with MemoryClient(name, identifier="clean", will=will):
            pass
        assert watcher.take_queued() == []
        lost = MemoryClient(name, identifier="table", will=will)
        await lost.__aenter__()
        broker(name).drop("table")
        assert not lost.connected
        message = await asyncio.wait_for(watcher.next_message(), 1)
        assert message.payload == b"offline"
    assert broker(name).retained["tables/t1/status"].payload == b"offline"


async def test_a_second_connection_takes_the_session_over(name):
    first = MemoryClient(name, identifier="tablectl-t1")
    await first.__aenter__()
    waiting = asyncio.ensure_future(first.next_message())
    async with MemoryClient(name, identifier="tablectl-t1") as second:
        assert second.connected and not first.connected
        assert first.disconnect_reason is not None
        assert first.disconnect_reason.value == SESSION_TAKEN_OVER
        with pytest.raises(MqttLinkError):
            await asyncio.wait_for(waiting, 1)
        with pytest.raises(PublishError):
            first.hand_off("x", b"y", 1)
