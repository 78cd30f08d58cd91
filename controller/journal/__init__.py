"""The journal: every state change of the table, appended and fsynced before it is published.

One SQLite file per table; each entry a kind, a body, the table's gap-free ``seq`` and a link
of a tamper-evident hash chain (docs/journal.md). The package:

* :mod:`~controller.journal.entries`: the kinds (:class:`EntryKind`), a pydantic body model
  per kind, :class:`JournalEntry` (its body as stored, and typed);
* :mod:`~controller.journal.format`: the on-disk format (schema migrations, times, the hash);
* :mod:`~controller.journal.store`: :class:`Journal`, the open file: a façade that owns the
  connection and the append API, over the modules of its jobs:
  :mod:`~controller.journal.appending` (the next ``seq``, the chain's head, the insert, the
  listeners: the card's hot path), :mod:`~controller.journal.opening` (lock, connection,
  migrations, session),
  :mod:`~controller.journal.marks` (delivery marks, noted then written),
  :mod:`~controller.journal.reading` (the queries and ``verify``'s transaction) and
  :mod:`~controller.journal.meta` (the ``meta`` table);
* :mod:`~controller.journal.fold`: :class:`RoundFold`, the one fold of a round's entries that
  the round snapshot, the recall view and the verifier share;
* :mod:`~controller.journal.verify`: the checks of ``Journal.verify`` (:class:`VerifyReport`);
* :mod:`~controller.journal.anchors`: chain heads read from a recorded feed (:func:`read_feed`),
  which ``Journal.verify`` checks the file against.

This module is the package's public surface: import from ``controller.journal``.
"""

from __future__ import annotations

from controller.journal.anchors import Anchor, Feed, FeedError, read_feed
from controller.journal.entries import (
    BODY_MODELS,
    QUALIFIERS,
    BettingClosedData,
    BettingOpenedData,
    CardDealtData,
    CardRefusedData,
    CardsRevealedData,
    CommandAnsweredData,
    CommandReceivedData,
    DecisionAppliedData,
    DecisionOpenData,
    DeviceStatusData,
    EntryBody,
    EntryKind,
    HandSummary,
    JournalEntry,
    OpenModel,
    PitAlertData,
    RescanRequestedData,
    Role,
    RoundHaltedData,
    RoundOpenedData,
    RoundResultData,
    RoundResumedData,
    RoundVoidedData,
    SettledBet,
    SettlementLine,
    TableInfoData,
    TableStatusData,
    body_text,
    parse_body,
    settlement_rows,
    stored_body,
)
from controller.journal.fold import DealtCard, RoundFold
from controller.journal.format import (
    GENESIS_HASH,
    JOURNAL_ID_TEXT,
    MIGRATIONS,
    SCHEMA_VERSION,
    entry_hash,
    format_time,
    new_journal_id,
    parse_time,
    short_journal_id,
)
from controller.journal.store import Journal
from controller.journal.verify import MAX_PROBLEMS, Problem, VerifyReport

__all__ = [
    "BODY_MODELS",
    "GENESIS_HASH",
    "JOURNAL_ID_TEXT",
    "MAX_PROBLEMS",
    "MIGRATIONS",
    "QUALIFIERS",
    "SCHEMA_VERSION",
    "Anchor",
    "BettingClosedData",
    "BettingOpenedData",
    "CardDealtData",
    "CardRefusedData",
    "CardsRevealedData",
    "CommandAnsweredData",
    "CommandReceivedData",
    "DealtCard",
    "DecisionAppliedData",
    "DecisionOpenData",
    "DeviceStatusData",
    "EntryBody",
    "EntryKind",
    "Feed",
    "FeedError",
    "HandSummary",
    "Journal",
    "JournalEntry",
    "OpenModel",
    "PitAlertData",
    "Problem",
    "RescanRequestedData",
    "Role",
    "RoundFold",
    "RoundHaltedData",
    "RoundOpenedData",
    "RoundResultData",
    "RoundResumedData",
    "RoundVoidedData",
    "SettledBet",
    "SettlementLine",
    "TableInfoData",
    "TableStatusData",
    "VerifyReport",
    "body_text",
    "entry_hash",
    "format_time",
    "new_journal_id",
    "parse_body",
    "parse_time",
    "read_feed",
    "settlement_rows",
    "short_journal_id",
    "stored_body",
]
