#!/usr/bin/env bash
# Run a command with a private, throwaway Redis server, then stop it.
#
#   scripts/with-redis.sh <command...>
#
# Exports FLOKIT_TEST_REDIS_URL (redis://127.0.0.1:<port>/0) to the command: the shared store
# the rate-limit tests count in (api/ratelimits.py). 64 logical databases (Redis has 16 by
# default), so that each pytest worker's tests (rate limits, Celery brokers and results, the
# cluster) have databases of their own. Installs Debian's `redis-server` package when no server
# binary is found. Nothing is persisted (no RDB snapshots, no AOF).
set -euo pipefail

if ! command -v redis-server >/dev/null 2>&1; then
  echo "with-redis: installing Debian's redis-server package" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq redis-server >/dev/null
fi

REDISTMP=$(mktemp -d /tmp/flokit-redis.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

redis-server --bind 127.0.0.1 --port "$PORT" --dir "$REDISTMP" --save "" --appendonly no --databases 64 \
  --daemonize no --logfile "$REDISTMP/redis.log" &
REDIS_PID=$!

cleanup() {
  kill "$REDIS_PID" 2>/dev/null || true
  wait "$REDIS_PID" 2>/dev/null || true
  rm -rf "$REDISTMP"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
  redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
  kill -0 "$REDIS_PID" 2>/dev/null || { cat "$REDISTMP/redis.log" >&2; exit 1; }
  sleep 0.1
done
echo "with-redis: Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on 127.0.0.1:$PORT" >&2

export FLOKIT_TEST_REDIS_URL="redis://127.0.0.1:$PORT/0"
"$@"
