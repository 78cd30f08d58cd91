"""Delivery: journal entries to the broker in ``seq`` order, pipelined, at least once.

Entries are handed to the client without waiting for the previous entry's PUBACK, at most
``mqtt.window`` in flight, each within ``mqtt.publish_timeout``; they are settled, and marked
delivered, in ``seq`` order as the PUBACKs come (:meth:`Delivery._settle`). While the outbox is
caught up, the journal's listener hands a new entry to the client inside the journal's append
(:meth:`Delivery._take`: the card's hot path, ``docs/architecture.md``); a backlog, a full
window, a reconnect or an entry journalled from another thread goes through
:meth:`Delivery.serve`, which reads the journal from its cursor. The retained round snapshot
follows once per burst (:meth:`Delivery._publish_snapshot`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controller.errors import JournalError
from controller.journal import Journal, JournalEntry
from controller.messages import Outbound, Topics, messages_for, round_snapshot_message
from controller.mqtt.ack import PublishRefused
from controller.mqtt.settings import MqttSettings
from controller.outbox.sending import Sender
from controller.outbox.snapshots import SnapshotFolder

if TYPE_CHECKING:
    from controller.mqtt.adapter import ReasonCode
    from controller.mqtt.client import Client as MqttClient
    from controller.signing import Signer

MARK_BATCH = 1000
"""Delivery marks are written at the latest once this many are noted (a long backlog)."""


@dataclass(slots=True)
class _Sent:
    """One entry handed to paho: the PUBACK future of each of its messages, and its deadline.

    Attributes:
        entry: The journal entry.
        acks: Each message with the future of its PUBACK (``None`` for QoS 0).
        deadline: ``loop.time()`` by which every PUBACK must have come.
    """

    entry: JournalEntry
    acks: list[tuple[Outbound, asyncio.Future[ReasonCode] | None]]
    deadline: float
    retired: bool = False

    def refusal(self, sender: Sender) -> PublishRefused | None:
        """The refusal among the (come) acknowledgements that holds the outbox back, if any."""
        for message, future in self.acks:
            if future is None or future.cancelled():
                continue
            refused = sender.check(message, future.result(), self.entry)
            if refused is not None:
                return refused
        return None


class _Flow:
    """The outbox of one connection: the next ``seq`` to hand off and what awaits its PUBACK.

    Attributes:
        client: The connected client.
        cursor: The ``seq`` of the next entry to hand to paho.
        sent: Entries handed off and not yet acknowledged, in ``seq`` order.
        failure: Set when an essential publish was refused: the connection must end.
        open: ``False`` once the connection's outbox ended (late PUBACKs are ignored).
        snapshot_due: The entry whose round snapshot is to be published (the latest one
            handed off), with its ``delayed`` flag.
        snapshot_scheduled: Whether :meth:`Delivery._publish_snapshot` is scheduled.
    """

    def __init__(self, client: MqttClient, cursor: int) -> None:
        self.client = client
        self.cursor = cursor
        self.sent: deque[_Sent] = deque()
        self.failure: PublishRefused | None = None
        self.open = True
        self.snapshot_due: tuple[_Sent, bool] | None = None
        self.snapshot_scheduled = False


class Lateness:
    """Which entries go out flagged ``delayed`` (``docs/mqtt.md``).

    An entry is delayed if it was journalled while disconnected, was not acknowledged when
    a link was lost, belongs to an earlier session, or is handed off later than
    ``delayed_after_seconds`` after it happened.
    """

    def __init__(self, journal: Journal, after_seconds: float) -> None:
        self.journal = journal
        self.after_seconds = after_seconds
        self.offline: set[int] = set()
        self.upto = 0

    def lost(self) -> None:
        """The link was lost: what is not acknowledged by now goes out flagged."""
        self.upto = self.journal.last_seq

    def delayed(self, entry: JournalEntry, now: datetime) -> bool:
        """Whether ``entry``, handed off ``now``, is flagged."""
        if (
            entry.seq <= self.upto
            or entry.seq in self.offline
            or entry.session != self.journal.session
        ):
            return True
        return (now - entry.happened_at).total_seconds() > self.after_seconds


class Delivery:
    """Hands a table's journal to the client, in order, and settles it as the PUBACKs come.

    Args:
        journal: The table's open journal.
        settings: Broker settings (``window``, ``publish_timeout``, ``delayed_after_seconds``).
        topics: The table's topics.
        sender: Gives messages to the client.
        folder: The retained round snapshot.
        connected: Set while a connection is up (birth published).
        stopping: Set once a stop is requested.
        signer: Signs results and voids, if given.
        on_delivered: Called with each entry once acknowledged (see
            :class:`~controller.publisher.Publisher`).
        log: The bound logger.

    Attributes:
        delivered_entries: Entries acknowledged so far.
    """

    def __init__(
        self,
        journal: Journal,
        settings: MqttSettings,
        topics: Topics,
        sender: Sender,
        folder: SnapshotFolder,
        *,
        connected: asyncio.Event,
        stopping: asyncio.Event,
        signer: Signer | None,
        on_delivered: Callable[[JournalEntry], None] | None,
        log: Any,
    ) -> None:
        self.journal = journal
        self.settings = settings
        self.topics = topics
        self.sender = sender
        self.folder = folder
        self.connected = connected
        self.stopping = stopping
        self.signer = signer
        self.on_delivered = on_delivered
        self.log = log
        self.delivered_entries = 0
        self.wake = asyncio.Event()
        self.progress = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._flow: _Flow | None = None
        self.lateness = Lateness(journal, settings.delayed_after_seconds)

    def start(self) -> None:
        """Take entries from the listener from now on, in this loop (called by ``run``)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.wake.set()

    # -- journal listener --------------------------------------------------------------------

    def on_entry(self, entry: JournalEntry) -> None:
        """Called by the journal after each commit (usually in the event loop thread)."""
        if not self.connected.is_set():
            self.lateness.offline.add(entry.seq)
        loop = self._loop
        if loop is None:
            return  # not running yet: run() starts from the journal anyway
        if threading.get_ident() == self._loop_thread:
            self._take(entry)
        else:
            loop.call_soon_threadsafe(self._take, entry)

    def _take(self, entry: JournalEntry) -> None:
        """A new entry (loop thread): hand it to paho at once if the outbox is caught up.

        This is the live card's path: its messages reach the socket inside the journal's
        append, before the appending task goes on. Otherwise (a backlog, a full window, no
        connection, a stop) the outbox task is woken and takes the entry from the journal.
        """
        flow = self._flow
        if (
            flow is not None
            and flow.open
            and flow.failure is None
            and entry.seq == flow.cursor
            and len(flow.sent) < self.settings.window
            and not self.stopping.is_set()
        ):
            try:
                self._hand_off(flow, [entry])
                return
            except Exception as exc:  # the outbox task meets it again and handles it
                self.log.debug("direct hand-off failed", seq=entry.seq, error=str(exc))
        self.wake.set()

    # -- waiting -----------------------------------------------------------------------------

    def idle(self) -> bool:
        """Whether nothing handed to the broker awaits its PUBACK (and nothing is to hand)."""
        flow = self._flow  # None for a moment after connecting: the outbox is starting
        return (
            flow is not None
            and flow.open
            and not flow.sent
            and not flow.snapshot_scheduled
            and flow.cursor > self.journal.last_seq
        )

    # -- the outbox task -----------------------------------------------------------------------

    async def serve(self, client: MqttClient) -> None:
        """Hand every undelivered entry to paho, in ``seq`` order, and see each acknowledged.

        This task serves the backlog, enforces the PUBACK deadline and ends the connection on
        a refusal or a stop. Returns once a stop is requested and the PUBACKs still awaited
        came.

        Raises:
            TimeoutError: An entry's PUBACK did not come within ``publish_timeout``.
            PublishRefused: The broker refused an essential publish.
        """
        loop = asyncio.get_running_loop()
        pending = self.journal.undelivered(limit=1)
        flow = _Flow(client, pending[0].seq if pending else self.journal.last_seq + 1)
        self._flow = flow
        window = self.settings.window
        try:
            while True:
                self.wake.clear()
                if flow.failure is not None:
                    raise flow.failure
                stopping = self.stopping.is_set()
                if stopping and not flow.sent:
                    return
                room = window - len(flow.sent)
                if not stopping and room > 0 and flow.cursor <= self.journal.last_seq:
                    batch = self.journal.undelivered(limit=room, from_seq=flow.cursor)
                    if batch:
                        self._hand_off(flow, batch)
                        continue
                    flow.cursor = self.journal.last_seq + 1  # delivered meanwhile
                if not flow.sent:
                    if self.sender.refusals.count:
                        self.sender.refusals.flowing()
                    self.lateness.offline.clear()
                    self.progress.set()
                    await self.wake.wait()
                    continue
                remaining = flow.sent[0].deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self.wake.wait()
        finally:
            flow.open = False
            if self._flow is flow:
                self._flow = None

    def _hand_off(self, flow: _Flow, batch: list[JournalEntry]) -> None:
        """Give the messages of ``batch`` (entries from ``flow.cursor`` on) to paho.

        The retained round snapshot is not published with each entry: it is built and
        published once the current loop step ends (:meth:`_publish_snapshot`), for the latest
        entry handed off by then. The live card's event thus reaches the socket without
        waiting for its snapshot to be built, and entries journalled in a row (a round's end,
        a backlog) publish one snapshot, not one each: the round topic is retained, the
        earlier ones would be overwritten at once.

        Raises:
            PublishError: paho did not take a publish (not connected...).
        """
        loop = asyncio.get_running_loop()
        now = datetime.now(UTC)
        deadline = loop.time() + self.settings.publish_timeout
        awaited = False

        def settle(_future: asyncio.Future[ReasonCode]) -> None:
            self._settle(flow)

        journal_id = self.journal.identity
        for entry in batch:
            delayed = self.lateness.delayed(entry, now)
            messages = messages_for(
                entry,
                self.topics,
                journal=journal_id,
                delayed=delayed,
                snapshot=self.folder.for_message(entry),
                with_snapshot=False,
                signer=self.signer,
            )
            acks = [(message, self.sender.hand(flow.client, message)) for message in messages]
            sent = _Sent(entry, acks, deadline)
            flow.sent.append(sent)
            flow.cursor = entry.seq + 1
            if entry.round_id is not None:
                flow.snapshot_due = (sent, delayed)
            for _message, future in acks:
                if future is not None:
                    future.add_done_callback(settle)
                    awaited = True
        if flow.snapshot_due is not None and not flow.snapshot_scheduled:
            flow.snapshot_scheduled = True
            loop.call_soon(self._publish_snapshot, flow)
        if not awaited:
            self._settle(flow)  # QoS 0 only: nothing to wait for

    def _publish_snapshot(self, flow: _Flow) -> None:
        """Publish the retained round snapshot of the latest entry handed off.

        Scheduled by :meth:`_hand_off` to run after the current loop step, so it always runs
        before any acknowledgement of that step's publishes is read (I/O callbacks queue
        behind it): the snapshot's PUBACK joins its entry's before the entry can be settled.
        The snapshot is not essential: a failure is logged, the entry still delivers.
        """
        flow.snapshot_scheduled = False
        due, flow.snapshot_due = flow.snapshot_due, None
        if due is None or not flow.open:
            return
        sent, delayed = due
        try:
            snapshot = self.folder.after(sent.entry)
            message = round_snapshot_message(
                snapshot,
                self.topics,
                journal=self.journal.identity,
                entry=sent.entry,
                delayed=delayed,
            )
            future = self.sender.hand(flow.client, message)
        except Exception as exc:
            self.log.warning("round snapshot not published", seq=sent.entry.seq, error=str(exc))
            return
        if future is not None and not sent.retired:
            sent.acks.append((message, future))
            future.add_done_callback(lambda _future: self._settle(flow))

    def _settle(self, flow: _Flow) -> None:
        """Retire the acknowledged head of ``flow.sent``, in ``seq`` order (a PUBACK came).

        A refused essential message stops the flow there (its entry stays undelivered and the
        outbox task ends the connection); a refused non-essential one is reported and skipped.
        """
        if not flow.open:
            return
        done: list[JournalEntry] = []
        while flow.sent and flow.failure is None:
            head = flow.sent[0]
            if not all(future is None or future.done() for _m, future in head.acks):
                break
            flow.failure = head.refusal(self.sender)
            if flow.failure is not None:
                break
            flow.sent.popleft()
            head.retired = True
            done.append(head.entry)
        if done:
            refusals = self.sender.refusals
            if refusals.count and flow.failure is None and not flow.sent:
                refusals.flowing()
            self._delivered(done)
            if not flow.sent or self.journal.unwritten_marks >= MARK_BATCH:
                # Nothing in flight: the table is between cards (or it is a long backlog).
                # Write the marks now, before anyone waiting for an idle outbox (the cue of
                # the next slot) goes on.
                self.flush_marks()
        if (
            flow.failure is not None
            or (not flow.sent and self.stopping.is_set())
            or flow.cursor <= self.journal.last_seq
        ):
            self.wake.set()  # the outbox task has something to do

    def _delivered(self, entries: list[JournalEntry]) -> None:
        """Entries the broker acknowledged: note the marks, tell the metrics and waiters."""
        seqs = [entry.seq for entry in entries]
        try:
            self.journal.note_delivered(seqs)
        except JournalError as exc:  # closed under us (shutdown): published again next time
            self.log.warning("cannot note deliveries", error=str(exc), seqs=len(seqs))
        for seq in seqs:
            self.folder.forget(seq)
            self.lateness.offline.discard(seq)
        self.delivered_entries += len(seqs)
        self.progress.set()
        if self.on_delivered is not None:
            for entry in entries:
                try:
                    self.on_delivered(entry)
                except Exception:
                    self.log.exception("on_delivered callback failed", seq=entry.seq)

    def flush_marks(self) -> None:
        """Write the delivery marks noted so far (a failure is logged)."""
        try:
            self.journal.flush_delivered()
        except JournalError as exc:
            self.log.warning("cannot write delivery marks", error=str(exc))
