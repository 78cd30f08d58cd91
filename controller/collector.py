"""Garbage collection between cards, not in the middle of one.

CPython's cyclic collector runs when allocations cross a threshold, and allocations happen
mostly while a card is being handled: left alone, a collection (0.1 to 3 ms here) lands on
about one card in twenty, right on its way from the scanner to the broker. ``tablectl run``
therefore takes the collector over (:func:`take_over`): the start-up heap is frozen, the
automatic collector is turned off, and :func:`collect_if_due` runs the very collection the
automatic one would have run by now (same thresholds, same generations) at moments when no
card is in flight: before each cue (the orchestrator's ``between_cards``) and every few
seconds from the housekeeping task, so a table waiting for a card still collects.
"""

from __future__ import annotations

import gc


def take_over() -> None:
    """Freeze the start-up heap and turn the automatic collector off (process set-up only).

    Only ``tablectl run`` calls this: code running inside another program (tests) keeps the
    automatic collector, and :func:`collect_if_due` then does nothing.
    """
    gc.collect()
    gc.freeze()  # modules, settings, schemas: alive for ever, never walked again
    gc.disable()


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
