// Realignment in registers: kPack elements that start `shift` elements past an aligned pack boundary, from the
// two aligned packs around them (funnel shifts over 32-bit words), so a misaligned view is still read with
// full-width aligned loads. Used by the elementwise and upsample kernels.
#pragma once

#include "common/types.cuh"

namespace jitune {

/// The kPack elements starting `shift` elements into lo, continuing into hi (0 <= shift < kPack).
template <class T, int kPack>
__device__ __forceinline__ Pack<T, kPack> realign(const Pack<T, kPack>& lo, const Pack<T, kPack>& hi, int shift) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * kPack;
  if constexpr (kBytes < 4) {
    return lo;  // a pack of one 2-byte element is never shifted
  } else {
    constexpr int kWords = kBytes / 4;
    unsigned w[2 * kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      w[k] = reinterpret_cast<const unsigned*>(&lo)[k];
      w[kWords + k] = reinterpret_cast<const unsigned*>(&hi)[k];
    }
    const int bytes = shift * static_cast<int>(sizeof(T));
    const int q = bytes >> 2;                              // whole words to skip
    const unsigned r = static_cast<unsigned>(bytes & 3) * 8u;  // then bits within a word
    Pack<T, kPack> out;
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      unsigned a = w[k], b = w[k + 1];
#pragma unroll
      for (int c = 1; c < kWords; ++c)  // selects, not a dynamically indexed (local memory) array
        if (q == c) {
          a = w[k + c];
          b = w[k + c + 1];
        }
      reinterpret_cast<unsigned*>(&out)[k] = __funnelshift_r(a, b, r);
    }
    return out;
  }
}

}  // namespace jitune
