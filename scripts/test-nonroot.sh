#!/usr/bin/env bash
# Runs the host test executables of build/ again as an unprivileged user (nobody) when started as root, so the
# tests whose outcome depends on file permissions run both ways (CI runs as root). Says SKIPPED, and why, when
# that user cannot reach the checkout (a private parent folder) or runuser is missing; a failing test fails it.
#   usage: scripts/test-nonroot.sh    (after scripts/test.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [ "$(id -u)" != 0 ]; then
  echo "test-nonroot: running as $(id -un), not root: scripts/test.sh already ran the tests unprivileged"
  exit 0
fi
if ! command -v runuser >/dev/null || ! id nobody >/dev/null 2>&1; then
  echo "test-nonroot: SKIPPED: no runuser or no user nobody on this machine"
  exit 0
fi
if ! runuser -u nobody -- test -x "$root/build/tests"; then
  echo "test-nonroot: SKIPPED: user nobody cannot reach $root/build (a parent folder is private)"
  exit 0
fi
failed=()
for t in "$root"/build/tests/host_*; do
  [ -x "$t" ] || continue
  log=$(mktemp)
  if (cd /tmp && HOME=/nonexistent runuser -u nobody -- "$t" >"$log" 2>&1); then
    echo "test-nonroot: $(basename "$t"): $(tail -n 1 "$log")"
  else
    cat "$log"
    failed+=("$(basename "$t")")
  fi
  rm -f "$log"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-nonroot: failed as user nobody: ${failed[*]}" >&2
  exit 1
fi
echo "test-nonroot: every host test passed as user nobody"
