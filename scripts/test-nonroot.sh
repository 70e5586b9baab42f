#!/usr/bin/env bash
# Runs the host test executables of build/ again as an unprivileged user (nobody) when started as root, so the
# tests whose outcome depends on file permissions run both ways (CI runs as root). Says SKIPPED, and why, when
# that user cannot reach the checkout (a private parent folder) or runuser is missing; a failing test fails it.
# The NVRTC coverage cases are left out of this second run (below).
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
# The NVRTC coverage cases ("NVRTC compiles ...": every legal config of a family, compiled in memory) touch no file
# and ran as root already; the rest run as nobody, as many executables at a time as the machine has cores.
exclude='*NVRTC compiles*'
jobs=$(nproc 2>/dev/null || echo 2)
logs=$(mktemp -d)
tests=()
for t in "$root"/build/tests/host_*; do
  [ -x "$t" ] && tests+=("$t")
done
for t in "${tests[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  name=$(basename "$t")
  (cd /tmp && HOME=/nonexistent runuser -u nobody -- "$t" "-tce=$exclude" >"$logs/$name.log" 2>&1
   echo $? >"$logs/$name.rc") &
done
wait
failed=()
for t in "${tests[@]}"; do
  name=$(basename "$t")
  if [ "$(cat "$logs/$name.rc" 2>/dev/null)" = 0 ]; then
    echo "test-nonroot: $name: $(tail -n 1 "$logs/$name.log")"
  else
    cat "$logs/$name.log"
    failed+=("$name")
  fi
done
rm -rf "$logs"
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-nonroot: failed as user nobody: ${failed[*]}" >&2
  exit 1
fi
echo "test-nonroot: every host test passed as user nobody"
