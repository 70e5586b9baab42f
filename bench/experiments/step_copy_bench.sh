#!/usr/bin/env bash
# Builds bench/experiments/step_copy_bench.cu (repack 3's copy and unstaging kernels timed alone, beside their first
# form, an empty kernel and a plain copy of the same bytes) on the development machine; carry the binary to the GPU
# machine and run it there. The first form is igemm_launches.cuh of commit 78dfdb8 with its kernels renamed (old_*),
# and its igemm_repack.cuh with RepackPlan::tiles made __host__ __device__ (NVRTC compiles device code by default,
# nvcc does not).
#   usage: bench/experiments/step_copy_bench.sh OUTDIR   (then OUTDIR/step_copy_bench on the GPU machine)
set -euo pipefail
out=${1:?an output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out/conv2d"
git -C "$root" show 78dfdb8:templates/conv2d/igemm_launches.cuh |
  sed -e 's/conv2d_repack_copy/old_repack_copy/g; s/conv2d_unstage/old_unstage/g' \
      -e 's/conv2d_igemm_after_copy/old_igemm_after_copy/g; s/kStepThreads/kOldStepThreads/g' \
      -e 's/kStepBufferBytes/kOldStepBufferBytes/g; s/#pragma once//' > "$out/old_launches.cuh"
sed 's/  long long tiles(long long batches) const/  __host__ __device__ long long tiles(long long batches) const/' \
  "$root/templates/conv2d/igemm_repack.cuh" > "$out/conv2d/igemm_repack.cuh"
nvcc -O3 -arch=sm_90a -std=c++17 -I"$out" -I"$root/templates" "$root/bench/experiments/step_copy_bench.cu" \
  -o "$out/step_copy_bench"
