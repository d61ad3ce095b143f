-- Failed logins by address (IPv4, or an IPv6 /64), from every node, and
-- attempts under way (a row from the start, taken back if it succeeds): a
-- node counts the others' recent ones with its own before it lets an
-- address try again, so a guesser gains nothing by changing node or by
-- trying on every node at once.
CREATE TABLE login_failures (
    id   BIGSERIAL PRIMARY KEY,
    addr TEXT NOT NULL,
    at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    node TEXT NOT NULL
);
CREATE INDEX login_failures_addr ON login_failures (addr, at);
