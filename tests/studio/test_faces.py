"""The card and tile faces (controller/studio/static/faces.js) in Chromium, served by the studio.

Every piece of the notation gets its own face: the 52 cards with their suit (red hearts and
diamonds), the joker drawn as a joker, the nine dots tiles and the white dragon as tiles with
no suit glyph at all (``wd`` was drawn as a red "W" of diamonds). Every face of one height
sits on the same baseline. Any other string (hostile notation, by hypothesis) is drawn as an
unknown piece, never raises and never becomes markup.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.cards import RANK_CHARS, SUIT_CHARS
from tests.studio._harness import make_studio_settings, running_studio
from tests.support.browser import artifacts_dir

CARDS = [rank + suit for rank in RANK_CHARS for suit in SUIT_CHARS]
TILES = [f"{n}p" for n in range(1, 10)] + ["wd"]
SUIT_GLYPHS = "\u2660\u2665\u2666\u2663\u2664\u2661\u2662\u2667"

DRAW = """
async (pieces) => {
  const faces = await import('/static/faces.js');
  const studio = await import('/static/studio.js');
  const row = document.createElement('div');
  row.id = 'row';
  row.style.cssText = 'display:flex;flex-wrap:wrap;align-items:flex-end;gap:6px;background:#0b3d1f';
  document.body.replaceChildren(row);
  const out = [];
  for (const piece of pieces) {
    const el = studio.cardElement(document, {slot: 'X', hand: 'h', card: piece}, false);
    el.style.cssText = 'height:120px;width:auto;display:block;flex:none';
    el.firstElementChild.style.cssText = 'height:100%;width:auto;display:block';
    row.appendChild(el);
    const svg = el.querySelector('svg');
    const r = el.getBoundingClientRect();
    out.push({piece, kind: el.dataset.kind, suit: svg.getAttribute('data-suit'),
              text: svg.textContent, glyph: studio.glyph(piece).suit, fill: svg.innerHTML,
              markup: el.querySelectorAll('script, img, iframe, foreignObject').length,
              bottom: r.bottom, height: r.height, label: svg.getAttribute('aria-label')});
  }
  return out;
}
"""


async def _draw(mosquitto, browser, pieces: list[str | None]) -> list[dict[str, Any]]:
    async with running_studio(make_studio_settings(mosquitto.url)) as address:
        page = await browser.new_page(viewport={"width": 1800, "height": 1400})
        await page.goto(f"{address.url}/")
        drawn: list[dict[str, Any]] = await page.evaluate(DRAW, pieces)
        await page.screenshot(path=artifacts_dir() / "faces.png", full_page=True)
        return drawn


async def test_every_card_and_tile_has_its_own_face_on_one_baseline(mosquitto, browser):
    drawn = await _draw(mosquitto, browser, [*CARDS, "JK", *TILES, None])
    by_piece = {d["piece"]: d for d in drawn}
    for card in CARDS:
        face = by_piece[card]
        assert face["kind"] == "card" and face["suit"] == card[1], face
        red = "#c8102e" in face["fill"]
        assert red == (card[1] in "hd"), card
    for tile in TILES:
        face = by_piece[tile]
        assert face["kind"] == "tile", face
        assert face["suit"] is None and face["glyph"] == "", face
        assert not any(g in face["text"] for g in SUIT_GLYPHS), face
        assert "diamond" not in face["label"], face
    assert by_piece["wd"]["label"] == "white dragon tile"
    assert by_piece["JK"]["kind"] == "joker" and "JOKER" in by_piece["JK"]["text"]
    assert by_piece[None]["kind"] == "back"
    # One baseline: every face in the row ends at the same bottom, jokers and tiles too.
    rows: dict[float, set[str]] = {}
    for face in drawn:
        rows.setdefault(round(face["bottom"]), set()).add(face["kind"])
        assert round(face["height"]) == 120, face
    assert any({"card", "joker"} <= kinds or {"card", "tile"} <= kinds for kinds in rows.values())
    # 52 cards + joker + 10 tiles: every face a different drawing.
    assert len({d["fill"] for d in drawn if d["piece"]}) == len(CARDS) + 1 + len(TILES)


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.text(max_size=12), min_size=150, max_size=150))
async def test_hostile_notation_is_an_unknown_piece_never_markup(mosquitto, browser, junk):
    pieces = [*junk, "<img src=x onerror=alert(1)>", "wd ", "10h", "Jk", "0p", "As<b>"]
    drawn = await _draw(mosquitto, browser, pieces)
    assert len(drawn) == len(pieces)
    for face in drawn:
        assert face["markup"] == 0, face
        known = face["piece"] in CARDS or face["piece"] in TILES or face["piece"] == "JK"
        if face["piece"] and not known:
            assert face["kind"] == "unknown", face
