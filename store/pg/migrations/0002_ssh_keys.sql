-- An account's SSH keys, allowed into every sandbox of the account.

CREATE TABLE ssh_keys (
    id          text PRIMARY KEY,
    account_id  text NOT NULL REFERENCES accounts (id),
    fingerprint text NOT NULL,
    created_at  timestamptz NOT NULL,
    doc         jsonb NOT NULL,
    UNIQUE (account_id, fingerprint)
);
