"""Words for people on the command line's screens (pure).

One word for one thing (issue 25): what a bet returns is said the same way wherever a
settlement is shown (``run --show``, ``watch``, ``recall``): "returns 1.95 per 1 staked"
(stake included, as the feed's ``payout`` counts it), while a par sheet
(``tablectl analyze``) says "pays 0.95 to 1" (profit, the way a pay table is quoted;
:func:`controller.analysis.payout_words`). Reasons travel as codes in JSON
(``high_card``, ``no_bonus``) and are shown as prose ("high card", "no bonus").
"""

from __future__ import annotations

from typing import Any


def returns_words(payout: Any) -> str:
    """A settled bet's ``payout`` (returned per unit staked, stake included) in words.

    ``"1.95"`` -> ``"returns 1.95 per 1 staked"``; ``"0"`` -> ``"returns nothing"``;
    anything that is not a plain decimal is shown as it is, after ``returns``.
    """
    text = str(payout) if payout is not None else "?"
    if text in ("0", "0.0"):
        return "returns nothing"
    return f"returns {text} per 1 staked"


def reason_words(reason: Any) -> str:
    """A reason as prose: a code (``"no_bonus"``) with spaces, prose left as it is."""
    text = str(reason)
    if text and " " not in text and "_" in text:
        return text.replace("_", " ")
    return text


def settled_reason(settled: Any) -> str:
    """A settled line's reason for people, or ``""`` when it only repeats the outcome."""
    if not hasattr(settled, "get"):
        return ""
    reason = settled.get("reason")
    if not reason or reason == settled.get("outcome"):
        return ""
    return reason_words(reason)


__all__ = ["reason_words", "returns_words", "settled_reason"]
