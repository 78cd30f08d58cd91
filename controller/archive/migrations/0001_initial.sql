-- 0001: the archive's first schema (docs/archive.md, "Tables").

-- One row per (table, session, seq) ever accepted: the idempotency key. Not partitioned, so
-- its primary key is global (a partitioned table's unique keys must contain the partition
-- key, which would let the same entry with another `at` in twice).
CREATE TABLE entry_keys (
    table_id    text        NOT NULL,
    session     integer     NOT NULL,
    seq         bigint      NOT NULL,
    at          timestamptz NOT NULL,
    digest      text        NOT NULL,  -- sha256 of (round, kind, at, data): redeliveries agree
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, session, seq)
);
CREATE INDEX entry_keys_table_seq ON entry_keys (table_id, seq);

-- Every accepted entry, as received (first copy), partitioned by the month of `at`.
CREATE TABLE events (
    table_id    text        NOT NULL,
    session     integer     NOT NULL,
    seq         bigint      NOT NULL,
    at          timestamptz NOT NULL,
    round_id    text,
    kind        text        NOT NULL,
    topic       text        NOT NULL,
    delayed     boolean     NOT NULL,
    replayed    boolean     NOT NULL,
    signed      boolean     NOT NULL,  -- carried a signature that verified
    envelope    json        NOT NULL,  -- json, not jsonb: the message's own key order is kept
    received_at timestamptz NOT NULL DEFAULT now()
) PARTITION BY RANGE (at);
CREATE INDEX events_table_seq ON events (table_id, seq);
CREATE INDEX events_round ON events (round_id);

-- One row per round, folded from its entries (controller.journal.fold.RoundFold).
CREATE TABLE rounds (
    table_id    text        NOT NULL,
    round_id    text        NOT NULL,
    round_no    integer,
    game        text,
    state       text        NOT NULL,
    outcome     text,                   -- 'result' | 'void' | NULL (unfinished)
    opened_at   timestamptz,
    finished_at timestamptz,
    result_seq  bigint,
    delayed     boolean     NOT NULL DEFAULT false,  -- the result arrived delayed
    result      jsonb,
    bets        jsonb,
    entries     integer     NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, round_id)
);

-- What was refused on ingest, with the reason: never a valid entry.
CREATE TABLE rejected (
    id          bigserial   PRIMARY KEY,
    topic       text        NOT NULL,
    table_id    text,                   -- from the topic, when it has one
    seq         bigint,
    reason      text        NOT NULL,
    category    text        NOT NULL,   -- malformed | schema_version | unknown_table | signature | conflict
    payload     bytea       NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rejected_table ON rejected (table_id, received_at);

-- Status messages (birth, Last Will, clean stop), kept as history.
CREATE TABLE table_status (
    id              bigserial   PRIMARY KEY,
    table_id        text        NOT NULL,
    state           text        NOT NULL,
    session         integer,
    chain_head_seq  bigint,
    chain_head_hash text,
    envelope        jsonb       NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now()
);

-- Gaps in a table's seq: detected, replay asked, filled, or alerted.
CREATE TABLE gaps (
    id                  bigserial   PRIMARY KEY,
    table_id            text        NOT NULL,
    from_seq            bigint      NOT NULL,
    to_seq              bigint      NOT NULL,
    detected_at         timestamptz NOT NULL DEFAULT now(),
    replay_requested_at timestamptz,
    filled_at           timestamptz,
    alerted_at          timestamptz,
    missing             bigint[]
);

-- Alerts the archive raised (a gap not filled in time, ...): logged and kept.
CREATE TABLE alerts (
    id         bigserial   PRIMARY KEY,
    table_id   text,
    kind       text        NOT NULL,
    detail     text        NOT NULL,
    raised_at  timestamptz NOT NULL DEFAULT now()
);

-- The monthly partition of `events` that holds `at`, created on demand.
CREATE FUNCTION archive_events_partition(moment timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    month_start timestamptz := date_trunc('month', moment AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    name text := 'events_' || to_char(month_start AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF to_regclass(name) IS NULL THEN
        -- Two writers may race here: serialise on an advisory lock for the name.
        PERFORM pg_advisory_xact_lock(hashtext(name));
        IF to_regclass(name) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                name, month_start, month_start + interval '1 month'
            );
        END IF;
    END IF;
    RETURN name;
END $$;
