"""``betting_opened`` (issue 12, item 11): the round's opening in the fold and the verifier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.journal import (
    BettingClosedData,
    BettingOpenedData,
    Journal,
    RoundOpenedData,
)
from controller.journal.fold import RoundFold

OPENED: dict[str, Any] = {
    "round_id": "r-1",
    "round_no": 1,
    "game": "mahjong-pai-gow",
    "betting_seconds": 15.0,
}
CLOSES = "2026-01-01T00:00:40.000000Z"


def test_the_fold_has_an_opening_state_before_betting_opens() -> None:
    fold = RoundFold(round_id="r-1").apply(
        "round_opened", {**OPENED, "betting_closes_at": None, "before_betting": True}
    )
    assert (fold.state, fold.betting_closes_at) == ("opening", None)
    fold = fold.apply("betting_opened", {"betting_seconds": 15.0, "betting_closes_at": CLOSES})
    assert (fold.state, fold.betting_closes_at) == ("betting_open", CLOSES)
    assert fold.check("betting_opened", {}) == ["betting opened outside the round's opening"]
    fold = fold.apply("betting_closed", {})
    assert (fold.state, fold.betting_closes_at) == ("dealing", None)


def test_a_round_without_an_opening_is_betting_open_from_round_opened() -> None:
    fold = RoundFold(round_id="r-1").apply("round_opened", {**OPENED, "betting_closes_at": CLOSES})
    assert (fold.state, fold.betting_closes_at) == ("betting_open", CLOSES)


def test_the_verifier_refuses_betting_opened_outside_an_opening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        journal.record(
            RoundOpenedData.model_construct(**OPENED, betting_closes_at=CLOSES), round_id="r-1"
        )
        journal.record(
            BettingOpenedData.model_construct(betting_seconds=15.0, betting_closes_at=CLOSES),
            round_id="r-1",
        )
        journal.record(BettingClosedData.model_construct(), round_id="r-1")
    with Journal.open_readonly(path) as journal:
        report = journal.verify()
    assert [p.what for p in report.problems] == ["betting opened outside the round's opening"]


def test_the_verifier_takes_betting_opened_in_an_opening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        journal.record(
            RoundOpenedData.model_construct(**OPENED, betting_closes_at=None, before_betting=True),
            round_id="r-1",
        )
        journal.record(
            BettingOpenedData.model_construct(betting_seconds=15.0, betting_closes_at=CLOSES),
            round_id="r-1",
        )
        journal.record(BettingClosedData.model_construct(), round_id="r-1")
    with Journal.open_readonly(path) as journal:
        assert journal.verify().ok


def test_watch_shows_the_opening_the_banker_and_the_betting_window() -> None:
    from controller.watch import describe

    topic = "tables/t1/events"

    def line(kind: str, data: dict[str, object]) -> str | None:
        envelope = {"kind": kind, "round": "t1-000001", "seq": 1, "data": data}
        return describe(topic, envelope)

    opened = line("round_opened", {**OPENED, "betting_closes_at": None, "before_betting": True})
    assert opened is not None
    assert (
        "round 1 (t1-000001, mahjong-pai-gow): opened; betting (15.0 s) opens after the bank offers"
        in (opened)
    )
    offers = [{"position": "P1", "choice": "decline"}, {"position": "P2", "choice": "accept"}]
    bank = line(
        "table_info",
        {"kind": "bank", "data": {"banker": "P2", "offers": offers}, "secure": False},
    )
    assert bank is not None and bank.endswith("P2 banks (declined: P1)")
    betting = line("betting_opened", {"betting_seconds": 15.0, "betting_closes_at": CLOSES})
    assert betting is not None
    assert f"round 1 (t1-000001): betting open for 15.0 s, closes {CLOSES}" in betting
