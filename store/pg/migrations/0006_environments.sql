-- An account's environment (variables, repos, secret files, setup), one
-- document per account; values are sealed by the API.

CREATE TABLE environments (
    account_id text PRIMARY KEY REFERENCES accounts (id),
    doc        jsonb NOT NULL
);
