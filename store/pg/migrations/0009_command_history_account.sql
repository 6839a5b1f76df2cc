-- An account's stored command output in all (the docs' 512 MiB) is the
-- sum of its records' stored_bytes, read at every append of output.

CREATE INDEX commands_account ON commands (account_id);
