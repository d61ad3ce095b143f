-- The audit in PostgreSQL: the same rows as the SQLite store's, and a
-- node column on sessions so that each bastion ends only its own after a
-- crash. Text columns keep each row's bytes exactly as they were chained
-- (jsonb would reorder them and break the hash).
CREATE TABLE events (
    seq     BIGINT PRIMARY KEY,
    ts      TEXT NOT NULL,
    session TEXT,
    "user"  TEXT,
    target  TEXT,
    kind    TEXT NOT NULL,
    fields  TEXT NOT NULL,
    hash    TEXT
);
CREATE INDEX events_session ON events (session);
CREATE INDEX events_ts ON events (ts);

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    "user"      TEXT NOT NULL,
    target      TEXT NOT NULL,
    client_addr TEXT NOT NULL,
    started     TEXT NOT NULL,
    ended       TEXT,
    recording   TEXT,
    start_seq   BIGINT,
    node        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_started ON sessions (started);
CREATE INDEX sessions_open ON sessions (node) WHERE ended IS NULL;

CREATE TABLE checkpoints (
    seq       BIGINT PRIMARY KEY,
    ts        TEXT NOT NULL,
    head      TEXT NOT NULL,
    signature TEXT NOT NULL,
    prev_seq  BIGINT,
    prev      TEXT
);

CREATE TABLE pruned (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    seq       BIGINT NOT NULL,
    head      TEXT NOT NULL,
    cp_seq    BIGINT NOT NULL,
    cp        TEXT NOT NULL,
    ts        TEXT NOT NULL,
    signature TEXT NOT NULL
);

CREATE TABLE conversations (
    "user"   TEXT NOT NULL,
    target   TEXT NOT NULL,
    updated  TEXT NOT NULL,
    messages TEXT NOT NULL,
    PRIMARY KEY ("user", target)
);
