"""The journal: every state change of the table, appended and fsynced before it is published.

One SQLite file per table; each entry a kind, a body, the table's gap-free ``seq`` and a link
of a tamper-evident hash chain (docs/journal.md). The package:

* :mod:`~controller.journal.entries`: the kinds (:class:`EntryKind`), a pydantic body model
  per kind, :class:`JournalEntry` (its body as stored, and typed);
* :mod:`~controller.journal.format`: the on-disk format (schema migrations, times, the hash);
* :mod:`~controller.journal.store`: :class:`Journal`, the open file (append, read, marks);
* :mod:`~controller.journal.fold`: :class:`RoundFold`, the one fold of a round's entries that
  the round snapshot, the recall view and the verifier share;
* :mod:`~controller.journal.verify`: the checks of ``Journal.verify`` (:class:`VerifyReport`).

This module is the package's public surface: import from ``controller.journal``.
"""

from __future__ import annotations

from controller.journal.entries import (
    BODY_MODELS,
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
    TableInfoData,
    TableStatusData,
    body_text,
    parse_body,
    stored_body,
)
from controller.journal.fold import DealtCard, RoundFold
from controller.journal.format import (
    GENESIS_HASH,
    MIGRATIONS,
    SCHEMA_VERSION,
    entry_hash,
    format_time,
    parse_time,
)
from controller.journal.store import Journal
from controller.journal.verify import MAX_PROBLEMS, Problem, VerifyReport

__all__ = [
    "BODY_MODELS",
    "GENESIS_HASH",
    "MAX_PROBLEMS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
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
    "TableInfoData",
    "TableStatusData",
    "VerifyReport",
    "body_text",
    "entry_hash",
    "format_time",
    "parse_body",
    "parse_time",
    "stored_body",
]
