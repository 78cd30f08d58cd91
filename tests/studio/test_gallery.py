"""The screenshot matrix: every game, every page, every state, in Chromium (issue 23, item 5).

For each game a real simulated table (the scanner simulator on a pty, the real driver, the
simulated betting system, a real Mosquitto) is driven through betting, dealing, the decision
(games that have one), the result, a halt (the scanner's cable pulled) and a void (the pit
void command), while Debian's Chromium shows the dealer screen, the public overlay, the
secure-delay overlay and the pit console (tests/studio/_screens.py). Each page is shot at each
state (``tests/artifacts/screens/{game}-{page}-{state}.png``, kept by CI as artifacts) and
checked in the DOM: no two cards and no label and card overlapping, every card in the viewport
and (overlays) the title-safe area, no raw id or ``None``/``null``/``undefined`` in the visible
text, no suit glyph on a Mahjong tile, no script error. The pit console's Void button, clicked
once, must publish nothing before its confirmation.

Every finding of a game is listed in its failure message (and ``report-{game}.json``), not
only the first. ``make gallery`` runs this file with ``TABLECTL_GALLERY`` set: the chosen
shots are then copied, recompressed, to ``docs/gallery/`` (tests/studio/_gallery.py).
"""

from __future__ import annotations

import struct
import zlib

import pytest

from tests.studio._gallery import keep_for_gallery
from tests.studio._screens import (
    GAME_OPTIONS,
    game_stage,
    play_the_matrix,
    recompressed_png,
    write_report,
)


@pytest.mark.hil
@pytest.mark.slow
@pytest.mark.parametrize("game", list(GAME_OPTIONS))
async def test_every_page_of_the_game_at_every_state(mosquitto, browser, tmp_path, game):
    async with game_stage(game, mosquitto.url, browser, tmp_path / "j.sqlite") as stage:
        try:
            await play_the_matrix(stage)
        finally:
            report = write_report(stage)
            keep_for_gallery(stage)
    assert not stage.problems, f"{len(stage.problems)} finding(s), also in {report}:\n" + "\n".join(
        stage.problems
    )


def _idat(data: bytes) -> bytes:
    """A PNG's image data, inflated (what a viewer draws from)."""
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        chunks.append((kind, body))
        offset += 12 + length
    assert chunks[-1][0] == b"IEND"
    return zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))


def _png(rows: list[bytes], *, width: int, split: int) -> bytes:
    """A greyscale PNG written fast (level 1), its image data cut in IDAT chunks of ``split``."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        return struct.pack(">I", len(body)) + kind + body + crc

    header = struct.pack(">IIBBBBB", width, len(rows), 8, 0, 0, 0, 0)
    packed = zlib.compress(b"".join(b"\x00" + row for row in rows), 1)
    parts = [packed[i : i + split] for i in range(0, len(packed), split)]
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + b"".join(chunk(b"IDAT", part) for part in parts)
        + chunk(b"IEND", b"")
    )


def test_the_gallery_recompresses_a_png_to_the_same_pixels_and_smaller():
    rows = [bytes((x // 7 + y // 5) % 256 for x in range(300)) for y in range(200)]
    original = _png(rows, width=300, split=1000)
    smaller = recompressed_png(original)
    assert _idat(smaller) == _idat(original)
    assert len(smaller) < len(original)
    assert smaller.count(b"IDAT") == 1
    with pytest.raises(AssertionError, match="not a PNG"):
        recompressed_png(b"GIF89a" + original[6:])
