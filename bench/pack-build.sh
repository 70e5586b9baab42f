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
# Symbol tables are not needed there (about 5 MB): with the Python package beside it the carry stays under 64 MiB.
find build-dev -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'file -b "$1" | grep -q ELF && strip --strip-unneeded "$1"' _ {} \;
du -sh build-dev
