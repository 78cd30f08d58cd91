"""``make gallery``: the screenshot matrix's chosen shots, committed under ``docs/gallery/``.

When ``TABLECTL_GALLERY`` names a directory (``make gallery``: ``docs/gallery``), each game's
matrix run copies there, recompressed (:func:`tests.studio._screens.recompressed_png`), its
pages at the result (:data:`RESULT_PAGES`) and the examples of :data:`EXAMPLES` (a halt, a
void, a decision, the pit's confirmation). ``make gallery`` also takes the shots at half scale
(``TABLECTL_SCREENS_SCALE=0.5``: the pages are laid out at 1920x1080 and drawn at 960x540), so
the whole gallery stays within a few MB. Without the variable nothing is copied.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.studio._screens import Stage, recompressed_png

RESULT_PAGES = ("dealer", "overlay", "pit")
"""Every game's pages at the result. The secure-delay overlay shows the same result as the
public one once the round is over, except in Hold'em (every hole card): that one is an example."""

EXAMPLES: dict[str, tuple[str, ...]] = {
    "teen-patti-20-20": ("dealer-halted", "pit-halted", "pit-void-confirm"),
    "three-card-mulligan": ("dealer-decision", "pit-recall"),
    "texas-holdem": ("overlay-secure-result", "overlay-secure-decision", "overlay-voided"),
    "mahjong-pai-gow": ("dealer-voided",),
}
"""Beside the result pages: which other shots of which game the gallery shows."""


def gallery_dir() -> Path | None:
    """``$TABLECTL_GALLERY`` (created), or ``None`` when no gallery is being made."""
    named = os.environ.get("TABLECTL_GALLERY")
    if not named:
        return None
    path = Path(named)
    path.mkdir(parents=True, exist_ok=True)
    return path


def keep_for_gallery(stage: Stage) -> list[Path]:
    """Copy ``stage``'s chosen shots to the gallery (none when no gallery is being made)."""
    target = gallery_dir()
    if target is None:
        return []
    names = [f"{page}-result" for page in RESULT_PAGES] + list(EXAMPLES.get(stage.game, ()))
    taken = {f"{page}-{state}": shot for (page, state), shot in stage.shots.items()}
    kept = []
    for name in names:
        shot = taken.get(name)
        if shot is None:
            continue  # not taken in this run (the matrix stopped before it)
        path = target / shot.name
        path.write_bytes(recompressed_png(shot.read_bytes()))
        kept.append(path)
    return kept
