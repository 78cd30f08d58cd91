"""The archive beside one table: what ``make run`` (``tablectl run --simulate``) starts.

:func:`run_beside_table` runs an :class:`controller.archive.consumer.ArchiveConsumer` on the
table's own broker into an archive URL (by default ``archive.sqlite`` beside the journal:
``sqlite:///var/archive.sqlite``), under a
client id of its own (``tablectl-archive-{table}``, a persistent session), until the table
stops; then it waits (at most :data:`DRAIN_SECONDS`) for what the table published last, and
stops. ``tablectl recall ROUND --archive sqlite:///var/archive.sqlite`` and ``tablectl archive
report --database sqlite:///var/archive.sqlite`` read it (docs/archive.md, "SQLite").
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from controller.archive.backend import open_store
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.mqtt.settings import MqttSettings

log = structlog.get_logger("archive")

DEFAULT_NAME = "archive.sqlite"
"""The file ``make run``'s archive is kept in, beside the table's journal."""
DRAIN_SECONDS = 2.0
"""How long, once the table stops, the archive waits for the table's last messages."""
GAP_CHECK_SECONDS = 2.0
"""How often the archive beside one table looks for gaps (an archive instance: 0.5 s). Each
look is a few statements on the SQLite thread; beside one table, whose messages come from the
same machine, a gap is rare and found within 3 s instead of 1.5 s, for a quarter of the
wake-ups (docs/performance.md, "The demo")."""


LINGER_SECONDS = 2.0
"""How long a batch of the archive beside one table waits for more after its first message
(``consumer.linger_seconds``; an archive instance: 0). A table's messages come one by one as
it deals (one every 0.4 s in the demo): each alone was a transaction, a hand-over to the
SQLite thread and a write of its acknowledgement. 2 s holds a round's dealing burst in one or
two batches (3 a round in the demo, not 11); the archive has each message at most 2 s later
(docs/archive.md, "Batches")."""


def default_url(journal: Path) -> str:
    """The SQLite archive beside ``journal``.

    ``var/sim-1.sqlite``: ``sqlite:///var/archive.sqlite``; ``/srv/t.sqlite``:
    ``sqlite:////srv/archive.sqlite``.
    """
    return f"sqlite:///{journal.parent / DEFAULT_NAME}"


def archive_settings(
    mqtt: MqttSettings, url: str, table_id: str, public_key: Path | None = None
) -> ArchiveSettings:
    """The archive config of one table on its own broker."""
    return ArchiveSettings.model_validate(
        {
            "database": {"url": url},
            "mqtt": mqtt.model_copy(update={"client_id": f"tablectl-archive-{table_id}"}),
            "tables": {table_id: {"public_key": public_key}},
            "gaps": {"check_seconds": GAP_CHECK_SECONDS},
            "consumer": {"linger_seconds": LINGER_SECONDS},
        }
    )


async def run_beside_table(
    settings: ArchiveSettings,
    keys: TableKeys,
    stop: asyncio.Event,
    ready: asyncio.Event | None = None,
) -> dict[str, int]:
    """Archive the table's messages until it stops, then drain; the counts.

    Until ``stop`` is set or the task is cancelled, then at most :data:`DRAIN_SECONDS` more
    for what is still on its way. The table cancels its companions right after it stops:
    the drain still runs then (the table's broker is up until its tasks are done), and the
    cancellation is raised after it. A second cancellation (Ctrl-C twice) ends the drain.
    ``ready`` is set once the archive has subscribed.

    Raises:
        ArchiveError: The archive database cannot be opened or migrated.
    """
    store = await open_store(settings.database.url)
    consumer = ArchiveConsumer(settings, store, keys, only_known_tables=True)
    cancelled = False
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(consumer.run(), name="archive-consumer")]
            if ready is not None:
                waiter = _when(consumer.subscribed, ready)
                tasks.append(group.create_task(waiter, name="archive-ready"))
            try:
                await stop.wait()
                await _drain(consumer)
            except asyncio.CancelledError:
                cancelled = True
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                await _drain(consumer)
            for task in tasks:
                task.cancel()
    finally:
        await store.close()
        await consumer.db.close()  # PostgreSQL: the connection made again after a loss, if any
    log.info("archive stopped", **dict(consumer.counts))
    if cancelled:
        raise asyncio.CancelledError
    return dict(consumer.counts)


async def _when(subscribed: asyncio.Event, ready: asyncio.Event) -> None:
    await subscribed.wait()
    ready.set()


async def _drain(consumer: ArchiveConsumer) -> None:
    """Wait until nothing new was stored for a moment, or :data:`DRAIN_SECONDS`.

    A batch lingering for more (:data:`LINGER_SECONDS`) is stored at once from now on.
    """
    consumer.linger.hurry()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_SECONDS
    while loop.time() < deadline:
        before = consumer.counts.total()
        await asyncio.sleep(0.3)
        if consumer.counts.total() == before or not consumer.subscribed.is_set():
            return  # quiet, or no broker to drain
