// Atomic adds for every family (NVRTC-safe). The fast variants are PyTorch's fastAtomicAdd idea: a 16-bit
// atomic add becomes a 32-bit packed (half2 / bfloat162) atomic add with an identity in the neighbour slot,
// which the hardware does natively and far faster than the compare-and-swap loop behind a 16-bit atomicAdd.
//
// The neighbour slot receives -0.0, not +0.0: x + (-0.0) == x for every x, -0.0 included (+0.0 would turn a
// neighbouring -0.0 into +0.0). The packed access never leaves [base, base + numel): at either end of the
// tensor, or when the pair would straddle it, the plain atomic is used.
//
// Hardware notes: __half2 atomics are native from sm_70, __nv_bfloat162 atomics from sm_90 (sm_80 emulates
// them with a compare-and-swap loop), float2 atomics exist from sm_90 only (pair_atomic_add<float> needs
// sm_90).
#pragma once

#include "common/types.cuh"

namespace jitune {

/// atomicAdd for float, double, __half (sm_70+) and __nv_bfloat16 (sm_80+).
template <class T>
__device__ __forceinline__ void plain_atomic_add(T* address, T value) {
  atomicAdd(address, value);
}

/// Adds `value` to base[index]; `base` points at the first of `numel` elements of the destination tensor.
/// float / double: plain atomicAdd. __half / __nv_bfloat16: a packed pair atomic when the aligned pair
/// holding base[index] lies inside the tensor, else the plain atomic.
template <class T>
__device__ __forceinline__ void fast_atomic_add(T* base, long long index, long long numel, T value) {
  atomicAdd(base + index, value);
}

/// The 2-element vector type packed atomics work on: __half2, __nv_bfloat162, float2.
template <class T>
struct PairOf;
template <>
struct PairOf<__half> {
  using type = __half2;
};
template <>
struct PairOf<__nv_bfloat16> {
  using type = __nv_bfloat162;
};
template <>
struct PairOf<float> {
  using type = float2;
};

/// Adds `a` to address[0] and `b` to address[1] with one packed atomic. `address` must be aligned to two
/// elements (4 bytes for 16-bit types, 8 bytes for float) and both elements must belong to the destination.
template <class T>
__device__ __forceinline__ void pair_atomic_add(T* address, T a, T b) {
  typename PairOf<T>::type pair;
  pair.x = a;
  pair.y = b;
  atomicAdd(reinterpret_cast<typename PairOf<T>::type*>(address), pair);
}

namespace detail {
template <class T2, class T>
__device__ __forceinline__ void packed_atomic_add(T* base, long long index, long long numel, T value,
                                                  T neg_zero) {
  T* target = base + index;
  const bool low = (reinterpret_cast<unsigned long long>(target) % sizeof(T2)) == 0;
  if (low && index + 1 < numel) {
    T2 pair;
    pair.x = value;
    pair.y = neg_zero;
    atomicAdd(reinterpret_cast<T2*>(target), pair);
  } else if (!low && index > 0) {
    T2 pair;
    pair.x = neg_zero;
    pair.y = value;
    atomicAdd(reinterpret_cast<T2*>(target - 1), pair);
  } else {
    atomicAdd(target, value);
  }
}
}  // namespace detail

template <>
__device__ __forceinline__ void fast_atomic_add<__half>(__half* base, long long index, long long numel,
                                                        __half value) {
  detail::packed_atomic_add<__half2>(base, index, numel, value, __ushort_as_half(0x8000));
}

template <>
__device__ __forceinline__ void fast_atomic_add<__nv_bfloat16>(__nv_bfloat16* base, long long index,
                                                               long long numel, __nv_bfloat16 value) {
  detail::packed_atomic_add<__nv_bfloat162>(base, index, numel, value, __ushort_as_bfloat16(0x8000));
}

}  // namespace jitune
