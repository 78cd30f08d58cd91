"""No game's public step fields ever carry a hidden piece before its reveal.

Every game is played for many rounds with the simulated betting policy; at each step the
pieces dealt face down and not yet revealed are the secrets, and no decision window (its info,
options and default: all published on public topics) and no non-secure info step may name
one. Reveals must name exactly the hidden pieces of their hand.
"""

from __future__ import annotations

import json

import pytest

from controller.games.base import Face
from controller.games.live.base import DealStep, DecisionStep, FinishStep, InfoStep, RevealStep
from controller.games.registry import GAME_IDS, make_live_game
from simulators.betting import BettingPolicy
from tests.unit.test_live_helpers import shuffled


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_hidden_pieces_stay_off_public_fields(game_id: str) -> None:
    options = {"equity_samples": 1000} if game_id == "texas-holdem" else {}
    game = make_live_game(game_id, options, {})
    policy = BettingPolicy(11)
    state: dict[str, object] = {}
    public_checks = 0
    for number in range(25):
        rnd = game.new_round(state)
        cards = shuffled(game.deck, 500 + number)
        hidden: dict[str, list[str]] = {}
        while True:
            step = rnd.next_step()
            secrets = {card for hand in hidden.values() for card in hand}
            if isinstance(step, DealStep):
                piece = next(cards)
                if step.slot.face is Face.HIDDEN:
                    hidden.setdefault(step.slot.hand, []).append(str(piece))
                rnd.apply_card(step.index, piece)
            elif isinstance(step, DecisionStep):
                text = json.dumps([step.info, step.options, step.default, step.seat])
                assert not {c for c in secrets if f'"{c}"' in text}, (step.window, secrets)
                public_checks += 1
                info = {
                    "round": f"r{number}",
                    "window": step.window,
                    "kind": step.kind,
                    "options": list(step.options),
                    "info": dict(step.info),
                }
                decision = policy.decide(info)
                rnd.apply_decision(step.window, step.default if decision is None else decision)
            elif isinstance(step, InfoStep):
                if not step.secure:
                    text = json.dumps(step.data)
                    assert not {c for c in secrets if f'"{c}"' in text}
                rnd.mark_info_published()
            elif isinstance(step, RevealStep):
                assert list(step.cards) == hidden.pop(step.hand)
                rnd.mark_revealed(step.hand)
            else:
                assert isinstance(step, FinishStep)
                break
        state = dict(rnd.table_state_after())
    if game_id != "teen-patti-20-20":
        assert public_checks > 0
