from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.analysis import Method
from controller.cards import Card, Deck, Tile
from controller.errors import ConfigError, RulesError
from controller.games.mahjong_pai_gow import par_sheet as par
from controller.games.mahjong_pai_gow import rules as mj
from controller.money import BetOutcome, merge_paytables

W = 10  # the window


def tiles(*values: int) -> list[Tile]:
    return [Tile(value) for value in values]


def judge(player: tuple[int, int], banker: tuple[int, int]) -> tuple[mj.Winner, mj.Reason]:
    return mj.compare(mj.hand_key(tiles(*player)), mj.hand_key(tiles(*banker)))


# --------------------------------------------------------------------------------------------
# The page's examples and decisions


def test_equal_points_highest_tile_decides() -> None:
    # 9+6 against 8+7: both five points, the player's 9 beats the banker's 8.
    assert judge((9, 6), (8, 7)) == (mj.Winner.PLAYER, mj.Reason.HIGHEST_TILE)
    assert judge((8, 7), (9, 6)) == (mj.Winner.BANKER, mj.Reason.HIGHEST_TILE)


def test_ties_go_to_the_banker() -> None:
    assert judge((9, 6), (6, 9)) == (mj.Winner.BANKER, mj.Reason.TIE)
    assert judge((4, 4), (4, 4)) == (mj.Winner.BANKER, mj.Reason.TIE)


def test_zero_against_zero_goes_to_the_banker() -> None:
    assert judge((1, 9), (2, 8)) == (mj.Winner.BANKER, mj.Reason.ZERO)
    assert judge((W, 5), (5, 5)) != (mj.Winner.BANKER, mj.Reason.ZERO)  # 5+5 is a pair
    assert judge((W, 3), (3, 7)) == (mj.Winner.PLAYER, mj.Reason.POINTS)  # 3 points vs 0


def test_window_counts_nothing_but_is_the_highest_tile() -> None:
    assert mj.hand_key(tiles(W, 9)) == mj.HandKey(0, 9, 10)
    assert judge((W, 9), (4, 5)) == (mj.Winner.PLAYER, mj.Reason.HIGHEST_TILE)
    assert judge((W, 1), (2, 9)) == (mj.Winner.PLAYER, mj.Reason.HIGHEST_TILE)
    assert mj.describe_hand(tiles(W, 9)) == "9 points, window high"


def test_pair_ordering() -> None:
    ladder = [W, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    for higher, lower in itertools.pairwise(ladder):
        assert judge((higher, higher), (lower, lower)) == (mj.Winner.PLAYER, mj.Reason.PAIR)
        assert judge((lower, lower), (higher, higher)) == (mj.Winner.BANKER, mj.Reason.PAIR)
    # The lowest pair beats the best non-pair.
    assert judge((1, 1), (W, 9)) == (mj.Winner.PLAYER, mj.Reason.PAIR)
    assert judge((W, 9), (1, 1)) == (mj.Winner.BANKER, mj.Reason.PAIR)
    assert mj.describe_hand(tiles(W, W)) == "pair of windows"


# --------------------------------------------------------------------------------------------
# Ranking properties

values = st.integers(min_value=1, max_value=10)
hands = st.tuples(values, values)


@settings(deadline=None, max_examples=300)
@given(hands, hands, hands)
def test_ranking_is_a_total_order(
    a: tuple[int, int], b: tuple[int, int], c: tuple[int, int]
) -> None:
    ka, kb, kc = (mj.key_of_values(*hand) for hand in (a, b, c))
    assert ka == mj.key_of_values(a[1], a[0])  # tile order within a hand does not matter
    assert (ka > kb) + (kb > ka) + (ka == kb) == 1
    if ka > kb > kc:
        assert ka > kc
    # The compare function agrees with the key order: the player wins only when strictly higher.
    winner, _ = mj.compare(ka, kb)
    assert (winner is mj.Winner.PLAYER) == (ka > kb)


def naive_value(first: int, second: int) -> tuple[int, ...]:
    """An independent scorer: larger tuples win; the banker wins when equal."""
    if first == second:
        return (100 + first,)
    points = sum(0 if value == W else value for value in (first, second)) % 10
    if points == 0:
        return (0,)
    return (points, max(first, second))


@settings(deadline=None, max_examples=300)
@given(hands, hands)
def test_compare_matches_a_naive_scorer(a: tuple[int, int], b: tuple[int, int]) -> None:
    winner, _ = judge(a, b)
    assert (winner is mj.Winner.PLAYER) == (naive_value(*a) > naive_value(*b))


# --------------------------------------------------------------------------------------------
# Deal plan, round, settlement


def test_deal_plan_positions_then_banker() -> None:
    plan = mj.deal_plan(4)
    assert [slot.name for slot in plan.slots] == [
        "P1a", "P1b", "P2a", "P2b", "P3a", "P3b", "P4a", "P4b", "Ba", "Bb",
    ]  # fmt: skip
    assert plan.hands == ("P1", "P2", "P3", "P4", "B")
    assert len(mj.deal_plan(9)) == 20
    with pytest.raises(ConfigError, match="1 to 9"):
        mj.deal_plan(10)


def round_hands() -> dict[str, list[Tile]]:
    return {
        "P1": tiles(9, 6),  # beats 8+7 on the highest tile
        "P2": tiles(1, 9),  # zero
        "P3": tiles(W, W),  # pair of windows
        "P4": tiles(3, 2),  # 5 points, 3 high: loses
        "B": tiles(8, 7),
    }


def test_resolve_and_settle_per_bet() -> None:
    game = mj.MahjongPaiGow()
    result = game.resolve(round_hands())
    assert result.winner == "P1+P3"
    assert result.details["positions"]["P2"] == {"winner": "banker", "reason": "points"}
    settled = game.settle_positions(result, game.default_paytables)
    assert settled["P1"]["player"].outcome is BetOutcome.WIN
    assert settled["P1"]["player"].odds == Fraction(19, 20)
    assert settled["P1"]["banker"].outcome is BetOutcome.LOSE
    assert settled["P4"]["banker"].payout == Fraction(39, 20)
    assert settled["P4"]["player"].outcome is BetOutcome.LOSE
    cheaper = merge_paytables(game.default_paytables, {"banker": {"win": "0.9:1"}})
    assert game.settle_positions(result, cheaper)["P4"]["banker"].odds == Fraction(9, 10)


def test_resolve_refuses_bad_rounds() -> None:
    game = mj.MahjongPaiGow()
    hands = round_hands()
    hands["P4"] = tiles(9, 9)  # a third and fourth 9 after P1 and P2
    with pytest.raises(RulesError, match="two of each"):
        game.resolve(hands)
    hands = round_hands()
    del hands["P4"]
    with pytest.raises(RulesError, match="needs hands"):
        game.resolve(hands)
    hands = round_hands()
    hands["P4"] = [Tile(3)]
    with pytest.raises(RulesError, match="exactly 2"):
        game.resolve(hands)
    mixed: dict[str, list[Tile | Card]] = {
        label: list(hand) for label, hand in round_hands().items()
    }
    mixed["P4"] = [Tile(3), Card.parse("As")]
    with pytest.raises(RulesError, match="not a Mahjong"):
        game.resolve(mixed)


def test_commission_on_the_banker_net() -> None:
    game = mj.MahjongPaiGow(commission=mj.CommissionMode.ON_NET)
    result = game.resolve(round_hands())
    settled = game.settle_positions(result, game.default_paytables)
    assert settled["P2"]["banker"].odds == 1  # gross; commission comes on the net
    positions = mj.resolve_positions(round_hands(), game.positions)
    stakes = {"P1": 10, "P2": 20, "P3": 5, "P4": 40}
    net = mj.banker_round_net(positions, stakes)
    assert net.gross == 20 + 40 - 10 - 5
    assert net.commission == Fraction(45, 20)
    assert net.net == Fraction(45 * 19, 20)
    losing = mj.banker_round_net(positions, {"P1": 100, "P2": 1})
    assert losing.commission == 0
    assert losing.net == -99
    with pytest.raises(RulesError, match="no result"):
        mj.banker_round_net(positions, {"P9": 1})


@settings(deadline=None, max_examples=200)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 10_000)), min_size=1, max_size=9),
    st.sampled_from([Fraction(1, 20), Fraction(0), Fraction(1, 10)]),
)
def test_net_commission_conserves_money(rows: list[tuple[bool, int]], rate: Fraction) -> None:
    results: dict[str, mj.PositionResult] = {}
    stakes: dict[str, Fraction] = {}
    for index, (player_wins, cents) in enumerate(rows):
        winner = mj.Winner.PLAYER if player_wins else mj.Winner.BANKER
        results[f"P{index + 1}"] = mj.PositionResult(winner, mj.Reason.POINTS)
        stakes[f"P{index + 1}"] = Fraction(cents, 100)
    tables = {"player": {"win": 1 - rate}, "banker": {"win": 1 - rate}}
    players_net = Fraction(0)
    house = Fraction(0)
    for position, result in results.items():
        bet = mj.settle_position(result, tables, mj.CommissionMode.ON_NET)["player"]
        players_net += stakes[position] * bet.net
        if bet.outcome is BetOutcome.WIN:
            house += stakes[position] * rate  # the player's commission
    banker = mj.banker_round_net(results, stakes, rate)
    assert banker.commission >= 0
    if banker.gross > 0:
        assert banker.net == banker.gross * (1 - rate)
    else:
        assert banker.net == banker.gross
    house += banker.commission
    assert players_net + banker.net + house == 0


def test_banker_rotation() -> None:
    rotation = mj.BankerRotation(("P1", "P2", "P3", "P4"))
    assert rotation.next() == "P1"
    rotation = rotation.advance()
    assert rotation.current == "P1"
    assert rotation.next() == "P2"
    assert rotation.next({"P2", "P3"}) == "P4"
    assert rotation.next({"P2", "P3", "P4"}) == "P1"  # the current banker is asked last
    assert rotation.next({"P1", "P2", "P3", "P4"}) is None
    assert rotation.advance({"P1", "P2", "P3", "P4"}) == rotation
    assert rotation.advance({"P2"}).current == "P3"
    assert mj.BankerRotation(("P1", "P2"), "P2").next() == "P1"  # wraps around
    with pytest.raises(RulesError, match="not at the table"):
        rotation.next({"P7"})
    with pytest.raises(ConfigError):
        mj.BankerRotation(("P1", "P2"), "P5")
    with pytest.raises(ConfigError):
        mj.BankerRotation(())


# --------------------------------------------------------------------------------------------
# Par sheet


def test_par_sheet_against_naive_enumeration() -> None:
    physical = [tile.value for tile in Deck.mahjong_pai_gow() if isinstance(tile, Tile)]
    assert len(physical) == 20
    tally: Counter[str] = Counter()
    for a, b, c, d in itertools.permutations(range(20), 4):
        player = naive_value(physical[a], physical[b])
        banker = naive_value(physical[c], physical[d])
        tally["player" if player > banker else "banker"] += 1
    total = 20 * 19 * 18 * 17
    assert sum(tally.values()) == total
    report = par.analyze(method=Method.EXACT, samples=0, seed=0, progress=False)
    assert report.method is Method.EXACT
    p_player = Fraction(tally["player"], total)
    expected_player_rtp = p_player * Fraction(39, 20)
    expected_banker_rtp = (1 - p_player) * Fraction(39, 20)
    assert report.bets["player"].rtp == expected_player_rtp
    assert report.bets["banker"].rtp == expected_banker_rtp
    player_rows = report.bets["player"].outcomes
    assert sum(row.count or 0 for row in player_rows) == total
    assert (
        sum((row.probability for row in player_rows if row.name.startswith("player")), Fraction(0))
        == p_player
    )
    counts = par.count_deals()
    ties = counts.get((mj.Winner.BANKER, mj.Reason.TIE), 0)
    zeros = counts.get((mj.Winner.BANKER, mj.Reason.ZERO), 0)
    naive_ties = sum(
        1
        for a, b, c, d in itertools.permutations(range(20), 4)
        if naive_value(physical[a], physical[b]) == naive_value(physical[c], physical[d])
    )
    assert ties + zeros == naive_ties
    assert "Monte Carlo" in " ".join(
        par.analyze(method=Method.MONTE_CARLO, samples=10, seed=1, progress=False).notes
    )
