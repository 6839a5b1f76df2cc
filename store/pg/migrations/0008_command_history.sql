-- Command history: a record per exec and background command, its output
-- in gzip chunks appended as it is copied (never rewritten), and each
-- account's compressed bytes per clock hour (the docs' 10 MiB an hour).
-- A sandbox's records and chunks go with it (DeleteSandbox); an hour's
-- count stays, so deleting a sandbox gives no room back.

CREATE TABLE commands (
    sandbox_id text NOT NULL,
    id         text NOT NULL,
    account_id text NOT NULL,
    started_at timestamptz NOT NULL,
    open       boolean NOT NULL,
    doc        jsonb NOT NULL,
    PRIMARY KEY (sandbox_id, id)
);
CREATE INDEX commands_newest ON commands (sandbox_id, started_at DESC, id DESC);
CREATE INDEX commands_open ON commands (started_at) WHERE open;

CREATE TABLE command_output (
    sandbox_id text NOT NULL,
    command_id text NOT NULL,
    stream     text NOT NULL,
    pos        bigint NOT NULL,
    size       bigint NOT NULL,
    at         timestamptz NOT NULL,
    gzip       bytea NOT NULL,
    PRIMARY KEY (sandbox_id, command_id, stream, pos)
);

CREATE TABLE command_output_hours (
    account_id text NOT NULL,
    hour       timestamptz NOT NULL,
    bytes      bigint NOT NULL,
    PRIMARY KEY (account_id, hour)
);
