-- Every table keeps its record as JSON (doc), the same encoding the change
-- feed and the embedded store use, plus the columns that queries, unique
-- constraints and indexes need.

CREATE TABLE accounts (
    id   text PRIMARY KEY,
    doc  jsonb NOT NULL
);

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    account_id  text NOT NULL REFERENCES accounts (id),
    secret_hash text NOT NULL UNIQUE,
    doc         jsonb NOT NULL
);

CREATE TABLE hosts (
    id   text PRIMARY KEY,
    name text NOT NULL UNIQUE,
    doc  jsonb NOT NULL
);

CREATE TABLE sandboxes (
    id              text PRIMARY KEY,
    account_id      text NOT NULL REFERENCES accounts (id),
    name            text NOT NULL,
    created_at      timestamptz NOT NULL,
    deleted         boolean NOT NULL DEFAULT false,
    desired_running boolean NOT NULL,
    doc             jsonb NOT NULL
);
CREATE UNIQUE INDEX sandboxes_account_name ON sandboxes (account_id, name) WHERE NOT deleted;
CREATE INDEX sandboxes_account_created ON sandboxes (account_id, created_at, id) WHERE NOT deleted;

CREATE TABLE stops (
    id         text PRIMARY KEY,
    account_id text NOT NULL,
    sandbox_id text NOT NULL,
    pending    boolean NOT NULL,
    doc        jsonb NOT NULL
);

CREATE TABLE urls (
    id         text PRIMARY KEY,
    sandbox_id text NOT NULL,
    port       integer NOT NULL,
    hostname   text NOT NULL UNIQUE,
    doc        jsonb NOT NULL,
    UNIQUE (sandbox_id, port)
);

CREATE TABLE url_tokens (
    id     text PRIMARY KEY,
    url_id text NOT NULL,
    doc    jsonb NOT NULL
);
CREATE INDEX url_tokens_url ON url_tokens (url_id);

CREATE TABLE desktop_links (
    id         text PRIMARY KEY,
    sandbox_id text NOT NULL,
    hash       text NOT NULL UNIQUE,
    doc        jsonb NOT NULL
);

-- Host names taken per account and UTC day, for the names-per-day limit.
CREATE TABLE url_names (
    day        date NOT NULL,
    account_id text NOT NULL,
    hostname   text NOT NULL,
    PRIMARY KEY (day, account_id, hostname)
);

CREATE TABLE audit_events (
    id         bigserial PRIMARY KEY,
    account_id text NOT NULL,
    doc        jsonb NOT NULL
);
CREATE INDEX audit_events_account ON audit_events (account_id, id DESC);

CREATE TABLE idempotency_keys (
    account_id text NOT NULL,
    key        text NOT NULL,
    created_at timestamptz NOT NULL,
    doc        jsonb NOT NULL,
    PRIMARY KEY (account_id, key)
);

CREATE TABLE kv (
    key      text PRIMARY KEY,
    value    bytea NOT NULL,
    modified timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE leases (
    name    text PRIMARY KEY,
    owner   text NOT NULL,
    expires timestamptz NOT NULL
);

-- The change feed. Every writer that publishes takes the one row of
-- feed_head last in its transaction and holds it to commit, so sequence
-- numbers are handed out in commit order and readers never see a later
-- number before an earlier one. floor is the newest number pruned.
CREATE TABLE feed_head (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq   bigint NOT NULL,
    floor bigint NOT NULL
);
INSERT INTO feed_head (seq, floor) VALUES (0, 0);

CREATE TABLE changes (
    seq bigint PRIMARY KEY,
    at  timestamptz NOT NULL DEFAULT now(),
    doc jsonb NOT NULL
);
