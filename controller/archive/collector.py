"""The archive process's garbage collector, set for ingest (docs/archive.md, "Speed").

An archive allocates a few dozen container objects per message (the parsed envelope, its
entry, the round's fold): with CPython's default thresholds (a young collection every 700
allocations, an old one as the heap grows) the collector ran hundreds of times a second
and its full passes walked every object the process held, the config, the kept round folds
and the modules included. Measured with ``bench/archive.py``'s store path: with the collector
off it ran about 40 % faster.

:func:`tune_for_ingest` is called once by the process that owns the archive (``tablectl
archive run``, after its set-up; the benchmark, after generating its traffic), never by a
library: the collector's settings are the whole process's. The archive beside a simulated
table (``make run``) leaves the table's process as it is.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune_for_ingest"]

YOUNG_THRESHOLD = 50_000
"""Allocations (net of deallocations) between two young collections (CPython's default: 700)."""


def tune_for_ingest(young: int = YOUNG_THRESHOLD) -> None:
    """Freeze what the process holds now and collect young objects less often.

    ``gc.freeze()`` moves every object alive now (modules, settings, connections) out of the
    collector's reach: later full passes no longer walk them (they stay alive, as they would
    anyway). The young threshold counts net allocations, so a batch's short-lived messages
    are freed by reference counting long before a collection; the older generations keep
    their default ratios (10, 10), so cycles are still collected.

    Args:
        young: The young generation's threshold.

    Raises:
        ValueError: ``young`` is below CPython's default (700).
    """
    if young < 700:
        raise ValueError(f"young threshold {young} is below CPython's default 700")
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
