-- Snapshots of sandboxes' disks: saved ones (kept until deleted, also
-- after their sandbox) and the automatic ones hostctl takes. A deleted
-- snapshot stays until hostctl has removed its files.

CREATE TABLE snapshots (
    id         text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id),
    sandbox_id text NOT NULL,
    host_id    text NOT NULL,
    created_at timestamptz NOT NULL,
    deleted    boolean NOT NULL DEFAULT false,
    doc        jsonb NOT NULL
);
CREATE INDEX snapshots_account ON snapshots (account_id, created_at DESC) WHERE NOT deleted;
CREATE INDEX snapshots_sandbox ON snapshots (sandbox_id) WHERE NOT deleted;
CREATE INDEX snapshots_host ON snapshots (host_id);
