"""``replay --from-seq``: re-send journalled entries, flagged, without journalling anything."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from controller.journal import Journal
from controller.messages import Outbound, RoundSnapshot, Topics, replay_message

if TYPE_CHECKING:
    from controller.signing import Signer

MAX_REPLAY_MESSAGES = 10_000
"""At most this many messages are re-sent by one :func:`replay` call."""


async def replay(
    journal: Journal,
    topics: Topics,
    send: Callable[[Outbound], Coroutine[Any, Any, None]],
    *,
    from_seq: int,
    to_seq: int | None,
    kinds: frozenset[str],
    window: int,
    signer: Signer | None,
    log: Any,
) -> int:
    """Re-send journalled entries of ``kinds`` with ``from_seq <= seq <= to_seq``.

    Each goes out with its original ``seq``, ``session`` and ``at``, ``delayed: true`` and
    ``replayed: true``: results and voids on ``results`` (signed when a signer is given),
    other kinds' public view on ``events``. Nothing is journalled; consumers de-duplicate on
    ``seq``. At most :data:`MAX_REPLAY_MESSAGES` are sent per call, ``window`` at a time.

    Args:
        journal: The table's journal.
        topics: The table's topics.
        send: Publishes one message and waits for its acknowledgement.
        from_seq: First ``seq`` (>= 1).
        to_seq: Last ``seq`` (the journal's last if ``None``).
        kinds: Entry kinds to re-send.
        window: Messages awaited together.
        signer: Signs results and voids, if given.
        log: The bound logger.

    Returns:
        How many messages were sent (each acknowledged by the broker).
    """
    last = journal.last_seq if to_seq is None else min(to_seq, journal.last_seq)
    # Fold from the round that was open at from_seq, so refusals naming a hidden card
    # stay withheld.
    opened = journal.last_of_kind("round_opened", before_seq=from_seq + 1)
    snapshot = RoundSnapshot()
    tasks: list[asyncio.Task[None]] = []
    sent = 0
    try:
        for entry in journal.entries(from_seq=opened.seq if opened else from_seq):
            if entry.seq > last:
                break
            snapshot = snapshot.apply(entry)
            if entry.seq < from_seq or entry.kind not in kinds:
                continue
            if sent >= MAX_REPLAY_MESSAGES:
                log.warning("replay cut short", limit=MAX_REPLAY_MESSAGES, next_seq=entry.seq)
                break
            message = replay_message(
                entry, topics, journal=journal.identity, snapshot=snapshot, signer=signer
            )
            tasks.append(asyncio.ensure_future(send(message)))
            sent += 1
            if len(tasks) >= window:
                await asyncio.gather(*tasks)
                tasks.clear()
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    log.info("replayed", from_seq=from_seq, to_seq=to_seq, messages=sent)
    return sent
