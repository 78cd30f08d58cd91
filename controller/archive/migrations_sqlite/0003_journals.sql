-- 0003: a table's journals: the PostgreSQL migration 0006 (migrations/0006_journals.sql), in
-- SQLite's types.
CREATE TABLE journals (
    table_id          TEXT    NOT NULL,
    journal           TEXT    NOT NULL,
    chain_id          TEXT    NOT NULL,
    first_seen        TEXT    NOT NULL,
    previous_chain    TEXT,
    previous_last_seq INTEGER,
    PRIMARY KEY (table_id, journal)
);
