-- 0003: entry_keys keyed (table_id, seq, session) instead of (table_id, session, seq).
--
-- The same key (the same three columns, so the same uniqueness and the same idempotency),
-- in the order every reader asks for it: the gap scans, `archive verify` and the highest seq
-- per table read a table's keys by seq. The key's index now serves them, and the second
-- index on (table_id, seq) goes: every archived entry had to update both, and the batch's
-- key insert (`INSERT ... ON CONFLICT DO NOTHING`) is the largest part of the database's
-- work per entry (about a quarter less without it, docs/archive.md "Speed").
--
-- It rebuilds the key's index: on a large archive run `tablectl archive migrate` in a quiet
-- moment (the table is locked meanwhile; the instances hold their acknowledgements).
ALTER TABLE entry_keys DROP CONSTRAINT entry_keys_pkey;
ALTER TABLE entry_keys ADD CONSTRAINT entry_keys_pkey PRIMARY KEY (table_id, seq, session);
DROP INDEX entry_keys_table_seq;
