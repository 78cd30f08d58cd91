"""The slot's waiting state (controller/orchestration/slot_wait.py): its named transitions."""

from __future__ import annotations

from controller.orchestration.slot_wait import SlotWait, WaitState


def state(wait: SlotWait) -> WaitState:
    """The state now (a call, so mypy does not narrow it across transitions)."""
    return wait.state


def test_device_away_halts_only_a_running_slot_after_the_delay() -> None:
    wait = SlotWait()
    assert wait.halt_in(100.0, 30.0) is None
    wait.device_lost(100.0)
    wait.device_lost(105.0)  # the first report counts
    assert wait.halt_in(110.0, 30.0) == 20.0
    wait.halt()
    assert wait.halted
    assert wait.halt_in(200.0, 30.0) is None


def test_device_back_says_whether_it_had_been_lost() -> None:
    wait = SlotWait()
    assert wait.device_back() is False
    wait.device_lost(1.0)
    assert wait.device_back() is True
    assert wait.device_lost_at is None


def test_resume_cues_again_or_asks_for_the_held_card() -> None:
    wait = SlotWait()
    wait.device_lost(1.0)
    wait.halt()
    wait.resume()
    assert state(wait) is WaitState.RESUMED
    assert wait.device_lost_at is None
    assert wait.cue_again() is False
    assert state(wait) is WaitState.CUED

    wait.halt()
    wait.hold_card()
    assert wait.halted
    wait.resume()
    assert wait.resumed
    assert not wait.halted
    assert wait.cue_again() is True
    assert state(wait) is WaitState.CUED


def test_a_recovered_round_starts_as_the_journal_says() -> None:
    wait = SlotWait()
    wait.start(halted=True)
    assert state(wait) is WaitState.HALTED
    wait.device_lost(5.0)
    wait.start(halted=False)
    assert state(wait) is WaitState.CUED
    assert wait.device_lost_at == 5.0  # the device's absence outlives a round
