-- Every start of a sandbox, for the account's start limits (per minute,
-- hour and day). Rows older than a day are pruned as new starts come.

CREATE TABLE starts (
    account_id text NOT NULL,
    at         timestamptz NOT NULL
);
CREATE INDEX starts_account_at ON starts (account_id, at);
