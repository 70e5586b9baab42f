#!/usr/bin/env bash
# Runs on the GPU machine (device tool) from the repository root with the build folder carried: a fresh install
# (empty user cache, the shipped caches only) explains the default suite, then benchmarks the given families
# against PyTorch. Output under $OUT (or ./device-out).
#   usage: [BUILD=build] bench/fresh-install.sh [family ...]   (default: every family)
set -uo pipefail
build=${BUILD:-build}
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
src=$(grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2)
if [ -n "$src" ] && [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")"; ln -sfn "$PWD" "$src"; fi
export JITUNE_CACHE_DIR=$(mktemp -d)
fam_args=()
for f in "$@"; do fam_args+=(--family "$f"); done
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
"$build/jitune" explain --suite default > "$out/explain.txt" 2>&1 || status=1
tail -1 "$out/explain.txt"
"$build/jitune_bench" "${fam_args[@]}" --json "$out/jitune.json" > "$out/bench.txt" 2>&1 || status=1
python3 bench/peer_torch.py "${fam_args[@]}" --json "$out/torch.json" > "$out/torch.txt" 2>&1 || status=1
python3 bench/compare.py "$out/jitune.json" "$out/torch.json" --markdown "$out/table.md" || status=1
exit $status
