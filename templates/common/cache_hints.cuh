// L2 eviction priority of global loads (NVRTC-safe, sm_80 and newer): the load carries an L2 cache policy made by
// createpolicy, the way Triton lowers eviction_policy='evict_last' / 'evict_first'.
//   evict_last:  data read again soon (an upsample's input, read by several outputs, or by the next call) stays in
//                L2 while streamed data goes first;
//   evict_first: data read once leaves L2 first, so it does not push out what others reuse.
#pragma once

namespace jitune {

/// Values of a family's [cache] parameter.
enum CacheHint : int {
  kCacheNormal = 0,      ///< a plain load.
  kCacheEvictLast = 1,   ///< L2 evict_last policy (and L1 evict_last).
  kCacheEvictFirst = 2,  ///< L2 evict_first policy (and L1 evict_first).
};

/// Loads one aligned value of 2, 4, 8 or 16 bytes (a Pack) with the L2 eviction priority kHint.
template <int kHint, class V>
__device__ __forceinline__ V load_hinted(const V* address) {
  static_assert(sizeof(V) == 2 || sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16,
                "load_hinted moves 2, 4, 8 or 16 bytes");
  if constexpr (kHint == kCacheNormal) {
    return *address;
  } else {
    unsigned long long policy;
    if constexpr (kHint == kCacheEvictLast)
      asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    else
      asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    const size_t a = __cvta_generic_to_global(address);
    union {
      V value;
      unsigned words[sizeof(V) >= 4 ? sizeof(V) / 4 : 1];
      unsigned short half;
    } out;
    if constexpr (sizeof(V) == 16) {
      unsigned* r = out.words;
      if constexpr (kHint == kCacheEvictLast)
        asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "l"(a), "l"(policy));
      else
        asm volatile("ld.global.L1::evict_first.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "l"(a), "l"(policy));
    } else if constexpr (sizeof(V) == 8) {
      unsigned* r = out.words;
      if constexpr (kHint == kCacheEvictLast)
        asm volatile("ld.global.L1::evict_last.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
                     : "=r"(r[0]), "=r"(r[1])
                     : "l"(a), "l"(policy));
      else
        asm volatile("ld.global.L1::evict_first.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
                     : "=r"(r[0]), "=r"(r[1])
                     : "l"(a), "l"(policy));
    } else if constexpr (sizeof(V) == 4) {
      if constexpr (kHint == kCacheEvictLast)
        asm volatile("ld.global.L1::evict_last.L2::cache_hint.u32 %0, [%1], %2;"
                     : "=r"(out.words[0])
                     : "l"(a), "l"(policy));
      else
        asm volatile("ld.global.L1::evict_first.L2::cache_hint.u32 %0, [%1], %2;"
                     : "=r"(out.words[0])
                     : "l"(a), "l"(policy));
    } else {
      if constexpr (kHint == kCacheEvictLast)
        asm volatile("ld.global.L1::evict_last.L2::cache_hint.u16 %0, [%1], %2;"
                     : "=h"(out.half)
                     : "l"(a), "l"(policy));
      else
        asm volatile("ld.global.L1::evict_first.L2::cache_hint.u16 %0, [%1], %2;"
                     : "=h"(out.half)
                     : "l"(a), "l"(policy));
    }
    return out.value;
  }
}

}  // namespace jitune
