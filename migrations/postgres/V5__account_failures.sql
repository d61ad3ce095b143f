-- Failed passwords by account, from every node, and the addresses each
-- account logged in from: an account's slow path (guesses spread over
-- many addresses) counts every node's failures, and spares the addresses
-- it logged in from on any node.
CREATE TABLE account_failures (
    id      BIGSERIAL PRIMARY KEY,
    account TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    node    TEXT NOT NULL
);
CREATE INDEX account_failures_account ON account_failures (account, at);

CREATE TABLE account_addresses (
    account TEXT NOT NULL,
    addr    TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (account, addr)
);
