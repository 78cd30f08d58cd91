"""The goodness-of-fit tests of ``archive report`` (controller/archive/fit.py), checked."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.archive.fit import (
    MIN_EXPECTED,
    binomial_two_sided,
    chi_square_sf,
    fit_outcomes,
)


def _even_dof_sf(x: float, dof: int) -> float:
    """Q(k/2, x/2) for even k: exp(-x/2) * sum_{i<k/2} (x/2)^i / i!."""
    half = x / 2
    return math.exp(-half) * sum(half**i / math.factorial(i) for i in range(dof // 2))


@given(
    st.floats(min_value=0, max_value=400, allow_nan=False),
    st.integers(min_value=1, max_value=40),
)
def test_the_chi_square_tail_is_the_closed_form_for_even_dof(x: float, half: int) -> None:
    dof = 2 * half
    assert chi_square_sf(x, dof) == pytest.approx(_even_dof_sf(x, dof), rel=1e-9, abs=1e-300)


@given(st.floats(min_value=0, max_value=200, allow_nan=False))
def test_the_chi_square_tail_with_one_dof_is_erfc(x: float) -> None:
    assert chi_square_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-9, abs=1e-300)


def test_known_critical_values() -> None:
    # Textbook 5% and 0.1% critical values.
    assert chi_square_sf(3.841459, 1) == pytest.approx(0.05, rel=1e-5)
    assert chi_square_sf(11.0705, 5) == pytest.approx(0.05, rel=1e-4)
    assert chi_square_sf(29.5883, 10) == pytest.approx(0.001, rel=1e-4)
    assert chi_square_sf(0.0, 3) == 1.0


@pytest.mark.parametrize(("x", "dof"), [(-1.0, 1), (math.inf, 2), (math.nan, 2), (1.0, 0)])
def test_a_bad_chi_square_is_refused(x: float, dof: int) -> None:
    with pytest.raises(ValueError, match="chi-square"):
        chi_square_sf(x, dof)


def _exact_two_sided(k: int, n: int, p: Fraction) -> Fraction:
    pmf = [math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    return sum(
        (value for value in pmf if value <= pmf[k] * Fraction(10_000_001, 10_000_000)), Fraction(0)
    )


@given(
    st.integers(min_value=0, max_value=60).flatmap(
        lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
    ),
    st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(999, 1000), max_denominator=1000),
)
def test_the_binomial_test_is_the_exact_sum(case: tuple[int, int], p: Fraction) -> None:
    k, n = case
    exact = float(_exact_two_sided(k, n, p))
    assert binomial_two_sided(k, n, p) == pytest.approx(min(1.0, exact), rel=1e-6, abs=1e-12)


def test_binomial_known_values_and_edges() -> None:
    # R: binom.test(7, 10, 0.5)$p.value == 0.34375; binom.test(0, 10, 0.5) == 0.001953125
    assert binomial_two_sided(7, 10, 0.5) == pytest.approx(0.34375)
    assert binomial_two_sided(0, 10, 0.5) == pytest.approx(0.001953125)
    assert binomial_two_sided(0, 10, 0.0) == 1.0
    assert binomial_two_sided(1, 10, 0.0) == 0.0
    assert binomial_two_sided(10, 10, 1.0) == 1.0
    # A year of rounds does not underflow: 500,000 trials at the mean.
    assert binomial_two_sided(250_000, 500_000, 0.5) == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(ValueError, match="not a count"):
        binomial_two_sided(3, 2, 0.5)
    with pytest.raises(ValueError, match="probability"):
        binomial_two_sided(1, 2, 1.5)


def test_a_fair_sample_fits_and_a_skewed_one_does_not() -> None:
    probabilities = [Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)]
    fair = fit_outcomes([502, 331, 167], probabilities)
    assert fair.test == "chi-square" and fair.dof == 2 and fair.p_value > 0.5
    assert fair.statistic == pytest.approx(
        (502 - 500) ** 2 / 500
        + (331 - 1000 / 3) ** 2 / (1000 / 3)
        + (167 - 1000 / 6) ** 2 / (1000 / 6)
    )
    skewed = fit_outcomes([560, 300, 140], probabilities)
    assert skewed.test == "chi-square" and skewed.p_value < 0.001


def test_rare_outcomes_are_pooled_then_exact_when_too_few() -> None:
    # 1,000 trials: the two rare outcomes (expected 2 and 1) pool into one class of 3, which
    # is still too few: it joins the smallest big class (2 outcomes pooled).
    fit = fit_outcomes([600, 397, 2, 1], [0.6, 0.397, 0.002, 0.001])
    assert fit.test == "chi-square" and fit.pooled == 2 and fit.dof == 1
    # 8 trials: no outcome is expected 5 times, only all pooled: exact binomial, Bonferroni.
    small = fit_outcomes([8, 0, 0], [0.5, 0.3, 0.2])
    assert small.test == "exact binomial"
    assert small.p_value == pytest.approx(min(1.0, 3 * min(small.outcome_p)))
    assert small.outcome_p[0] == pytest.approx(binomial_two_sided(8, 8, 0.5))
    assert MIN_EXPECTED == 5.0


def test_an_impossible_outcome_fails_and_no_trial_is_none() -> None:
    assert fit_outcomes([10, 1], [1, 0]).p_value == 0.0
    none = fit_outcomes([0, 0], [0.5, 0.5])
    assert none.test == "none" and none.p_value == 1.0
    with pytest.raises(ValueError, match="counts for"):
        fit_outcomes([1], [0.5, 0.5])


def _full_sum(k: int, n: int, p: float) -> float:
    """Every count's probability, summed where no more likely than k's (the slow way)."""

    def log_pmf(j: int) -> float:
        return (
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * math.log(p)
            + (n - j) * math.log1p(-p)
        )

    threshold = log_pmf(k) + math.log1p(1e-7)
    return min(1.0, sum(math.exp(v) for v in map(log_pmf, range(n + 1)) if v <= threshold))


@given(
    st.integers(min_value=0, max_value=3000),
    st.floats(min_value=0.0005, max_value=0.9995),
)
def test_the_walk_from_the_mode_sums_what_every_count_sums(k: int, p: float) -> None:
    n = 3000
    expected = _full_sum(k, n, p)
    assert binomial_two_sided(k, n, p) == pytest.approx(expected, rel=1e-9, abs=1e-300)
