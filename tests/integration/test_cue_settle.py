"""The orchestrator lets the outbox settle before it cues each slot (``settle_seconds``).

An :class:`~controller.orchestrator.Orchestrator` built directly (no ``run_table``), fed by the
scanner simulator on a real pty through the supervised serial driver, journalling to a real
SQLite file. ``outbox_idle`` is a probe that records each call; the last test plugs in a real
:class:`~controller.publisher.Publisher`'s ``wait_idle`` against a real Mosquitto.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controller.games.registry import make_live_game
from controller.journal import Journal
from controller.mqtt.settings import MqttSettings
from controller.orchestrator import Orchestrator, RoundSummary
from controller.round import Phase
from controller.settings import RoundSettings
from drivers.codec import ExpectFrame
from drivers.source import DriverSettings
from drivers.supervisor import SupervisedCardSource
from simulators.decks import deck_for_game
from simulators.scanner import ScannerSimulator

pytestmark = pytest.mark.hil

GAME = "teen-patti-20-20"
SCRIPT = ("As", "Kd", "Ah", "Kc", "Ad", "Kh")
SLOTS = 6


@dataclass
class IdleProbe:
    """An ``outbox_idle`` that records each call: its timeout, and the table at that moment.

    Attributes:
        journal: The table's journal (to count the cards dealt).
        sim: The scanner simulator (to count the cues it received).
        idle: What it answers; ``False`` means it waits out the full timeout first, like an
            outbox whose broker never acknowledges.
        calls: ``(timeout, cards dealt, cues received)`` when each call started.
        returned: ``(cards dealt, cues received)`` when each call returned.
    """

    journal: Journal
    sim: ScannerSimulator
    idle: bool
    calls: list[tuple[float, int, int]] = field(default_factory=list)
    returned: list[tuple[int, int]] = field(default_factory=list)

    def _table(self) -> tuple[int, int]:
        dealt = sum(1 for entry in self.journal.entries() if entry.kind == "card_dealt")
        cues = sum(1 for frame in self.sim.host_commands() if isinstance(frame, ExpectFrame))
        return dealt, cues

    async def __call__(self, timeout: float) -> bool:  # noqa: ASYNC109
        self.calls.append((timeout, *self._table()))
        if self.idle:
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(timeout)  # never idle: the whole timeout goes by
        self.returned.append(self._table())
        return self.idle


@asynccontextmanager
async def scanner() -> AsyncIterator[tuple[ScannerSimulator, SupervisedCardSource]]:
    """The simulator dealing :data:`SCRIPT` on a pty, and the supervised source reading it."""
    sim = ScannerSimulator(deck=deck_for_game(GAME), cards=list(SCRIPT), deal_delay=0.0)
    async with sim.serve_pty() as path:
        source = SupervisedCardSource(f"serial://{path}", DriverSettings())
        await source.open()
        try:
            yield sim, source
        finally:
            await source.close()


def orchestrator_for(
    journal: Journal,
    source: SupervisedCardSource,
    outbox_idle: Any,
    between_cards: Any = None,
    **rounds: Any,
) -> Orchestrator:
    return Orchestrator(
        table_id="cue-1",
        game=make_live_game(GAME, {}, {}),
        source=source,
        journal=journal,
        settings=RoundSettings(
            betting_seconds=0.05, pause_seconds=0, wait_for_broker=False, **rounds
        ),
        outbox_idle=outbox_idle,
        between_cards=between_cards,
    )


def assert_settled_as_scripted(summaries: list[RoundSummary]) -> None:
    (summary,) = summaries
    assert summary.phase is Phase.SETTLED
    assert summary.result is not None
    assert summary.result["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}


@pytest.mark.parametrize("idle", [True, False], ids=["idle", "never-idle"])
async def test_outbox_idle_is_awaited_before_each_cue_and_after_each_card(
    tmp_path: Path, idle: bool
) -> None:
    with Journal.open(tmp_path / "j.sqlite") as journal:
        async with asyncio.timeout(30), scanner() as (sim, source):
            probe = IdleProbe(journal, sim, idle=idle)
            between: list[int] = []

            def between_cards() -> None:  # after each wait, before the next cue or card
                between.append(len(probe.calls))

            orchestrator = orchestrator_for(
                journal, source, probe, between_cards, settle_seconds=0.05
            )
            summaries = await orchestrator.run(rounds=1)
        assert_settled_as_scripted(summaries)
        # With the configured timeout, before each slot's cue went out (k cards dealt, k
        # cues sent) and after each card was accepted (k + 1 dealt, k + 1 cues sent).
        expected = [state for k in range(SLOTS) for state in ((0.05, k, k), (0.05, k + 1, k + 1))]
        assert probe.calls == expected
        assert probe.returned == [(dealt, cues) for _timeout, dealt, cues in expected]
        assert between == list(range(1, 2 * SLOTS + 1))  # right after each wait
        cues = [f.slot_name for f in sim.host_commands() if isinstance(f, ExpectFrame)]
        assert cues == ["A1", "B1", "A2", "B2", "A3", "B3"]


async def test_cue_settle_zero_never_asks_the_outbox(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.sqlite") as journal:
        async with asyncio.timeout(30), scanner() as (sim, source):
            probe = IdleProbe(journal, sim, idle=True)
            orchestrator = orchestrator_for(journal, source, probe, settle_seconds=0)
            summaries = await orchestrator.run(rounds=1)
        assert_settled_as_scripted(summaries)
        assert probe.calls == []
        assert probe.returned == []


def test_settle_seconds_setting() -> None:
    assert RoundSettings().settle_seconds == 0.05
    assert RoundSettings(settle_seconds=0).settle_seconds == 0
    for bad in (-0.01, 5.01):
        with pytest.raises(ValueError, match="settle_seconds"):
            RoundSettings(settle_seconds=bad)


async def test_each_slot_is_cued_with_the_real_outbox_idle(
    mosquitto_session, journal, make_publisher
):
    """``Publisher.wait_idle`` as ``outbox_idle``: every cue, and what follows every card,
    finds everything acknowledged."""
    broker = mosquitto_session
    table = f"cue-{uuid.uuid4().hex[:6]}"
    settings = MqttSettings(urls=[broker.url], protocol="5", publish_timeout=2.0)
    answers: list[tuple[bool, int]] = []
    async with (
        asyncio.timeout(30),
        make_publisher(settings, table, journal, game=GAME, connect_within=5) as publisher,
    ):

        async def outbox_idle(timeout: float) -> bool:  # noqa: ASYNC109
            idle: bool = await publisher.wait_idle(timeout)
            answers.append((idle, journal.undelivered_count()))
            return idle

        journal.append("table_status", {"state": "ready", "detail": ""})
        assert await publisher.flush(5)  # the outbox is up
        async with scanner() as (_sim, source):
            orchestrator = orchestrator_for(journal, source, outbox_idle, settle_seconds=3)
            summaries = await orchestrator.run(rounds=1)
        assert await publisher.flush(5)
    assert_settled_as_scripted(summaries)
    assert answers == [(True, 0)] * (2 * SLOTS)  # before each cue, after each card
    assert journal.undelivered() == []
