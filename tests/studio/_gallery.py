"""``make gallery``: the screenshot matrix's chosen shots, committed under ``docs/gallery/``.

When ``TABLECTL_GALLERY`` names a directory (``make gallery``: ``docs/gallery``), each game's
matrix run copies there, recompressed (:func:`tests.studio._screens.recompressed_png`), its
four pages at the result and the examples of :data:`EXAMPLES` (a halt, a void, the pit's
confirmation). ``make gallery`` also takes the shots at half scale
(``TABLECTL_SCREENS_SCALE=0.5``: the pages are laid out at 1920x1080 and drawn at 960x540), so
the whole gallery stays within a few MB. Without the variable nothing is copied.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.studio._screens import PAGES, Stage, recompressed_png, screens_dir

EXAMPLES: dict[str, tuple[str, ...]] = {
    "teen-patti-20-20": ("dealer-halted", "pit-halted", "pit-void-confirm"),
    "three-card-mulligan": ("dealer-decision",),
    "texas-holdem": ("overlay-secure-decision", "overlay-voided"),
    "mahjong-pai-gow": ("dealer-voided",),
}
"""Beside every page at the result: which other shots of which game the gallery shows."""


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
    names = [f"{page}-result" for page in PAGES] + list(EXAMPLES.get(stage.game, ()))
    kept = []
    for name in names:
        shot = screens_dir() / f"{stage.game}-{name}.png"
        if not shot.exists():
            continue
        path = target / shot.name
        path.write_bytes(recompressed_png(shot.read_bytes()))
        kept.append(path)
    return kept
