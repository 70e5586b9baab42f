// Programmatic dependent launch (sm_90+), for kernels the host launches with LaunchShape::programmatic.
#pragma once

namespace jitune {

/// Returns once the stream's previous kernel has finished and its writes are visible: the host may schedule a
/// programmatic launch while that kernel drains, so nothing before this call may read an input or write an output
/// (the previous kernel may still be producing one or reading the other). A no-op for a normal launch.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace jitune
