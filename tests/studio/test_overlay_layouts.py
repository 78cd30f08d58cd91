"""Every game's overlay and dealer screen in Chromium, through a whole round of a real table.

A simulated table of each game (the real driver on a pty, the simulated betting system, a real
Mosquitto) plays a round while Debian's Chromium shows the public overlay at 1920x1080 and at
1280x720, and the dealer screen at 1920x1080. Every 150 ms until the result, and at the
result, each page is checked by bounding boxes and words (tests/studio/_pages.py): every card
in the title-safe area (overlay) and the viewport, no two cards overlapping, no label on a card
or covered by another element, no raw token (``all_in``, ``seat3``, ``None``, a game slug) in
the visible text. The layout is fixed: a card's slot does not move once the round's layout is
shown. The title names the game as people know it. Screenshots at the result go to the
artifacts.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.games.registry import game_spec
from simulators.table import Simulation
from tests.studio._harness import make_studio_settings, running_studio, running_table, wait_for
from tests.studio._pages import page_problems
from tests.support.browser import artifacts_dir

pytestmark = pytest.mark.hil

GAMES: dict[str, dict[str, Any]] = {
    "teen-patti-20-20": {},
    "three-card-mulligan": {"decision_seconds": 2},
    "break-poker": {"setting_seconds": 2},
    "texas-holdem": {"seats": 6, "action_seconds": 2},
    "mahjong-pai-gow": {"bank_seconds": 2},
}

SLOTS = """
() => {
  // The dealer's full-width prompts push its cards down while shown: a place is compared
  // with the places seen under prompts of the same height.
  const prompt = document.getElementById('prompt');
  const key = prompt ? `prompt ${prompt.offsetHeight}|` : '';
  return Object.fromEntries([...document.querySelectorAll('[data-role="card"]')].map((el) => {
    const r = el.getBoundingClientRect();
    return [key + el.dataset.slot, [Math.round(r.left), Math.round(r.top), Math.round(r.width)]];
  }));
}
"""
"""Each reserved slot's place on the page (a fixed layout: it does not move)."""


FACES = """
() => [...document.querySelectorAll('[data-role="card"][data-face="up"]')]
  .map((el) => [el.dataset.card, el.dataset.kind])
"""
"""Each face-up piece's notation and the face drawn for it."""

HEIGHTS = """
() => [...document.querySelectorAll('[data-role="card"]')]
  .map((el) => el.getBoundingClientRect().height)
"""

BARS = """
() => ({
  shown: [...document.querySelectorAll('[data-role="bar"]:not([hidden])')]
    .map((b) => b.dataset.who),
  in: [...document.querySelectorAll('[data-role="seat"][data-folded="false"]')]
    .map((s) => s.dataset.seat),
})
"""
"""The seats with a win bar shown, and the seats still in the hand."""

PROMPTING = """
() => [...document.querySelectorAll('#prompt > *')].some((el) => !el.hidden)
"""


def _kind(card: str) -> str:
    """The face a piece of notation must be drawn as."""
    if card == "JK":
        return "joker"
    if card == "wd" or (len(card) == 2 and card[0] in "123456789" and card[1] == "p"):
        return "tile"
    return "card"


async def _faces_and_heights(pages: dict[str, Any], game: str) -> None:
    """At the result: the game's name, every face drawn as its piece, the dealer's card sizes."""
    shown = 0
    for name, (page, _) in pages.items():
        assert await page.locator("#game").inner_text() == game_spec(game).name, name
        faces = await page.evaluate(FACES)
        shown += len(faces)
        for card, kind in faces:
            assert kind == _kind(card), f"{name}: {card} drawn as {kind}"
    # (A Hold'em hand won by folds before the flop shows no card face up on a public page.)
    assert shown, "no card face up on any page at the result"
    # The dealer's cards: a fifth of the screen's height at least (no prompt showing).
    dealer = pages["dealer"][0]
    if not await dealer.evaluate(PROMPTING):
        heights = await dealer.evaluate(HEIGHTS)
        assert min(heights) >= 0.2 * 1080 - 1, f"dealer cards {min(heights)} px high"


@pytest.mark.parametrize("game", list(GAMES))
async def test_every_page_of_a_game_keeps_its_cards_apart_inside_and_in_words(
    mosquitto, browser, tmp_path, game
):
    table = f"lay-{game.split('-')[0]}"
    settings = make_studio_settings(mosquitto.url, tables=[table], secure={"delay_seconds": 0.5})
    shots = artifacts_dir()
    async with running_studio(settings) as address:
        pages = {}
        for name, size, path in (
            ("overlay-1080", (1920, 1080), "overlay"),
            ("overlay-720", (1280, 720), "overlay"),
            ("dealer", (1920, 1080), "dealer"),
            ("secure-1080", (1920, 1080), "overlay?mode=secure-delay"),
        ):
            page = await browser.new_page(viewport={"width": size[0], "height": size[1]})
            errors: list[str] = []
            page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
            await page.goto(f"{address.url}/tables/{table}/{path}")
            pages[name] = (page, errors)
        async with running_table(
            mosquitto.url,
            tmp_path / "j.sqlite",
            table_id=table,
            game=game,
            sim=Simulation(seed=11, deal_delay=0.3),
            game_options=GAMES[game],
            betting={"think_seconds": 0.05},
            # The result stays up 6 s: four pages' shots and checks took over 3 s once, with
            # the machine carrying two suites (the next round had cleared the cards).
            round_settings={"betting_seconds": 0.6, "pause_seconds": 6},
        ):
            overlay = pages["overlay-1080"][0]
            await wait_for(
                lambda: overlay.locator("#state[data-state='dealing']").count(), 60, "dealing"
            )
            layouts: dict[str, dict[str, list[int]]] = {}
            problems: dict[str, set[str]] = {name: set() for name in pages}
            checks = 0
            while not await overlay.locator("#result").is_visible():
                for name, (page, _) in pages.items():
                    problems[name].update(await page_problems(page))
                    places = await page.evaluate(SLOTS)
                    known = layouts.setdefault(name, places)
                    moved = {s for s in places if s in known and places[s] != known[s]}
                    assert not moved, f"{name}: slots moved as cards came: {sorted(moved)}"
                    known.update(places)
                checks += 1
                assert checks < 600, "no result within 90 s"
                await asyncio.sleep(0.15)
            await asyncio.sleep(0.3)  # the result drawn everywhere
            for name, (page, errors) in pages.items():
                problems[name].update(await page_problems(page))
                await page.screenshot(path=shots / f"layout-{game}-{name}.png")
                assert not errors, f"{name}: script errors {errors}"
            for name in pages:
                assert not problems[name], f"{name}: {sorted(problems[name])}"
            await _faces_and_heights(pages, game)
            if game == "texas-holdem":
                # Win chances: on the public overlay never for a hand not shown; on the
                # secure-delay overlay (its secrets out at the round's end) a bar for each seat
                # still in while two or more are, none once the hand is decided.
                await asyncio.sleep(1.0)  # the secure-delay floor's 0.5 s, and the secrets
                secure = pages["secure-1080"][0]
                bars = await secure.evaluate(BARS)
                assert bars["shown"] == (bars["in"] if len(bars["in"]) >= 2 else []), bars
                assert not await page_problems(secure)
                public = await overlay.evaluate(BARS)
                assert public["shown"] == [], public
        # The table stops: the overlay says so in a viewer's words, beside the title.
        await wait_for(lambda: overlay.locator("body[data-online='false']").count(), 15, "offline")
        banner = overlay.locator("#banner")
        assert await banner.inner_text() == "Table offline \u2014 the game resumes shortly"
        assert not await page_problems(overlay)
        await overlay.screenshot(path=shots / f"layout-{game}-offline.png")
