#!/usr/bin/env bash
# Run a command with Debian's chromium installed, for the real-browser tests (tests/browser).
#
#   scripts/with-chromium.sh <command...>
#   scripts/with-chromium.sh --check-install
#
# Installs Debian's `chromium` package when no chromium is on PATH (and FLOKIT_CHROMIUM is unset) (Playwright drives it through
# `executable_path`; `playwright install` cannot work here: it downloads a browser build from a
# CDN that CI cannot reach). Exports FLOKIT_CHROMIUM (the binary) and FLOKIT_TEST_REQUIRE_BROWSER=1
# so that browser tests fail rather than skip.
#
# --check-install checks the install step itself, which a machine that already has chromium never
# runs: it resolves the very `apt-get install` command below with `--simulate` against the
# machine's Debian package lists (no root needed, nothing changes) and fails unless apt would
# install, or has installed, the `chromium` package. That catches a renamed or missing package and
# unresolvable dependencies; it cannot catch a mirror that is down at install time.
set -euo pipefail

APT_INSTALL=(apt-get install -y --no-install-recommends chromium)

find_chromium() {
  local c
  for c in chromium chromium-browser; do
    command -v "$c" 2>/dev/null && return 0
  done
  return 1
}

# Root (or sudo) for apt-get; empty when we are root. Fails with the command to run when neither.
SUDO=()
need_root() {
  [ "$(id -u)" -eq 0 ] && return 0
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); return 0; fi
  echo "with-chromium: installing chromium needs root and there is no sudo; run as root:" >&2
  echo "  apt-get update && ${APT_INSTALL[*]}" >&2
  return 1
}

check_install() {
  local out
  # The real step refreshes the package lists first; so does its check (lists may be absent or stale).
  need_root && "${SUDO[@]}" apt-get update -qq
  if ! out=$(LC_ALL=C "${APT_INSTALL[@]}" --simulate 2>&1); then
    echo "with-chromium: '${APT_INSTALL[*]}' cannot be resolved on this machine:" >&2
    echo "$out" >&2
    return 1
  fi
  if grep -qE '^Inst chromium |chromium is already the newest version' <<<"$out"; then
    echo "with-chromium: ok: '${APT_INSTALL[*]}' resolves ($(grep -cE '^Inst ' <<<"$out") packages to install)"
    return 0
  fi
  echo "with-chromium: '${APT_INSTALL[*]}' would not install the chromium package:" >&2
  echo "$out" >&2
  return 1
}

if [ "${1:-}" = "--check-install" ]; then
  check_install
  exit $?
fi

if [ "$#" -eq 0 ]; then
  echo "usage: scripts/with-chromium.sh <command...> | --check-install" >&2
  exit 2
fi

# A chromium chosen by the caller wins, as in the tests' fixture (tests/browser/support.py).
if [ -n "${FLOKIT_CHROMIUM:-}" ]; then
  if [ ! -x "$FLOKIT_CHROMIUM" ]; then
    echo "with-chromium: FLOKIT_CHROMIUM=$FLOKIT_CHROMIUM is not an executable" >&2
    exit 1
  fi
  CHROMIUM=$FLOKIT_CHROMIUM
else
  CHROMIUM=$(find_chromium || true)
fi
if [ -z "$CHROMIUM" ]; then
  echo "with-chromium: installing Debian's chromium package" >&2
  export DEBIAN_FRONTEND=noninteractive
  need_root || exit 1
  if ! { "${SUDO[@]}" apt-get update -qq && "${SUDO[@]}" "${APT_INSTALL[@]}" -qq >/dev/null; }; then
    echo "with-chromium: could not install chromium with '${APT_INSTALL[*]}'" >&2
    exit 1
  fi
  CHROMIUM=$(find_chromium || true)
  if [ -z "$CHROMIUM" ]; then
    echo "with-chromium: the chromium package installed, but no chromium is on PATH" >&2
    exit 1
  fi
fi
# The Debian wrapper prints "[: ...: unexpected operator" on machines with two /dev/shm mounts; harmless.
echo "with-chromium: $("$CHROMIUM" --version 2>/dev/null | head -n 1) at $CHROMIUM" >&2

export FLOKIT_CHROMIUM="$CHROMIUM"
export FLOKIT_TEST_REQUIRE_BROWSER=1
exec "$@"
