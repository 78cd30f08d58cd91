-- 0005: entries provisional until a signed chain head covers them (issue 21; docs/archive.md,
-- "Provisional entries").
--
-- Each key keeps its entry's place in the table's hash chain (the envelope's `link`: the
-- previous entry's hash and its own) and its state: `provisional` until a signed result's
-- chain head, walked down link by link, covers it (`verified`), or `unsigned` (a table the
-- config allows to publish unsigned: nothing to verify). A key archived before this migration
-- has no link: it stays provisional, and a walk stops at it (it cannot be judged).
-- Conflicting copies are looked up by (table, seq) when a walk needs the chain's own copy.
-- Adding columns with constant defaults rewrites nothing (PostgreSQL 11+). The hashes are
-- kept as bytes: a key's row is the archive's largest write per entry (docs/archive.md,
-- "Speed"), and hex would add 130 bytes to it instead of 66.
ALTER TABLE entry_keys ADD COLUMN state text NOT NULL DEFAULT 'provisional';
ALTER TABLE entry_keys ADD COLUMN link_prev bytea;  -- 32 bytes each (the hex on the wire)
ALTER TABLE entry_keys ADD COLUMN link_hash bytea;
CREATE INDEX rejected_conflicts ON rejected (table_id, seq) WHERE category = 'conflict';
