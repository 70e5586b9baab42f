#!/usr/bin/env bash
# Runs on the GPU machine: the default suite through an old and a new build side by side (old, new, PyTorch, old,
# new in one call), then bench/compare_builds.py. Both builds read the same shipped cache; the user cache starts
# empty. usage: OLD=build-old NEW=build bench/builds.sh [family ...]
set -uo pipefail
old=${OLD:-build-old}
new=${NEW:-build}
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
src=$(grep -m1 '^CMAKE_HOME_DIRECTORY' "$new/CMakeCache.txt" | cut -d= -f2)
if [ -n "$src" ] && [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")"; ln -sfn "$PWD" "$src"; fi
export JITUNE_CACHE_DIR=/tmp/jitune-builds-cache
rm -rf "$JITUNE_CACHE_DIR"
fam=(); for f in "$@"; do fam+=(--family "$f"); done
"$new/jitune" explain --suite default > "$out/explain.txt" 2>&1; tail -2 "$out/explain.txt"
run() {  # name binary
  local t0=$SECONDS
  "$2/jitune_bench" --json "$out/$1.json" "${fam[@]}" > "$out/$1.log" 2>&1 || echo "$1: exit $?"
  echo "$1: $((SECONDS - t0)) s"
}
run old1 "$old"; run new1 "$new"
python3 bench/peer_torch.py --json "$out/torch.json" "${fam[@]}" > "$out/torch.log" 2>&1 || echo "peer: exit $?"
run old2 "$old"; run new2 "$new"
python3 bench/compare_builds.py --old "$out"/old*.json --new "$out"/new*.json --peer "$out/torch.json" \
  --markdown "$out/builds.md" | tail -12
