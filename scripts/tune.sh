#!/usr/bin/env bash
# The main job: builds jitune, then on a GPU tunes the default suite into the default cache and prints the table;
# without a GPU it says so and compiles the whole default suite's spaces with NVRTC (registers / spills per config).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
if ./build/jitune devices | grep -q '^no CUDA device'; then
  ./build/jitune devices
  echo "No GPU here: running the compile-only dry run of the default suite instead of tuning (each case's default"
  echo "and 11 random legal configs; 'jitune tune --suite default --dry-run' compiles them all)."
  exec ./build/jitune tune --suite default --dry-run --strategy random --budget 12
fi
exec ./build/jitune tune --suite default
