// Kernels the tuner itself runs: output comparison on the device (counts elements outside
// |got - expected| <= atol + rtol*|expected|; NaN and infinities must match exactly; poisoned elements fail) and a
// spin kernel that holds the stream while timed launches are queued behind it.
#pragma once

#include "common/types.cuh"

namespace jitune {

__device__ __forceinline__ double to_double(float x) { return x; }
__device__ __forceinline__ double to_double(double x) { return x; }
__device__ __forceinline__ double to_double(__half x) { return __half2float(x); }
__device__ __forceinline__ double to_double(__nv_bfloat16 x) { return __bfloat162float(x); }
// Integer element types, exact in double (byte-moving families compare them with rtol = atol = 0).
__device__ __forceinline__ double to_double(signed char x) { return x; }
__device__ __forceinline__ double to_double(unsigned char x) { return x; }
__device__ __forceinline__ double to_double(short x) { return x; }
__device__ __forceinline__ double to_double(int x) { return x; }

// result[0]: mismatches; result[1]: first mismatching index (initialised to ~0 by the host).
template <class T>
__global__ void compare_outputs(const T* got, const T* expected, unsigned long long n, double rtol, double atol,
                                unsigned long long* result) {
  unsigned long long bad = 0, first = ~0ull;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const double g = to_double(got[i]), e = to_double(expected[i]);
    bool ok;
    if (isnan(e) || isnan(g) || isinf(e) || isinf(g)) {
      ok = (isnan(e) && isnan(g)) || g == e;
    } else {
      ok = fabs(g - e) <= atol + rtol * fabs(e);
    }
    if (!ok) {
      ++bad;
      if (i < first) first = i;
    }
  }
  if (bad) {
    atomicAdd(&result[0], bad);
    atomicMin(&result[1], first);
  }
}

// Busy-waits `ns` nanoseconds of global time: launches queued behind it then run back to back, with no host gaps.
__global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

}  // namespace jitune
