#!/usr/bin/env bash
# Run a command with a private, throwaway PostgreSQL cluster, then stop and delete it.
#
#   scripts/with-postgres.sh <command...>
#
# Exports FLOKIT_TEST_POSTGRES_URL (SQLAlchemy/psycopg 3 form) and FLOKIT_TEST_POSTGRES_DSN
# (libpq form, for Dagster's dagster-postgres) to the command. Installs Debian's `postgresql`
# package when no server binaries are found. PostgreSQL refuses to run as root, so when invoked
# as root the cluster is initialised and run as the `postgres` user.
set -euo pipefail

find_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  return 1
}

BINDIR=$(find_bindir || true)
if [ -z "$BINDIR" ]; then
  echo "with-postgres: installing Debian's postgresql package" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq postgresql >/dev/null
  BINDIR=$(find_bindir)
fi

RUNAS=()
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  RUNAS=(runuser -u postgres --)
fi

PGTMP=$(mktemp -d /tmp/flokit-pg.XXXXXX)
chmod 755 "$PGTMP"
[ "$(id -u)" -eq 0 ] && chown postgres "$PGTMP"
PGDATA="$PGTMP/data"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

cleanup() {
  "${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$PGTMP"
}
trap cleanup EXIT

"${RUNAS[@]}" "$BINDIR/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
# fsync and full_page_writes off: a test cluster is thrown away, durability across an OS crash or
# power loss is irrelevant. synchronous_commit stays on, as production requires (README
# "Production"): with it off, a crash of the server loses acknowledged commits, and tests would
# measure a service that production is not. Fault tests that crash the server use a private
# cluster with all three on (tests/faults/postgres.py).
# max_connections: parallel tests and dagster runs each keep small pools.
"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$PGDATA" -l "$PGTMP/server.log" -w -t 60 \
  -o "-p $PORT -k $PGTMP -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=on -c full_page_writes=off -c max_connections=300" \
  start >/dev/null
echo "with-postgres: PostgreSQL $("$BINDIR/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT" >&2

export FLOKIT_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$PORT/postgres"
export FLOKIT_TEST_POSTGRES_DSN="postgresql://postgres@127.0.0.1:$PORT/postgres"
"$@"
