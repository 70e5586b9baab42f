#!/usr/bin/env bash
# Configures and builds jitune into build/ (Release, Ninja).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${CUDAToolkit_ROOT:+-DCUDAToolkit_ROOT=$CUDAToolkit_ROOT}
cmake --build build -j "$(nproc)"
