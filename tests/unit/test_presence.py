"""The presence latch (drivers/presence.py): placements once, removals only after the time."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.presence import (
    FieldEmpty,
    Placed,
    PresenceLatch,
    PresenceTimes,
    Removed,
    TagSeen,
)

# Times in binary fractions, so that the sums below are exact.
REPEATING = PresenceTimes(place_after=0.25, remove_after=0.5)
ONCE = PresenceTimes(place_after=0.25, remove_after=0.5, repeats=False)


def run(
    latch: PresenceLatch, observations: Sequence[TagSeen | FieldEmpty], until: float
) -> list[Placed | Removed]:
    """Feed the observations, calling due() at every deadline in between, as a source does."""
    events: list[Placed | Removed] = []
    for obs in observations:
        deadline = latch.next_deadline()
        while deadline is not None and deadline < obs.at:
            events += latch.due(deadline)
            deadline = latch.next_deadline()
        events += latch.feed(obs)
    deadline = latch.next_deadline()
    while deadline is not None and deadline <= until:
        events += latch.due(deadline)
        deadline = latch.next_deadline()
    return events + latch.due(until)


def test_a_repeated_tag_is_placed_once_after_the_stable_time() -> None:
    latch = PresenceLatch(REPEATING)
    seen = [TagSeen("04A2", "1", 10.0 + 0.125 * i) for i in range(20)]
    events = run(latch, seen, until=12.375)
    assert events == [Placed("04A2", "1", 10.25)]
    assert latch.placed() == [("1", "04A2")]


def test_a_tag_that_stops_repeating_is_removed_after_the_removal_time() -> None:
    latch = PresenceLatch(REPEATING)
    seen = [TagSeen("04A2", "1", 10.0 + 0.125 * i) for i in range(5)]  # last at 10.5
    events = run(latch, seen, until=20.0)
    assert events == [Placed("04A2", "1", 10.25), Removed("04A2", "1", 11.0)]
    assert latch.placed() == []
    assert latch.next_deadline() is None


def test_a_drop_shorter_than_the_removal_time_is_no_removal_and_no_second_placement() -> None:
    latch = PresenceLatch(REPEATING)
    seen = [TagSeen("T", None, t) for t in (0.0, 0.125, 0.25, 0.375, 0.859375, 1.0)]  # 0.48 s
    events = run(latch, seen, until=1.375)
    assert events == [Placed("T", None, 0.25)]


def test_a_drop_of_exactly_the_removal_time_is_a_removal_and_the_return_a_new_placement() -> None:
    latch = PresenceLatch(REPEATING)
    seen = [TagSeen("T", None, t) for t in (0.0, 0.25, 0.75, 0.875, 1.0)]
    events = run(latch, seen, until=1.0)
    assert events == [
        Placed("T", None, 0.25),
        Removed("T", None, 0.75),
        Placed("T", None, 1.0),
    ]


def test_a_tag_seen_once_briefly_is_never_placed() -> None:
    latch = PresenceLatch(REPEATING)
    events = run(latch, [TagSeen("T", "2", 1.0)], until=5.0)
    assert events == []
    assert latch.next_deadline() is None


def test_place_after_zero_places_on_the_first_sighting() -> None:
    latch = PresenceLatch(PresenceTimes(0, 0.3))
    assert latch.feed(TagSeen("T", None, 1.0)) == [Placed("T", None, 1.0)]
    assert latch.feed(TagSeen("T", None, 1.1)) == []


def test_antennas_are_tracked_apart_and_two_tags_on_one_antenna_both_count() -> None:
    latch = PresenceLatch(PresenceTimes(0, 0.5))
    events = latch.feed(TagSeen("A", "seat-1", 0.0)) + latch.feed(TagSeen("B", "seat-1", 0.0))
    events += latch.feed(TagSeen("A", "seat-2", 0.1))  # moved to seat 2
    events += latch.feed(TagSeen("B", "seat-1", 0.4))
    events += latch.feed(TagSeen("A", "seat-2", 0.45))
    events += latch.due(0.6)
    assert events == [
        Placed("A", "seat-1", 0.0),
        Placed("B", "seat-1", 0.0),
        Placed("A", "seat-2", 0.1),
        Removed("A", "seat-1", 0.5),
    ]


def test_a_non_repeating_reader_places_on_time_and_removes_after_field_empty() -> None:
    latch = PresenceLatch(ONCE)
    assert latch.feed(TagSeen("T", None, 1.0)) == []
    assert latch.next_deadline() == 1.25
    assert latch.due(1.25) == [Placed("T", None, 1.25)]
    assert latch.due(100.0) == []  # no repeats needed: it stays
    assert latch.feed(FieldEmpty(None, 100.0)) == []
    assert latch.next_deadline() == 100.5
    assert latch.due(100.5) == [Removed("T", None, 100.5)]


def test_a_non_repeating_reader_card_back_within_the_removal_time_stays_placed() -> None:
    latch = PresenceLatch(ONCE)
    events = run(
        latch,
        [TagSeen("T", "1", 0.0), FieldEmpty("1", 1.0), TagSeen("T", "1", 1.375)],
        until=10.0,
    )
    assert events == [Placed("T", "1", 0.25)]


def test_a_non_repeating_reader_lifted_before_the_stable_time_is_never_placed() -> None:
    latch = PresenceLatch(ONCE)
    events = run(latch, [TagSeen("T", "1", 0.0), FieldEmpty("1", 0.1)], until=10.0)
    assert events == []
    assert latch.next_deadline() is None


def test_field_empty_of_another_antenna_changes_nothing() -> None:
    latch = PresenceLatch(ONCE)
    events = run(latch, [TagSeen("T", "1", 0.0), FieldEmpty("2", 0.5)], until=10.0)
    assert events == [Placed("T", "1", 0.25)]


def test_time_never_goes_back() -> None:
    latch = PresenceLatch(PresenceTimes(0, 0.5))
    latch.feed(TagSeen("T", None, 5.0))
    # An observation stamped earlier counts as of the latch's time: no removal from it.
    assert latch.feed(TagSeen("T", None, 4.0)) == []
    assert latch.due(5.4) == []
    assert latch.due(5.5) == [Removed("T", None, 5.5)]


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_times_are_finite_and_not_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="place_after"):
        PresenceTimes(bad, 0.5)
    with pytest.raises(ValueError, match="remove_after"):
        PresenceTimes(0.1, bad)


def test_times_from_milliseconds() -> None:
    assert PresenceTimes.from_ms(150, 600, repeats=False) == PresenceTimes(0.15, 0.6, False)


# ---------------------------------------------------------------------- properties

_times = st.builds(
    PresenceTimes,
    place_after=st.floats(0, 1, allow_nan=False),
    remove_after=st.floats(0.01, 2, allow_nan=False),
    repeats=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(
    times=_times,
    start=st.floats(0, 1000, allow_nan=False),
    gaps=st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=60),
)
def test_repeats_with_gaps_shorter_than_the_removal_time_place_once_and_never_remove(
    times: PresenceTimes, start: float, gaps: list[float]
) -> None:
    """However the repeats come, while no gap reaches remove_after: one placement at most."""
    latch = PresenceLatch(times)
    at = start
    observations: list[TagSeen | FieldEmpty] = [TagSeen("T", "1", at)]
    for gap in gaps:
        at += min(gap, times.remove_after * 0.99)
        observations.append(TagSeen("T", "1", at))
    events = run(latch, observations, until=at)
    assert all(isinstance(event, Placed) for event in events)
    assert len(events) <= 1
    if at - start >= times.place_after:
        assert len(events) == 1


@settings(max_examples=300, deadline=None)
@given(
    times=_times,
    drops=st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=10),
    empties=st.booleans(),
)
def test_a_drop_shorter_than_remove_after_is_never_a_removal(
    times: PresenceTimes, drops: list[float], empties: bool
) -> None:
    """A placed card that leaves (the field even saying empty) and is back in time stays."""
    latch = PresenceLatch(times)
    at = 0.0
    observations: list[TagSeen | FieldEmpty] = [TagSeen("T", None, at)]
    while at < times.place_after:  # repeats closer than remove_after until it is placed
        at = min(at + times.remove_after * 0.5, times.place_after)
        observations.append(TagSeen("T", None, at))
    for drop in drops:
        away = min(drop, times.remove_after * 0.99)
        if empties or not times.repeats:
            observations.append(FieldEmpty(None, at))
        at += away
        observations.append(TagSeen("T", None, at))
    events = run(latch, observations, until=at)
    assert [type(event) for event in events] == [Placed]


@settings(max_examples=300, deadline=None)
@given(
    times=_times,
    steps=st.lists(
        st.tuples(
            st.floats(0, 1.5, allow_nan=False),
            st.sampled_from(["A", "B", None]),
            st.sampled_from(["1", "2", None]),
        ),
        max_size=60,
    ),
)
def test_any_observations_alternate_placed_and_removed_per_tag_in_time_order(
    times: PresenceTimes, steps: list[tuple[float, str | None, str | None]]
) -> None:
    """Per tag and antenna: Placed, Removed, Placed...; never two in a row; times ordered."""
    latch = PresenceLatch(times)
    at = 0.0
    observations: list[TagSeen | FieldEmpty] = []
    for gap, uid, antenna in steps:
        at += gap
        observations.append(FieldEmpty(antenna, at) if uid is None else TagSeen(uid, antenna, at))
    events = run(latch, observations, until=at + 10)
    assert [event.at for event in events] == sorted(event.at for event in events)
    state: dict[tuple[str | None, str], bool] = {}
    for event in events:
        key = (event.antenna, event.uid)
        placed = state.get(key, False)
        assert isinstance(event, Removed) == placed, (event, state)
        state[key] = not placed
    if times.repeats:  # ten seconds after the last repeat, nothing is left placed
        assert not any(state.values())
        assert latch.placed() == []
    else:  # a tag stays until its antenna is reported empty
        assert {key for key, placed in state.items() if placed} == set(latch.placed())


def test_the_time_a_reader_was_away_is_no_absence() -> None:
    latch = PresenceLatch(PresenceTimes(0, 0.5))
    assert latch.feed(TagSeen("T", "1", 1.0)) == [Placed("T", "1", 1.0)]
    latch.resumed(30.0)  # reconnected after 29 s of silence
    assert latch.feed(TagSeen("T", "1", 30.25)) == []  # still there: no removal, no placing
    assert latch.due(30.5) == []
    assert latch.due(30.75) == [Removed("T", "1", 30.75)]
