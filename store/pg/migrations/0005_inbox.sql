-- Webhook inboxes: the requests an edge stored for a URL, in arrival
-- order (seq), with their delivery state. The body is a column of its
-- own: written once, while the state (doc) changes at every attempt.

CREATE SEQUENCE inbox_seq;

CREATE TABLE inbox_deliveries (
    id          text PRIMARY KEY,
    url_id      text NOT NULL,
    account_id  text NOT NULL,
    seq         bigint NOT NULL,
    queued      boolean NOT NULL,
    due_at      timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    size        integer NOT NULL,
    doc         jsonb NOT NULL,
    body        bytea NOT NULL
);
CREATE INDEX inbox_deliveries_queue ON inbox_deliveries (url_id, seq) WHERE queued;
CREATE INDEX inbox_deliveries_url ON inbox_deliveries (url_id, seq DESC);
CREATE INDEX inbox_deliveries_account ON inbox_deliveries (account_id) WHERE queued;
