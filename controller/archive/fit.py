"""Goodness of fit: observed outcome counts against a par sheet's probabilities.

Pure functions (no I/O), used by ``tablectl archive report`` (:mod:`controller.archive.drift`)
and the pit console's "today" section. scipy is not a dependency of the project, so the two
tests are written out here, each against closed forms in ``tests/unit/test_archive_fit.py``:

* :func:`chi_square_sf`: the upper tail of the chi-square distribution, ``Q(k/2, x/2)``, the
  regularised upper incomplete gamma function, by its series below ``a + 1`` and Lentz's
  continued fraction above (Numerical Recipes, 6.2); for even ``k`` it equals the closed form
  ``exp(-x/2) * sum_{i<k/2} (x/2)^i / i!``, for ``k = 1`` ``erfc(sqrt(x/2))``.
* :func:`binomial_two_sided`: the exact two-sided binomial test (the sum of the probabilities
  of every count no more likely than the one observed, as R's ``binom.test`` does), the
  probabilities computed in log space so that a year of rounds does not underflow, each tail
  summed from the mode outwards until its terms no longer count (0.5 ms at 50,000 rounds).

:func:`fit_outcomes` chooses: Pearson's chi-square over the outcomes when every expected count
is at least :data:`MIN_EXPECTED` (outcomes expected fewer times are pooled into one class
first), otherwise, when the pooling leaves fewer than two classes, the exact binomial test of
each outcome with Bonferroni's correction (the smallest p-value times the number of outcomes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

MIN_EXPECTED = 5.0
"""The smallest expected count an outcome needs to enter the chi-square on its own."""

_EPS = 1e-15
_TINY = 1e-300
_MAX_STEPS = 10_000


def chi_square_sf(statistic: float, dof: int) -> float:
    """P(X >= ``statistic``) for X chi-square distributed with ``dof`` degrees of freedom.

    Raises:
        ValueError: ``dof`` below 1, or a negative or non-finite ``statistic``.
    """
    if dof < 1:
        raise ValueError(f"a chi-square needs at least 1 degree of freedom, not {dof}")
    if not math.isfinite(statistic) or statistic < 0:
        raise ValueError(f"a chi-square statistic is finite and not negative, not {statistic}")
    return _gamma_q(dof / 2, statistic / 2)


def _gamma_q(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x)."""
    if x == 0:
        return 1.0
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:  # the series for P(a, x); Q = 1 - P
        term = total = 1.0 / a
        denominator = a
        for _ in range(_MAX_STEPS):
            denominator += 1
            term *= x / denominator
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    # Lentz's continued fraction for Q(a, x).
    b = x + 1 - a
    c = 1 / _TINY
    d = 1 / b
    h = d
    for step in range(1, _MAX_STEPS):
        an = -step * (step - a)
        b += 2
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < _EPS:
            break
    return min(1.0, math.exp(log_prefix) * h)


def binomial_two_sided(successes: int, trials: int, probability: float | Fraction) -> float:
    """The exact two-sided binomial test's p-value of ``successes`` in ``trials``.

    The sum of P(K = j) over every j with P(K = j) <= P(K = successes) (a relative margin of
    1e-7 for rounding, as R's ``binom.test``).

    Raises:
        ValueError: Counts out of range, or a probability outside [0, 1].
    """
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes in {trials} trials is not a count")
    p = float(probability)
    if not 0 <= p <= 1:
        raise ValueError(f"a probability is in [0, 1], not {probability}")
    if p in (0.0, 1.0):
        expected = 0 if p == 0 else trials
        return 1.0 if successes == expected else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    log_choose_n = math.lgamma(trials + 1)

    def log_pmf(j: int) -> float:
        return (
            log_choose_n
            - math.lgamma(j + 1)
            - math.lgamma(trials - j + 1)
            + j * log_p
            + (trials - j) * log_q
        )

    threshold = log_pmf(successes) + math.log1p(1e-7)
    # The pmf rises to the mode and falls after it: the counts no more likely than the one
    # observed are the two tails. Each tail is walked outwards from the mode (the counts
    # more likely than the one observed skipped), and left once its terms no longer add to
    # the sum: a few standard deviations, not every count of a year of rounds.
    mode = min(trials, math.floor((trials + 1) * p))
    total = 0.0
    for side in (range(mode, -1, -1), range(mode + 1, trials + 1)):
        for j in side:
            value = log_pmf(j)
            if value > threshold:
                continue
            term = math.exp(value)
            total += term
            if term <= total * 1e-17:
                break
    return min(1.0, total)


@dataclass(frozen=True, slots=True)
class Fit:
    """What :func:`fit_outcomes` found.

    Attributes:
        test: ``"chi-square"`` or ``"exact binomial"`` (``"none"``: no trial, or no outcome).
        p_value: The probability of outcomes at least this far from the par sheet by chance
            (1.0 for ``"none"``).
        statistic: Pearson's statistic (chi-square only).
        dof: Its degrees of freedom (chi-square only).
        pooled: Outcomes pooled (together, or into the class expected least) because each
            was expected fewer than :data:`MIN_EXPECTED` times (chi-square only).
        outcome_p: Each outcome's exact two-sided binomial p-value, in the outcomes' order.
    """

    test: str
    p_value: float
    statistic: float | None
    dof: int | None
    pooled: int
    outcome_p: tuple[float, ...]


def fit_outcomes(observed: Sequence[int], probabilities: Sequence[float | Fraction]) -> Fit:
    """Test observed outcome counts against their probabilities (which sum to 1).

    Args:
        observed: How many times each outcome happened.
        probabilities: Each outcome's probability, in the same order.

    Raises:
        ValueError: The two differ in length, a count is negative, or a probability is
            outside [0, 1].
    """
    if len(observed) != len(probabilities):
        raise ValueError(f"{len(observed)} counts for {len(probabilities)} probabilities")
    if any(count < 0 for count in observed):
        raise ValueError(f"a count is not negative: {list(observed)}")
    trials = sum(observed)
    outcome_p = tuple(
        binomial_two_sided(count, trials, p)
        for count, p in zip(observed, probabilities, strict=True)
    )
    if trials == 0 or not observed:
        return Fit("none", 1.0, None, None, 0, outcome_p)
    if any(count and not float(p) for count, p in zip(observed, probabilities, strict=True)):
        return Fit("exact binomial", 0.0, None, None, 0, outcome_p)  # an impossible outcome
    classes, pooled = _classes(observed, [trials * float(p) for p in probabilities])
    if len(classes) >= 2:
        statistic = sum((count - mean) ** 2 / mean for count, mean in classes)
        dof = len(classes) - 1
        return Fit("chi-square", chi_square_sf(statistic, dof), statistic, dof, pooled, outcome_p)
    corrected = min(1.0, min(outcome_p) * len(outcome_p))
    return Fit("exact binomial", corrected, None, None, 0, outcome_p)


def _classes(
    observed: Sequence[int], expected: Sequence[float]
) -> tuple[list[tuple[int, float]], int]:
    """The chi-square's classes ``(observed, expected)``, and how many outcomes were pooled.

    Outcomes expected at least :data:`MIN_EXPECTED` times are classes of their own; the others
    are pooled into one class, or, when even pooled they are expected fewer times, into the
    class expected least. Outcomes of probability 0 (never observed here) are left out.
    """
    classes = [(observed[i], e) for i, e in enumerate(expected) if e >= MIN_EXPECTED]
    small = [i for i, e in enumerate(expected) if 0 < e < MIN_EXPECTED]
    if not small:
        return classes, 0
    rest = (sum(observed[i] for i in small), sum(expected[i] for i in small))
    if rest[1] >= MIN_EXPECTED:
        return [*classes, rest], len(small)
    if not classes:
        return [], 0
    smallest = min(range(len(classes)), key=lambda k: classes[k][1])
    count, mean = classes[smallest]
    classes[smallest] = (count + rest[0], mean + rest[1])
    return classes, len(small)
