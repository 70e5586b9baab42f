#!/usr/bin/env bash
# Builds and runs every test. Host tests need no GPU; GPU tests report "Skipped" without one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build && ctest --output-on-failure -j "$(nproc)"
