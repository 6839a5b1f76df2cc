-- Webhooks for sandbox events: an account's endpoints (the signing
-- secret sealed by the API), the outbox of events queued for each
-- endpoint (written in the transaction that makes the event, so a
-- restart loses none) and every endpoint's delivery log (30 days).

CREATE TABLE webhooks (
    id         text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id),
    created_at timestamptz NOT NULL,
    doc        jsonb NOT NULL
);
CREATE INDEX webhooks_account ON webhooks (account_id, created_at);

CREATE TABLE webhook_deliveries (
    id         text PRIMARY KEY,
    webhook_id text NOT NULL,
    account_id text NOT NULL,
    due_at     timestamptz NOT NULL,
    doc        jsonb NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id);

CREATE TABLE webhook_attempts (
    id         text PRIMARY KEY,
    webhook_id text NOT NULL,
    account_id text NOT NULL,
    created_at timestamptz NOT NULL,
    doc        jsonb NOT NULL
);
CREATE INDEX webhook_attempts_webhook ON webhook_attempts (webhook_id, created_at DESC);
