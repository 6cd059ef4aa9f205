#!/usr/bin/env bash
# Run a command with the distributed parts FloKit runs on beyond one machine, each private and
# thrown away afterwards, all on 127.0.0.1:
#   PostgreSQL (scripts/with-postgres.sh)  the operational database and the Dagster instance
#   Redis      (scripts/with-redis.sh)     the Celery broker and results, rate limits
#   SeaweedFS  (scripts/with-s3.sh)        an S3-compatible object store for the lake
#
#   scripts/with-cluster.sh <command...>
#
# The command gets each script's variables (FLOKIT_TEST_POSTGRES_URL, FLOKIT_TEST_REDIS_URL,
# FLOKIT_TEST_S3_*). tests/cluster starts the FloKit "hosts" on top (`make cluster-test`).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
exec "$HERE/with-postgres.sh" "$HERE/with-redis.sh" "$HERE/with-s3.sh" "$@"
