#!/usr/bin/env bash
# Copies what the GPU machine needs from a build folder into build-dev (objects, static libraries, host tests and
# fuzzers stay behind), so the carried tree stays under the device tool's 64 MiB. On the device:
#   rm -rf build && ln -s build-dev build && bench/device.sh ...
#   usage: bench/pack-build.sh [build-folder]   (default: build)
set -euo pipefail
src=${1:-build}
rm -rf build-dev
mkdir -p build-dev
tar -C "$src" --exclude='*.o' --exclude='*.a' --exclude='tests/host_*' --exclude='fuzz_*' -cf - . | tar -C build-dev -xf -
du -sh build-dev
