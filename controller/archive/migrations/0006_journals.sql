-- 0006: a table's journals (issue 22; docs/archive.md, "Journals").
--
-- A table whose journal is replaced comes back with another journal id and its seq from 1.
-- Each journal of a table is kept as its own chain: the first one the archive met (and what
-- came before journal ids) under the table's id, each later one under `table/journal`, the
-- chain id standing where a table id stands in every other table (`/` is never in a table id).
-- This table says which journal is which chain, and what it replaced.
CREATE TABLE journals (
    table_id          text        NOT NULL,
    journal           text        NOT NULL,
    chain_id          text        NOT NULL,
    first_seen        timestamptz NOT NULL,
    previous_chain    text,
    previous_last_seq bigint,
    PRIMARY KEY (table_id, journal)
);
