#!/usr/bin/env bash
# Builds the Python wheel (cp310-abi3-linux_x86_64: libjitune.so, jitune-worker, the shipped caches and the package in
# python/jitune) into dist/. Without build isolation, so it works offline once scripts/install-deps.sh has run; the
# CMake build lives in build-py/ and is incremental. Prints the wheel's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${JITUNE_SKIP_DEPS:-0}" = 1 ] || scripts/install-deps.sh
# ccache shares compiled objects with scripts/build.sh's build/ (same flags).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
fi
export PIP_ROOT_USER_ACTION=ignore  # CI runs as root
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
version=$(sed -n 's/^project(jitune VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
mkdir -p dist
rm -f "dist/jitune-${version}-"*.whl
python3 -m pip wheel . --no-build-isolation --no-deps --wheel-dir dist \
  ${CUDAToolkit_ROOT:+--config-settings=cmake.define.CUDAToolkit_ROOT=$CUDAToolkit_ROOT} -q
ls "dist/jitune-${version}-cp310-abi3-"*.whl
