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
    CHECK_MORE,
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


CHECKED_PAGE = """
<body style="margin:0;font-family:sans-serif">
<div data-role="label" style="position:absolute;left:100px;top:100px;font-size:20px">
  two pair, jacks and nines, ace kicker</div>
<div data-role="label" style="position:absolute;left:200px;top:104px;font-size:20px">
  one pair, jacks</div>
<div style="position:absolute;left:100px;top:300px;line-height:0.85">
  <div data-role="label" style="font-size:20px">next</div>
  <div data-role="label" style="font-size:160px;font-weight:bold">A2</div>
</div>
<div data-role="card" class="card" data-slot="P1a" data-card="wd" data-kind="card"
  style="position:absolute;left:900px;top:300px;width:80px;height:110px">W&#9830;</div>
<div data-role="label" style="position:absolute;left:880px;top:330px">Banker</div>
<div data-role="card" class="card" data-slot="P2a" data-card=""
  style="position:absolute;left:20px;top:600px;width:80px;height:110px"></div>
<p>TEXAS-HOLDEM round gal-9-00000042 bar-s1 [object Object] seats</p>
</body>
"""
"""A page with each fault the matrix looks for, and one it must not take for a fault (a huge
"A2" set tight under a small "next": their text boxes touch, their glyphs do not)."""


@pytest.mark.hil
async def test_the_matrix_checks_find_each_fault_and_not_a_tight_line(browser):
    page = await browser.new_page(viewport={"width": 1920, "height": 1080})
    await page.set_content(CHECKED_PAGE)
    found = await page.evaluate(
        CHECK_MORE, ["overlay", "mahjong-pai-gow", "Mahjong Pai Gow", "gal-9", "gal-9-00000042"]
    )
    assert any("two pair" in f and "one pair" in f and "over each other" in f for f in found)
    assert any('"Banker" are drawn over card P1a' in f for f in found)
    assert not [f for f in found if '"next"' in f], found
    assert "tile P1a carries the suit glyph \u2666" in found
    assert "tile P1a (wd) drawn as a playing card" in found
    assert 'raw id "bar-s1" in the visible text' in found
    assert 'raw token "[object Object]" in the text' in found
    assert 'the round id "gal-9-00000042" in the visible text' in found
    game = await page.evaluate(
        CHECK_MORE, ["overlay", "texas-holdem", "Texas Hold'em", "gal-9", "gal-9-00000042"]
    )
    assert 'the game\'s id "texas-holdem" in the visible text' in game
    assert "card P2a outside the title-safe area (90% of 1920x1080)" in game
    assert not [f for f in game if "P1a" in f and "title-safe" in f]
    assert not [f for f in game if "tile" in f], "only a Mahjong page's pieces are tiles"
    pit = await page.evaluate(
        CHECK_MORE, ["pit", "texas-holdem", "Texas Hold'em", "gal-9", "gal-9-00000042"]
    )
    assert not [f for f in pit if "round id" in f], "the pit console may name a round by id"
    assert not [f for f in pit if "title-safe" in f]
