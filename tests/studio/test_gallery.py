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

import pytest

from tests.studio._gallery import keep_for_gallery
from tests.studio._screens import GAME_OPTIONS, game_stage, play_the_matrix, write_report

pytestmark = [pytest.mark.hil, pytest.mark.slow]


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
