-- The chain's head as the last writer left it, signed with the audit key:
-- a node links its rows only after a head it can check, so rows added,
-- changed or removed around walissh are never signed over by the next
-- checkpoint (the hash chain alone has no secret).
CREATE TABLE head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    seq       BIGINT NOT NULL,
    hash      TEXT NOT NULL,
    node      TEXT NOT NULL,
    signature TEXT NOT NULL
);
-- Sessions are found open from the chain, not from the sessions table.
CREATE INDEX events_starts ON events (session) WHERE kind = 'session_start';
CREATE INDEX events_ends ON events (session) WHERE kind = 'session_end';
