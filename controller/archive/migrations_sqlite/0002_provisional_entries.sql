-- 0002: entries provisional until a signed chain head covers them: the PostgreSQL migration
-- 0005 (migrations/0005_provisional_entries.sql), in SQLite's types.
ALTER TABLE entry_keys ADD COLUMN state TEXT NOT NULL DEFAULT 'provisional';
ALTER TABLE entry_keys ADD COLUMN link_prev TEXT;
ALTER TABLE entry_keys ADD COLUMN link_hash TEXT;
CREATE INDEX rejected_conflicts ON rejected (table_id, seq) WHERE category = 'conflict';
