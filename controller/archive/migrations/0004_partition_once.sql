-- 0004: a month's partition made once when two writers need it at the same moment.
--
-- 0001's function checked `to_regclass(name)` again after waiting for the name's advisory
-- lock, but a lock of that kind does not make the backend read the catalog changes committed
-- meanwhile, so the second writer still saw no partition and failed its whole batch with
-- "relation events_YYYY_MM already exists" (the batch then went one entry at a time). Two
-- archive instances starting a month together did exactly that (bench/archive.py
-- --instances 2; tests/archive/test_archive_store.py). `CREATE TABLE IF NOT EXISTS` looks the
-- name up after taking the schema's lock, which does read them: the second writer finds the
-- partition the first one committed and goes on.
CREATE OR REPLACE FUNCTION archive_events_partition(moment timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    month_start timestamptz := date_trunc('month', moment AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    name text := 'events_' || to_char(month_start AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF to_regclass(name) IS NULL THEN
        -- Two writers may race here: serialise on an advisory lock for the name.
        PERFORM pg_advisory_xact_lock(hashtext(name));
        EXECUTE format(
            'CREATE TABLE IF NOT EXISTS %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
            name, month_start, month_start + interval '1 month'
        );
    END IF;
    RETURN name;
END $$;
