"""``archive report``'s comparison with the par sheet, on any payouts the archive may hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.archive import drift
from controller.archive.report import TableReport

DAY = datetime(2026, 11, 25, tzinfo=UTC)


_Key = tuple[str, str, str | None, str | None, str | None]


def _report(
    returns: dict[_Key, dict[str, int]],
) -> TableReport:
    games: dict[str, int] = {}
    for (game, *_), payouts in returns.items():
        games[game] = max(games.get(game, 0), sum(payouts.values()))
    return TableReport(
        "t", DAY, DAY + timedelta(days=1), 0, 0, 0, 0, 0, {}, [], [], returns=returns, games=games
    )


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["teen-patti-20-20", "no-such-game", ""]),
    st.text(max_size=12),
    st.dictionaries(
        st.one_of(st.text(max_size=8), st.sampled_from(["0", "1", "1.95", "2", "4", "1e9999"])),
        st.integers(min_value=0, max_value=10_000),
        max_size=6,
    ),
    st.sampled_from([None, "P1"]),
)
def test_any_payouts_give_a_verdict_and_never_raise(game, bet, payouts, position) -> None:
    fits, notes = drift.compare(_report({(game, bet, position, None, None): payouts}))
    assert len(fits) == 1
    (fit,) = fits
    assert fit.verdict in {drift.IN_LINE, drift.WATCH, drift.DRIFT, drift.NOT_COMPARED}
    assert fit.lines == sum(item.seen for item in fit.outcomes)
    assert isinstance(fit.returned, Fraction)
    drift.format_text(fits, notes)
    drift.to_json(fits, notes)
    drift.to_csv(_report({}), fits, notes)


def test_a_choice_is_not_compared_and_a_bet_not_on_the_sheet_says_so() -> None:
    returns: dict[_Key, dict[str, int]] = {
        ("teen-patti-20-20", "pair_plus_a", None, "stayed", None): {"2": 3, "0": 7},
        ("teen-patti-20-20", "lucky_seven", None, None, None): {"8": 1, "0": 9},
    }
    fits, _ = drift.compare(_report(returns))
    by_bet = {fit.bet: fit for fit in fits}
    assert by_bet["pair_plus_a"].verdict == drift.NOT_COMPARED
    assert "player's choice" in by_bet["pair_plus_a"].note
    assert by_bet["pair_plus_a"].returned == Fraction(6, 10)
    assert by_bet["lucky_seven"].note == "not a bet of the par sheet"


def test_a_fair_count_is_in_line_and_the_return_is_exact() -> None:
    # Player A over 10,000 rounds at exactly the par sheet's frequencies (rounded).
    returns: dict[_Key, dict[str, int]] = {
        ("teen-patti-20-20", "player_a", None, None, None): {"1.95": 4994, "1": 11, "0": 4995}
    }
    (fit,), _ = drift.compare(_report(returns))
    assert fit.verdict == drift.IN_LINE and fit.test == "chi-square"
    assert fit.returned == (Fraction("1.95") * 4994 + 11) / 10_000
    assert fit.par == Fraction(9543327, 9787750)
    assert [item.names for item in fit.outcomes] == [("win",), ("tie",), ("lose",)]


@pytest.mark.parametrize(
    ("wins", "verdict"),
    [(5_000, drift.IN_LINE), (5_150, drift.WATCH), (5_200, drift.DRIFT)],
)
def test_the_verdict_follows_the_p_value(wins: int, verdict: str) -> None:
    payouts = {"1.95": wins, "1": 11, "0": 10_000 - 11 - wins}
    (fit,), _ = drift.compare(
        _report({("teen-patti-20-20", "player_a", None, None, None): payouts})
    )
    assert fit.verdict == verdict
    assert fit.p_value is not None
    if verdict == drift.WATCH:
        assert drift.DRIFT_LEVEL <= fit.p_value < drift.WATCH_LEVEL
    elif verdict == drift.DRIFT:
        assert fit.p_value < drift.DRIFT_LEVEL
    else:
        assert fit.p_value >= drift.WATCH_LEVEL
