"""Factory fixtures for the integration tests: a journal, a running publisher.

``make_publisher(settings, table, journal, ...)`` is the set-up many tests repeated: build a
:class:`Publisher`, run it in its own :class:`asyncio.TaskGroup` for an ``async with`` block,
optionally wait until it is connected, and always stop it and await its task on the way out
(also when the block fails).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.journal import Journal
from controller.mqtt.settings import MqttSettings
from controller.publisher import Publisher


@contextlib.asynccontextmanager
async def running_publisher(
    settings: MqttSettings,
    table: str,
    journal: Journal,
    *,
    connect_within: float | None = None,
    game: str = "g",
    version: str = "1",
    **overrides: Any,
) -> AsyncIterator[Publisher]:
    """A :class:`Publisher` running for the ``async with`` block, stopped after it.

    Args:
        settings: The MQTT settings.
        table: The table id.
        journal: The journal it publishes.
        connect_within: Assert that it connects within this many seconds before the block
            runs (``None``: do not wait).
        game: The game named in its status.
        version: The version named in its status.
        **overrides: More :class:`Publisher` keyword arguments (``signer``, ``on_delivered``).
    """
    publisher = Publisher(settings, table, journal, game=game, version=version, **overrides)
    async with asyncio.TaskGroup() as group:
        task = group.create_task(publisher.run(), name=f"publisher {table}")
        try:
            if connect_within is not None:
                assert await publisher.wait_connected(connect_within)
            yield publisher
        finally:
            await publisher.stop()
            await task


@pytest.fixture
def make_publisher() -> Callable[..., contextlib.AbstractAsyncContextManager[Publisher]]:
    """The :func:`running_publisher` factory (``async with make_publisher(...) as p:``)."""
    return running_publisher


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    """A journal at ``tmp_path / "j.sqlite"``, closed when the test ends."""
    with Journal.open(tmp_path / "j.sqlite") as opened:
        yield opened
