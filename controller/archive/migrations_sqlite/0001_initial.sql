-- 0001: the archive's first schema on SQLite (docs/archive.md, "SQLite"): the tables and
-- meanings of the PostgreSQL schema (migrations/0001_initial.sql), in SQLite's types.
-- Times are ISO-8601 text in UTC with microseconds ('2026-11-25T21:14:00.000000+00:00'), so
-- text order is time order; JSON is text; booleans are 0/1. `events` is one table (SQLite
-- has no partitions): its key is on `entry_keys`, as on PostgreSQL.

CREATE TABLE entry_keys (
    table_id    TEXT    NOT NULL,
    session     INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    at          TEXT    NOT NULL,
    digest      TEXT    NOT NULL,
    received_at TEXT    NOT NULL,
    PRIMARY KEY (table_id, session, seq)
) WITHOUT ROWID;
CREATE INDEX entry_keys_table_seq ON entry_keys (table_id, seq);

CREATE TABLE events (
    table_id    TEXT    NOT NULL,
    session     INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    at          TEXT    NOT NULL,
    round_id    TEXT,
    kind        TEXT    NOT NULL,
    topic       TEXT    NOT NULL,
    delayed     INTEGER NOT NULL,
    replayed    INTEGER NOT NULL,
    signed      INTEGER NOT NULL,
    envelope    TEXT    NOT NULL,  -- the message's own text
    received_at TEXT    NOT NULL
);
CREATE INDEX events_table_seq ON events (table_id, seq);
CREATE INDEX events_round ON events (round_id);
CREATE INDEX events_at ON events (at);

CREATE TABLE rounds (
    table_id    TEXT    NOT NULL,
    round_id    TEXT    NOT NULL,
    round_no    INTEGER,
    game        TEXT,
    state       TEXT    NOT NULL,
    outcome     TEXT,
    opened_at   TEXT,
    finished_at TEXT,
    result_seq  INTEGER,
    delayed     INTEGER NOT NULL DEFAULT 0,
    result      TEXT,               -- JSON
    bets        TEXT,               -- JSON
    entries     INTEGER NOT NULL DEFAULT 0,
    updated_at  TEXT    NOT NULL,
    PRIMARY KEY (table_id, round_id)
);

CREATE TABLE rejected (
    id          INTEGER PRIMARY KEY,
    topic       TEXT    NOT NULL,
    table_id    TEXT,
    seq         INTEGER,
    reason      TEXT    NOT NULL,
    category    TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    received_at TEXT    NOT NULL
);
CREATE INDEX rejected_table ON rejected (table_id, received_at);

CREATE TABLE table_status (
    id              INTEGER PRIMARY KEY,
    table_id        TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    session         INTEGER,
    chain_head_seq  INTEGER,
    chain_head_hash TEXT,
    envelope        TEXT    NOT NULL,
    received_at     TEXT    NOT NULL
);

CREATE TABLE gaps (
    id                  INTEGER PRIMARY KEY,
    table_id            TEXT    NOT NULL,
    from_seq            INTEGER NOT NULL,
    to_seq              INTEGER NOT NULL,
    detected_at         TEXT    NOT NULL,
    replay_requested_at TEXT,
    filled_at           TEXT,
    alerted_at          TEXT,
    missing             TEXT    -- JSON array of seqs
);

CREATE TABLE alerts (
    id         INTEGER PRIMARY KEY,
    table_id   TEXT,
    kind       TEXT    NOT NULL,
    detail     TEXT    NOT NULL,
    raised_at  TEXT    NOT NULL
);
