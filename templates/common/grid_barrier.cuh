// The grid barrier of a cooperative launch (LaunchShape::cooperative: every block resident at once), shared by
// scatter_add's partition kernel and conv2d's repacking implicit GEMM.
#pragma once

namespace jitune {

/// Waits until every block of the grid has arrived at barrier number `generation` (1, 2, ...) on `counter`;
/// every block's writes before it are visible to every block after it. Only for cooperative launches. The
/// counter is left at generation * gridDim.x: the kernel resets it for its next launch.
__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned generation) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    const unsigned target = generation * gridDim.x;
    unsigned seen;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
      if (seen >= target) break;
      __nanosleep(64);
    }
  }
  __syncthreads();
}

}  // namespace jitune
