"""Exact money: payout ratios as fractions, bet results, and decimal strings for the wire.

Payout ratios are written the casino way, ``"profit:stake"`` (``"0.95:1"``, ``"3:2"``,
``"50:1"``), and held as :class:`fractions.Fraction` of profit per unit staked. Binary floats
never touch money. Amounts leave the process as decimal strings, which must be exact: a ratio
whose decimal expansion does not terminate (``"1:3"``) is refused when a pay table is read.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from controller.errors import PayTableError

Odds = Fraction
"""Profit per unit staked: 0.95:1 is ``Fraction(19, 20)``; 3:2 is ``Fraction(3, 2)``."""


def _terminates(value: Fraction) -> bool:
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return denominator == 1


def to_decimal_str(value: Fraction | int) -> str:
    """The exact decimal notation of a fraction (``Fraction(39, 20)`` -> ``"1.95"``).

    Raises:
        PayTableError: The fraction has no finite decimal expansion.
    """
    fraction = Fraction(value)
    if not _terminates(fraction):
        raise PayTableError(f"{fraction} has no exact decimal form", value=str(fraction))
    exact = Decimal(fraction.numerator) / Decimal(fraction.denominator)
    # Decimal division is exact here: the quotient terminates and fits the default precision
    # for any ratio a pay table can hold.
    text = format(exact.normalize(), "f")
    return text


def parse_odds(text: str | int | Fraction) -> Odds:
    """Read a payout ratio: ``"0.95:1"``, ``"3:2"``, ``"50:1"``, ``"50"`` (= 50:1), or a number.

    Raises:
        PayTableError: Not a ratio, negative, or without an exact decimal form.
    """
    if isinstance(text, Fraction):
        odds = text
    elif isinstance(text, int):
        odds = Fraction(text)
    else:
        raw = text.strip()
        left, sep, right = raw.partition(":")
        try:
            profit = Fraction(Decimal(left.strip()))
            stake = Fraction(Decimal(right.strip())) if sep else Fraction(1)
        except (ArithmeticError, ValueError) as exc:
            raise PayTableError(
                f"payout {text!r} is not a ratio like 0.95:1 or 3:2", value=text
            ) from exc
        if stake <= 0:
            raise PayTableError(
                f"payout {text!r} has a stake side that is not positive", value=text
            )
        odds = profit / stake
    if odds < 0:
        raise PayTableError(f"payout {text!r} is negative", value=str(text))
    if not _terminates(odds):
        raise PayTableError(f"payout {text!r} has no exact decimal form", value=str(text))
    return odds


def format_odds(odds: Odds) -> str:
    """A ratio the way a pay table writes it: ``"0.95:1"``, ``"3:2"``, ``"50:1"``."""
    if odds.denominator == 1 or odds.denominator > 4:
        return f"{to_decimal_str(odds)}:1"
    return f"{odds.numerator}:{odds.denominator}"


class BetOutcome(enum.StrEnum):
    """How one bet ends."""

    WIN = "win"
    LOSE = "lose"
    PUSH = "push"
    """The stake is returned because the game says it is a standoff (e.g. a tie)."""
    REFUND = "refund"
    """The stake is returned because the round, or this bet, did not take place (void)."""


@dataclass(frozen=True, slots=True)
class BetResult:
    """The settlement of one bet type for one round.

    Attributes:
        outcome: Win, lose, push or refund.
        odds: Profit per unit staked when the bet wins (0 otherwise).
        reason: The outcome name of the pay table that applied (``"trail"``, ``"tie"``...).
    """

    outcome: BetOutcome
    odds: Odds = Fraction(0)
    reason: str = ""

    @property
    def payout(self) -> Fraction:
        """What is returned per unit staked, the stake included (1.95 for a 0.95:1 win)."""
        if self.outcome is BetOutcome.WIN:
            return 1 + self.odds
        if self.outcome in (BetOutcome.PUSH, BetOutcome.REFUND):
            return Fraction(1)
        return Fraction(0)

    @property
    def net(self) -> Fraction:
        """Profit (or loss, negative) per unit staked."""
        return self.payout - 1

    def returns(self, stake: Decimal | Fraction | int) -> Fraction:
        """What a given stake gets back, the stake included."""
        return Fraction(stake) * self.payout

    def to_wire(self) -> dict[str, str]:
        """The JSON form for results messages: outcome, payout per unit (stake included)."""
        data = {"outcome": self.outcome.value, "payout": to_decimal_str(self.payout)}
        if self.reason:
            data["reason"] = self.reason
        return data

    @classmethod
    def win(cls, odds: Odds, reason: str = "") -> BetResult:
        """A winning bet at ``odds``."""
        return cls(BetOutcome.WIN, odds, reason)

    @classmethod
    def lose(cls, reason: str = "") -> BetResult:
        """A lost bet."""
        return cls(BetOutcome.LOSE, Fraction(0), reason)

    @classmethod
    def push(cls, reason: str = "") -> BetResult:
        """A standoff: the stake comes back."""
        return cls(BetOutcome.PUSH, Fraction(0), reason)

    @classmethod
    def refund(cls, reason: str = "") -> BetResult:
        """A void: the stake comes back."""
        return cls(BetOutcome.REFUND, Fraction(0), reason)


PayTable = Mapping[str, Odds]
"""One bet type's pay table: outcome name -> profit per unit staked."""

PayTables = Mapping[str, PayTable]
"""A game's pay tables: bet id -> its pay table."""


def merge_paytables(
    defaults: PayTables, overrides: Mapping[str, Mapping[str, str | int | Fraction]]
) -> dict[str, dict[str, Odds]]:
    """Apply a table config's overrides to a game's default pay tables.

    Only known bets and known outcomes may be overridden: a typo must not silently leave the
    default in place.

    Raises:
        PayTableError: Unknown bet or outcome, or a ratio that cannot be read.
    """
    merged = {bet: dict(table) for bet, table in defaults.items()}
    for bet, table in overrides.items():
        if bet not in merged:
            raise PayTableError(
                f"unknown bet {bet!r}; this game's bets are {sorted(merged)}", bet=bet
            )
        for outcome, ratio in table.items():
            if outcome not in merged[bet]:
                raise PayTableError(
                    f"bet {bet!r} has no outcome {outcome!r}; known: {sorted(merged[bet])}",
                    bet=bet,
                    outcome=outcome,
                )
            merged[bet][outcome] = parse_odds(ratio)
    return merged
