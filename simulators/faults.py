"""What goes wrong in the scanner simulator: the fault plan, and its seeded injection.

:class:`FaultPlan` (with :class:`CardFault`, one scripted fault) says what goes wrong and how
often; :class:`FaultInjector` draws it, from ``random.Random`` generators seeded by the plan,
for the two sides of the simulator: the line (what a transmission becomes: lost, garbage
before it, a flipped bit, late, twice) and the dealer (a scan that misreads, a card read
twice, the cable pulled or the heartbeats stopped as a card is dealt).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal, get_args

from drivers.codec import CardFrame, Frame, HeartbeatFrame, encode_raw, wrap
from simulators.errors import SimulatorConfigError

__all__ = [
    "FAULT_KINDS",
    "RATES",
    "TIMING",
    "CardFault",
    "FaultInjector",
    "FaultKind",
    "FaultPlan",
    "Outgoing",
    "SimulatorStats",
]

FaultKind = Literal[
    "misread", "corrupt", "garbage", "loss", "double_read", "delay", "unplug", "heartbeat_stop"
]
"""What a scripted fault does to its card (see :class:`CardFault`)."""

FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

RATES: tuple[str, ...] = (
    "misread_rate",
    "garbage_rate",
    "corrupt_rate",
    "duplicate_rate",
    "loss_rate",
    "double_read_rate",
)
"""The plan's chances (0-1)."""

TIMING: tuple[str, ...] = (
    "delay",
    "byte_by_byte",
    "unplug_every",
    "unplug_seconds",
    "heartbeat_stop_after",
    "heartbeat_stop_seconds",
)
"""The plan's other options (a scenario's ``[faults]`` table takes these and :data:`RATES`)."""


@dataclass(frozen=True, slots=True)
class CardFault:
    """One scripted fault at a given card (scenarios, ``simulators/scenarios/*.toml``).

    Attributes:
        at: Card index, 0-based, in the order cards are taken from the shoe or script.
        kind: ``misread`` (the scan gives ``times`` MISREADs first), ``corrupt`` (the
            card's first ``times`` transmissions have a flipped bit), ``garbage`` (a burst of
            garbage before each of its first ``times`` transmissions), ``loss`` (its first
            ``times`` transmissions never arrive), ``double_read`` (the card is read twice),
            ``delay`` (its frame leaves ``seconds`` late), ``unplug`` (the link goes away for
            ``seconds`` as the card is dealt), ``heartbeat_stop`` (heartbeats stop for
            ``seconds`` once the card is dealt).
        times: How many times, for the counted kinds.
        seconds: How long, for ``delay``, ``unplug`` and ``heartbeat_stop``.
    """

    at: int
    kind: FaultKind
    times: int = 1
    seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise SimulatorConfigError(
                "unknown fault kind", kind=self.kind, known=", ".join(FAULT_KINDS)
            )
        if self.at < 0 or self.times < 1 or not 0 <= self.seconds <= 3600:
            raise SimulatorConfigError(
                "a fault needs at >= 0, times >= 1 and 0 <= seconds <= 3600",
                at=self.at,
                times=self.times,
                seconds=self.seconds,
            )


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """What goes wrong, and how often. All draws come from ``random.Random`` seeded by ``seed``.

    Attributes:
        misread_rate: Chance that a scan gives a MISREAD instead of the CARD.
        misreads_at: Card index (0-based, in the order cards are taken from the shoe) → how
            many misreads that card gives before its good read. Applied before
            ``misread_rate``.
        garbage_rate: Chance that random garbage bytes go on the line before a frame.
        corrupt_rate: Chance that a transmitted frame has one bit flipped (its CRC fails).
        duplicate_rate: Chance that a sequenced frame is sent twice in a row (a repeat the
            host must drop).
        loss_rate: Chance that a transmission never arrives (the device retransmits
            sequenced frames; a lost heartbeat is just missing).
        double_read_rate: Chance that a card is read twice: a second CARD frame, new seq,
            same value, right after the first (a bounce, for the orchestrator to ignore).
        delay: Maximum extra latency in seconds, drawn per transmission (order is kept:
            a byte stream does not reorder).
        byte_by_byte: Write every byte on its own, one byte-time (115,200 baud) apart.
        unplug_every: Pull the cable as every N-th card is dealt (``None``: never).
        unplug_seconds: How long the cable stays out.
        heartbeat_stop_after: Heartbeats stop once this many cards were dealt (once).
        heartbeat_stop_seconds: How long they stay stopped.
        script: Faults at given cards (scenarios).
        seed: Seed of the fault generators.
    """

    misread_rate: float = 0.0
    misreads_at: dict[int, int] = field(default_factory=dict)
    garbage_rate: float = 0.0
    corrupt_rate: float = 0.0
    duplicate_rate: float = 0.0
    loss_rate: float = 0.0
    double_read_rate: float = 0.0
    delay: float = 0.0
    byte_by_byte: bool = False
    unplug_every: int | None = None
    unplug_seconds: float = 1.0
    heartbeat_stop_after: int | None = None
    heartbeat_stop_seconds: float = 10.0
    script: tuple[CardFault, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        self._check_rates()
        for index, count in self.misreads_at.items():
            if index < 0 or count < 0:
                raise SimulatorConfigError(
                    "misreads_at maps card index >= 0 to a count >= 0", index=index, count=count
                )
        self._check_timing()

    def _check_rates(self) -> None:
        for name in RATES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise SimulatorConfigError(f"{name} must be between 0 and 1", **{name: value})
        for name in ("misread_rate", "loss_rate"):
            if getattr(self, name) >= 1.0:
                raise SimulatorConfigError(
                    f"{name} must be below 1 or no card ever arrives", **{name: getattr(self, name)}
                )

    def _check_timing(self) -> None:
        for name in ("delay", "unplug_seconds", "heartbeat_stop_seconds"):
            value = getattr(self, name)
            if not 0.0 <= value <= 3600:
                raise SimulatorConfigError(f"{name} must be 0-3600 seconds", **{name: value})
        for name in ("unplug_every", "heartbeat_stop_after"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SimulatorConfigError(
                    f"{name} must be a number of cards >= 1", **{name: value}
                )

    @property
    def unplugs(self) -> bool:
        """Whether the plan ever pulls the cable (the pty is then served behind a link)."""
        return self.unplug_every is not None or any(f.kind == "unplug" for f in self.script)

    def at_card(self, index: int) -> list[CardFault]:
        """The scripted faults of one card."""
        return [fault for fault in self.script if fault.at == index]


@dataclass(slots=True)
class SimulatorStats:
    """What the simulator did (for tests and the CLI's summary).

    Attributes:
        frames_sent: Frames first transmitted (heartbeats included).
        retransmissions: Sequenced frames sent again for want of an ACK.
        gave_up: Sequence numbers abandoned after ``max_retransmits``.
        misreads_sent: MISREAD frames produced by scans.
        corrupted: Transmissions sent with a flipped bit.
        garbage_bursts: Garbage bursts put on the line.
        duplicates_sent: Frames deliberately sent twice.
        dropped_bytes: Bytes not written because the host was absent or not reading.
        acks: ACKs that released an outstanding frame.
        host_frames: Good host frames received.
        host_corrupt: Corrupt frames received from the host.
        host_gaps: Host frames the host sequence numbers say were lost.
        ignored: Commands that made no sense in the dealer's state (RESCAN with no card).
        lost: Transmissions deliberately not sent (``loss_rate``, scripted ``loss``).
        double_reads: Cards read twice on purpose.
        unplugs: Times the cable was pulled.
        heartbeat_stops: Times the heartbeat stopped.
    """

    frames_sent: int = 0
    retransmissions: int = 0
    gave_up: list[int] = field(default_factory=list)
    misreads_sent: int = 0
    corrupted: int = 0
    garbage_bursts: int = 0
    duplicates_sent: int = 0
    dropped_bytes: int = 0
    acks: int = 0
    host_frames: int = 0
    host_corrupt: int = 0
    host_gaps: int = 0
    ignored: int = 0
    lost: int = 0
    double_reads: int = 0
    unplugs: int = 0
    heartbeat_stops: int = 0


@dataclass(slots=True)
class Outgoing:
    """A frame waiting to be sent, with the scripted line faults that apply to it."""

    frame: Frame
    corrupt: int = 0
    garbage: int = 0
    lose: int = 0
    delay: float = 0.0


DealtFault = tuple[Literal["unplug", "heartbeat_stop"], float]
"""What happens as a card is dealt, and for how many seconds."""


class FaultInjector:
    """Draws the plan's faults, in a reproducible order (one generator per concern).

    Args:
        plan: What goes wrong.
        stats: The simulator's counters (the line faults are counted here).
    """

    def __init__(self, plan: FaultPlan, stats: SimulatorStats) -> None:
        self.plan = plan
        self.stats = stats
        self._line_rng = random.Random(f"{plan.seed}:line")
        self._scan_rng = random.Random(f"{plan.seed}:scan")
        self._link_rng = random.Random(f"{plan.seed}:link")
        self._misreads_left = dict(plan.misreads_at)
        for fault in plan.script:
            if fault.kind == "misread":
                self._misreads_left[fault.at] = self._misreads_left.get(fault.at, 0) + fault.times
        self._heartbeat_stopped = False

    # ------------------------------------------------------------------ the line

    def transmission(self, frame: Frame, out: Outgoing | None = None) -> list[tuple[bytes, float]]:
        """What one transmission of ``frame`` puts on the line: ``(bytes, delay)``, in order.

        Empty when the transmission is lost. ``out`` carries the scripted faults of the frame
        and is used up by them.
        """
        if self._lost(out):
            self.stats.lost += 1
            return []
        writes: list[tuple[bytes, float]] = []
        garbage = self._garbage(out)
        if garbage is not None:
            writes.append(self._timed(garbage))
            self.stats.garbage_bursts += 1
        raw = self._encoded(frame, out)
        delay = out.delay if out is not None else 0.0
        if out is not None:
            out.delay = 0.0  # a scripted delay applies to the first transmission only
        writes.append(self._timed(wrap(raw), delay))
        rate = self.plan.duplicate_rate
        sequenced = not isinstance(frame, HeartbeatFrame)
        if sequenced and rate and self._line_rng.random() < rate:
            writes.append(self._timed(wrap(encode_raw(frame))))
            self.stats.duplicates_sent += 1
        return writes

    def _lost(self, out: Outgoing | None) -> bool:
        if out is not None and out.lose > 0:
            out.lose -= 1
            return True
        rate = self.plan.loss_rate
        return bool(rate) and self._link_rng.random() < rate

    def _garbage(self, out: Outgoing | None) -> bytes | None:
        """A burst of garbage to send before the frame, if any."""
        rng = self._line_rng
        scripted = out is not None and out.garbage > 0
        if not scripted and not (self.plan.garbage_rate and rng.random() < self.plan.garbage_rate):
            return None
        if out is not None and scripted:
            out.garbage -= 1
        size = rng.randint(1, 24)
        return bytes(rng.randrange(256) for _ in range(size))

    def _encoded(self, frame: Frame, out: Outgoing | None) -> bytes:
        """The frame's raw bytes, with a bit flipped when it is to arrive corrupt."""
        rng = self._line_rng
        raw = bytearray(encode_raw(frame))
        scripted = out is not None and out.corrupt > 0
        if scripted or (self.plan.corrupt_rate and rng.random() < self.plan.corrupt_rate):
            if out is not None and scripted:
                out.corrupt -= 1
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            self.stats.corrupted += 1
        return bytes(raw)

    def _timed(self, data: bytes, delay: float = 0.0) -> tuple[bytes, float]:
        """``data`` with its delay, plus the plan's random latency."""
        if self.plan.delay:
            delay += self._line_rng.uniform(0.0, self.plan.delay)
        return data, delay

    # ------------------------------------------------------------------ the dealer

    def misreads(self, index: int) -> bool:
        """Whether this scan of card ``index`` gives a MISREAD."""
        left = self._misreads_left.get(index, 0)
        if left > 0:
            self._misreads_left[index] = left - 1
            return True
        rate = self.plan.misread_rate
        return bool(rate) and self._scan_rng.random() < rate

    def card(self, card: CardFrame, index: int) -> tuple[Outgoing, bool]:
        """A good read of card ``index``: its frame's scripted line faults, and a double read."""
        out = Outgoing(card)
        double = False
        for fault in self.plan.at_card(index):
            if fault.kind == "corrupt":
                out.corrupt += fault.times
            elif fault.kind == "garbage":
                out.garbage += fault.times
            elif fault.kind == "loss":
                out.lose += fault.times
            elif fault.kind == "delay":
                out.delay += fault.seconds
            elif fault.kind == "double_read":
                double = True
        rate = self.plan.double_read_rate
        if rate and self._scan_rng.random() < rate:
            double = True
        return out, double

    def as_dealt(self, index: int) -> list[DealtFault]:
        """What happens as card ``index`` is dealt (the cable pulled, heartbeats stopped)."""
        plan = self.plan
        happens: list[DealtFault] = [
            (fault.kind, fault.seconds)
            for fault in plan.at_card(index)
            if fault.kind in ("unplug", "heartbeat_stop")
        ]
        if plan.unplug_every is not None and (index + 1) % plan.unplug_every == 0:
            happens.append(("unplug", plan.unplug_seconds))
        if (
            plan.heartbeat_stop_after is not None
            and index + 1 == plan.heartbeat_stop_after
            and not self._heartbeat_stopped
        ):
            self._heartbeat_stopped = True
            happens.append(("heartbeat_stop", plan.heartbeat_stop_seconds))
        return happens
