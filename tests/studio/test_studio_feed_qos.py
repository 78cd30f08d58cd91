"""The studio's feed subscribes at QoS 0 (controller/studio/feed.py, ``FEED_QOS``).

A clean session's live view: a table's QoS 1 messages reach it at QoS 0 (the lower of the
publish's and the subscription's), so the studio owes the broker no PUBACK for each. Real
Mosquitto; what the feed received is read from its messages as delivered.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiomqtt

from controller.mqtt.settings import MqttSettings
from controller.studio.feed import FEED_QOS, Feed


class _Recording(Feed):
    """A feed that notes each delivered message's QoS before handing it on as the feed does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.qos: list[int] = []

    def _take(self, message: Any) -> None:
        self.qos.append(int(message.qos))
        super()._take(message)


async def test_the_studio_reads_the_tables_qos_1_messages_at_qos_0(mosquitto_session):
    assert FEED_QOS == 0
    settings = MqttSettings(urls=[mosquitto_session.url], connect_timeout=5.0)
    seen: list[tuple[str, bytes]] = []
    links: list[bool] = []
    stop = asyncio.Event()
    feed = _Recording(
        settings,
        lambda topic, payload: seen.append((topic, payload)),
        on_link=links.append,
        tables=["qos-t"],
    )
    async with asyncio.timeout(30), asyncio.TaskGroup() as group:
        group.create_task(feed.run(stop))
        while not links:
            await asyncio.sleep(0.02)
        host, port = mosquitto_session.host, mosquitto_session.port
        async with aiomqtt.Client(host, port, identifier="qos-table") as table:
            for n in range(5):
                await table.publish("tables/qos-t/events", f'{{"n": {n}}}', qos=1)
        while len(seen) < 5:
            await asyncio.sleep(0.02)
        stop.set()
    assert [payload for _, payload in seen] == [f'{{"n": {n}}}'.encode() for n in range(5)]
    assert feed.qos == [0] * 5, "delivered at the feed's QoS, with no PUBACK owed"
