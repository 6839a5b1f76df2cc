#!/usr/bin/env bash
# Installs and starts what froog's test suite needs, when it is missing:
# PostgreSQL, listening on 127.0.0.1:5432 with trust auth for the postgres
# user (the default FROOG_TEST_DATABASE_URL). On Debian or Ubuntu as root it
# uses apt-get; elsewhere it says what to install and exits non-zero.
# Safe to run again: it does nothing when everything is there.
set -euo pipefail

say() { echo "testdeps: $*" >&2; }

db_url=${FROOG_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

pg_ok() {
  command -v psql >/dev/null 2>&1 && psql "$db_url" -Atqc 'select 1' >/dev/null 2>&1
}

if pg_ok; then
  exit 0
fi

if [ -n "${FROOG_TEST_DATABASE_URL:-}" ]; then
  say "FROOG_TEST_DATABASE_URL is set but Postgres does not answer there; start it, or unset it to let this script run a local one"
  exit 1
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say "the tests need PostgreSQL (13 or newer) on 127.0.0.1:5432 with trust auth for user postgres,"
  say "or FROOG_TEST_DATABASE_URL pointing at one. Install it with your package manager and start it."
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  say "installing PostgreSQL with apt-get"
  apt-get update -qq
  apt-get install -y -qq postgresql postgresql-client >/dev/null
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if [ ! -d "/etc/postgresql/$version/main" ]; then
  say "creating cluster $version/main"
  pg_createcluster "$version" main >/dev/null
fi

# The tests connect over TCP as postgres without a password: trust that on
# loopback only, in this cluster's own pg_hba.conf.
hba="/etc/postgresql/$version/main/pg_hba.conf"
if ! grep -q '^host all postgres 127.0.0.1/32 trust' "$hba"; then
  sed -i '1i host all postgres 127.0.0.1/32 trust\nhost all postgres ::1/128 trust' "$hba"
fi

say "starting PostgreSQL $version"
pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || pg_ctlcluster --skip-systemctl-redirect "$version" main reload

for _ in $(seq 1 60); do
  if pg_ok; then
    say "PostgreSQL is ready"
    exit 0
  fi
  sleep 0.5
done
say "PostgreSQL did not come up on 127.0.0.1:5432; see /var/log/postgresql/"
exit 1
