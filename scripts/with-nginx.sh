#!/usr/bin/env bash
# Run a command with Debian's nginx installed (the production front's tests run it:
# tests/e2e/test_nginx_front.py starts its own nginx on a free port; the system service is not
# needed). Exports FLOKIT_TEST_REQUIRE_NGINX=1 so that those tests fail rather than skip.
#
#   scripts/with-nginx.sh <command...>
set -euo pipefail

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "with-nginx: installing Debian's nginx package" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq nginx >/dev/null
fi

export FLOKIT_TEST_REQUIRE_NGINX=1
exec "$@"
