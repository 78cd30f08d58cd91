-- 0002: gap state in the database, shared by every archive instance (docs/archive.md, "Gaps").

-- Per table: every seq up to `scanned_to` is archived or inside a recorded gap. An instance
-- scans a table's keys above it under this row's lock (FOR UPDATE SKIP LOCKED), so two
-- instances never record one hole twice.
CREATE TABLE gap_watermarks (
    table_id   text        PRIMARY KEY,
    scanned_to bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- An archive that ran before this migration recorded its gaps in memory: its tables start
-- from their highest archived seq (what a restart of it did).
INSERT INTO gap_watermarks (table_id, scanned_to)
    SELECT table_id, max(seq) FROM entry_keys GROUP BY table_id;

-- One gap per hole start and table.
CREATE UNIQUE INDEX gaps_table_from ON gaps (table_id, from_seq);
CREATE INDEX gaps_open ON gaps (table_id) WHERE filled_at IS NULL;
