"""Garbage collection between cards, not in the middle of one.

CPython's cyclic collector runs when allocations cross a threshold, and allocations happen
mostly while a card is being handled: left alone, a collection (0.1 to 3 ms here) lands on
about one card in twenty, right on its way from the scanner to the broker. ``tablectl run``
therefore takes the collector over (:func:`take_over`): the start-up heap is frozen, the
automatic collector is turned off, and :func:`collect_if_due` runs the very collection the
automatic one would have run by now (same thresholds, same generations) at moments when no
card is in flight: before each cue (the orchestrator's ``between_cards``) and every few
seconds from the housekeeping task, so a table waiting for a card still collects.

``tablectl run --simulate`` (``make run``'s demo) does the same for the table's run
(:func:`taken_over`), and gives the automatic collector back when the table stops (a lingering
studio, a test that ran the command in its own process). Left automatic, the demo's first
full collection came about 100 s after the start, walked the 98,000 objects of its start-up
(the studio, the pit console, the archive, their schemas) and took 39 ms on the event loop:
as much as the demo's three consumers spend in a minute (docs/performance.md, "The demo").
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def take_over() -> None:
    """Freeze the start-up heap and turn the automatic collector off (process set-up only).

    Only ``tablectl run`` calls this: code running inside another program (tests) keeps the
    automatic collector, and :func:`collect_if_due` then does nothing.
    """
    gc.collect()
    gc.freeze()  # modules, settings, schemas: alive for ever, never walked again
    gc.disable()


@contextlib.contextmanager
def taken_over() -> Iterator[None]:
    """:func:`take_over` for a block, then the collector as it was (automatic, nothing frozen).

    For a command that may run inside another program (``tablectl run --simulate`` run by a
    test) or that goes on after its table (a lingering studio): outside the block nobody
    calls :func:`collect_if_due`, so the automatic collector must be back.
    """
    was_automatic = gc.isenabled()
    take_over()
    try:
        yield
    finally:
        if was_automatic:
            gc.unfreeze()  # back in the oldest generation, collectable again
            gc.enable()


def collect_if_due() -> int | None:
    """Run the collection the automatic collector would have run by now, if any.

    Returns:
        The generation collected, or ``None`` (nothing due, or the automatic collector is on).
    """
    if gc.isenabled():
        return None
    count = gc.get_count()
    threshold = gc.get_threshold()
    for generation in (2, 1, 0):
        if threshold[generation] and count[generation] >= threshold[generation]:
            gc.collect(generation)
            return generation
    return None
