// Nearest-neighbour 2D upsampling, forward and backward, NCHW and NHWC, with PyTorch's index rules (CUDA kernels
// of aten::upsample_nearest2d / _upsample_nearest_exact2d and their backward). OneFlow's UpsampleNearest2D 2x
// kernels, made tunable and grown to every scale:
//   forward_2x    each input pack is read once and written as packed pairs into two output rows (NCHW), or four
//                 times as a channel pack (NHWC);
//   forward       general gather: each output pack computes its source indices;
//   backward_2x   each grad_input pack reads its 2x2 block of grad_output and is written once, no atomics;
//   backward      general backward: kStrategy 0 gathers (each grad_input element sums its window of grad_output,
//                 no atomics), 1 scatters (each grad_output element is added to its owner with the fast atomic add,
//                 a thread's consecutive same-owner elements summed in float first; grad_input must be zeroed).
// Sums run in float in PyTorch's order (window rows, then columns, from 0), so gathers match PyTorch bit for bit.
#pragma once

#include "common/atomics.cuh"
#include "common/cache_hints.cuh"
#include "common/realign.cuh"
#include "common/types.cuh"

namespace jitune {
namespace upn {

/// Kernel parameters. The host mirror is upn::Params in upsample_nearest2d.hpp: keep the two identical.
struct Params {
  const void* src;         ///< Forward: input. Backward: grad_output.
  void* dst;               ///< Forward: output. Backward: grad_input.
  long long n, c;          ///< Batch, channels.
  long long in_h, in_w;    ///< Input (grad_input) image.
  long long out_h, out_w;  ///< Output (grad_output) image.
  long long units;         ///< Work units: packs of the tensor the kernel walks.
  long long dst_numel;     ///< Elements of dst (bounds of the packed atomic add).
  float scale_h, scale_w;  ///< Forward: PyTorch's source step (in/out or 1/scale). Backward: its window step.
  int identity_h;          ///< Forward: height keeps its size (PyTorch copies indices). Backward: sizes equal (copy).
  int identity_w;          ///< The same for the width.
  int src_shift;           ///< forward_2x: src lies this many elements past a pack boundary (realigned loads).
};

enum : int { kNCHW = 0, kNHWC = 1 };
enum : int { kNearest = 0, kNearestExact = 1 };

/// Forward source index: min(floor(dst * scale), in - 1), or with dst + 0.5 for nearest-exact, in float as PyTorch.
template <int kMode>
__device__ __forceinline__ int source_index(int dst, float scale, int in_size, int identity) {
  if (identity) return dst;
  const float d = __int2float_rn(dst);
  const float x = kMode == kNearest ? __fmul_rn(d, scale) : __fmul_rn(__fadd_rn(d, 0.5f), scale);
  return min(static_cast<int>(floorf(x)), in_size - 1);
}

/// Backward window start: grad_input element i sums grad_output [start(i), start(i + 1)), start(i) =
/// min(ceil(i * scale), out) (nearest-exact: ceil(i * scale - 0.5), one rounding as nvcc contracts it to an FMA).
template <int kMode>
__device__ __forceinline__ int window_start(int i, float scale, int out_size, int identity) {
  if (identity) return i;
  const float d = __int2float_rn(i);
  const float x = kMode == kNearest ? __fmul_rn(d, scale) : __fmaf_rn(d, scale, -0.5f);
  return min(static_cast<int>(ceilf(x)), out_size);
}

/// The grad_input index whose window holds grad_output index d, or -1 when no window does.
template <int kMode>
__device__ __forceinline__ int window_owner(int d, float scale, int in_size, int out_size, int identity) {
  if (identity) return d;
  const float guess = floorf(__fdiv_rn(__int2float_rn(d) + (kMode == kNearest ? 0.0f : 0.5f), scale));
  int i = static_cast<int>(fminf(fmaxf(guess, 0.0f), static_cast<float>(in_size - 1)));
  while (i > 0 && window_start<kMode>(i, scale, out_size, 0) > d) --i;
  while (i + 1 < in_size && window_start<kMode>(i + 1, scale, out_size, 0) <= d) ++i;
  const bool inside =
      window_start<kMode>(i, scale, out_size, 0) <= d && d < window_start<kMode>(i + 1, scale, out_size, 0);
  return inside ? i : -1;
}

/// Stores kCount consecutive elements from registers as aligned vector stores of at most 16 bytes.
template <class T, int kCount>
__device__ __forceinline__ void store_run(T* dst, const T* values) {
  constexpr int kChunk = kCount * sizeof(T) <= 16 ? kCount : 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < kCount / kChunk; ++c) {
    Pack<T, kChunk> v;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) v.v[k] = values[c * kChunk + k];
    reinterpret_cast<Pack<T, kChunk>*>(dst)[c] = v;
  }
}

/// Loads kCount consecutive elements into registers as aligned vector loads of at most 16 bytes.
template <class T, int kCount>
__device__ __forceinline__ void load_run(const T* src, T* values) {
  constexpr int kChunk = kCount * sizeof(T) <= 16 ? kCount : 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < kCount / kChunk; ++c) {
    const Pack<T, kChunk> v = reinterpret_cast<const Pack<T, kChunk>*>(src)[c];
#pragma unroll
    for (int k = 0; k < kChunk; ++k) values[c * kChunk + k] = v.v[k];
  }
}

// Tunables shared by the kernels (host names in brackets):
//   kPack   [pack]:   elements per vector access, kPack * sizeof(T) <= 16 bytes; 1, 2, 4, 8. What a pack is: NCHW
//                     2x forward: input elements of a row (written as 2 * kPack per output row); 2x backward and
//                     gather: grad_input elements of a row; general forward and scatter: output (grad_output)
//                     elements of a row; NHWC: channels of one pixel.
//   kBlock  [block]:  threads per block; 128, 256, 512, 1024.
//   kItems  [items]:  work units each thread loads before it stores, more bytes in flight; 1, 2, 4.
//   grid cap [waves]: set on the host, blocks <= waves * resident blocks per wave.
//   kStrategy [strategy]: general backward only, 0 gather, 1 scatter.
//   kWin, kUniform [window]: general backward gather only: window=1 unrolls the window loops to the longest
//                     window (kWin <= 4, by rule; kUniform where every window is kWin x kWin: a uniform 3x or 4x);
//                     window=0 (kWin 0) keeps the loops over PyTorch's window bounds.
//   kernel   [kernel]: which of these kernels runs (1: the 2x ones), chosen by rule, not tuned.
//   kCache   [cache]:  forward only: the L2 eviction priority of the input's loads (CacheHint: 0 normal, 1
//                      evict_last, which keeps the input, read by several outputs and often by the next call, in L2
//                      while the larger output streams through; 2 evict_first).
//   Index:            int when every index fits in 31 bits, long long otherwise (by rule).
// Grid-stride loop over the units; `body(u)` does one unit.

/// Forward for exact 2x in both dimensions.
template <class T, int kLayout, int kCache, int kPack, int kBlock, int kItems, class Index>
__global__ void __launch_bounds__(kBlock) forward_2x(Params p) {
  const T* __restrict__ src = static_cast<const T*>(p.src);
  T* __restrict__ dst = static_cast<T*>(p.dst);
  const Index units = static_cast<Index>(p.units);
  const Index w = static_cast<Index>(p.in_w);
  const Index tile = static_cast<Index>(kBlock) * kItems;
  // NCHW: a unit is kPack elements of one input row; NHWC: kPack channels of one input pixel.
  const Index per_row = kLayout == kNCHW ? w / kPack : static_cast<Index>(p.c) / kPack;
  // Units are consecutive packs of src; a src `shift` elements past a pack boundary is read as two aligned packs
  // realigned in registers, except the first and last unit, read element by element (nothing outside src).
  const int shift = p.src_shift;
  const Pack<T, kPack>* packs = reinterpret_cast<const Pack<T, kPack>*>(src - shift);
  for (Index base = static_cast<Index>(blockIdx.x) * tile + threadIdx.x; base < units;
       base += static_cast<Index>(gridDim.x) * tile) {
    Pack<T, kPack> x[kItems];
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const Index u = base + static_cast<Index>(it) * kBlock;
      if (u >= units) continue;
      if (shift == 0) {
        x[it] = load_hinted<kCache>(packs + u);
      } else if (u > 0 && u + 1 < units) {
        x[it] = realign(load_hinted<kCache>(packs + u), load_hinted<kCache>(packs + u + 1), shift);
      } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) x[it].v[k] = src[u * kPack + k];
      }
    }
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const Index u = base + static_cast<Index>(it) * kBlock;
      if (u >= units) continue;
      const Index row = u / per_row, j = u - row * per_row;
      if (kLayout == kNCHW) {
        // Input row `row` (= nc * H + h) feeds output rows 2 * row and 2 * row + 1 of width 2W.
        T pair[2 * kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) pair[2 * k] = pair[2 * k + 1] = x[it].v[k];
        T* out = dst + (2 * row) * (2 * w) + 2 * j * kPack;
        store_run<T, 2 * kPack>(out, pair);
        store_run<T, 2 * kPack>(out + 2 * w, pair);
      } else {
        // Input pixel `row` (= (n * H + h) * W + x) feeds output pixels (2h, 2x), (2h, 2x + 1), (2h + 1, ...).
        const Index c = static_cast<Index>(p.c);
        const Index r = row / w, col = row - r * w;
        T* out = dst + ((2 * r) * (2 * w) + 2 * col) * c + j * kPack;
        Pack<T, kPack>* o0 = reinterpret_cast<Pack<T, kPack>*>(out);
        Pack<T, kPack>* o1 = reinterpret_cast<Pack<T, kPack>*>(out + c);
        Pack<T, kPack>* o2 = reinterpret_cast<Pack<T, kPack>*>(out + 2 * w * c);
        Pack<T, kPack>* o3 = reinterpret_cast<Pack<T, kPack>*>(out + 2 * w * c + c);
        *o0 = x[it];
        *o1 = x[it];
        *o2 = x[it];
        *o3 = x[it];
      }
    }
  }
}

/// Forward for any scales: each output pack gathers its source elements.
template <class T, int kLayout, int kMode, int kCache, int kPack, int kBlock, int kItems, class Index>
__global__ void __launch_bounds__(kBlock) forward(Params p) {
  const T* __restrict__ src = static_cast<const T*>(p.src);
  T* __restrict__ dst = static_cast<T*>(p.dst);
  const Index units = static_cast<Index>(p.units);
  const int in_h = static_cast<int>(p.in_h), in_w = static_cast<int>(p.in_w);
  const int out_h = static_cast<int>(p.out_h), out_w = static_cast<int>(p.out_w);
  const Index tile = static_cast<Index>(kBlock) * kItems;
  const Index per_row = kLayout == kNCHW ? static_cast<Index>(out_w) / kPack : static_cast<Index>(p.c) / kPack;
  for (Index base = static_cast<Index>(blockIdx.x) * tile + threadIdx.x; base < units;
       base += static_cast<Index>(gridDim.x) * tile) {
    Pack<T, kPack> y[kItems];
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const Index u = base + static_cast<Index>(it) * kBlock;
      if (u >= units) continue;
      const Index row = u / per_row, j = u - row * per_row;
      if (kLayout == kNCHW) {
        // row = nc * out_h + oh.
        const Index nc = row / out_h;
        const int oh = static_cast<int>(row - nc * out_h);
        const int ih = source_index<kMode>(oh, p.scale_h, in_h, p.identity_h);
        const T* in_row = src + (nc * in_h + ih) * in_w;
#pragma unroll
        for (int k = 0; k < kPack; ++k)
          y[it].v[k] = load_hinted<kCache>(
              in_row + source_index<kMode>(static_cast<int>(j * kPack + k), p.scale_w, in_w, p.identity_w));
      } else {
        // row = (n * out_h + oh) * out_w + ow: one output pixel.
        const Index t = row / out_w;
        const int ow = static_cast<int>(row - t * out_w);
        const Index n = t / out_h;
        const int oh = static_cast<int>(t - n * out_h);
        const int ih = source_index<kMode>(oh, p.scale_h, in_h, p.identity_h);
        const int iw = source_index<kMode>(ow, p.scale_w, in_w, p.identity_w);
        const Index c = static_cast<Index>(p.c);
        y[it] = load_hinted<kCache>(reinterpret_cast<const Pack<T, kPack>*>(src + ((n * in_h + ih) * in_w + iw) * c) + j);
      }
    }
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const Index u = base + static_cast<Index>(it) * kBlock;
      if (u < units) reinterpret_cast<Pack<T, kPack>*>(dst)[u] = y[it];
    }
  }
}

/// Backward for exact 2x in both dimensions: each grad_input pack sums its 2x2 blocks, no atomics.
template <class T, int kLayout, int kPack, int kBlock, int kItems, class Index>
__global__ void __launch_bounds__(kBlock) backward_2x(Params p) {
  const T* __restrict__ src = static_cast<const T*>(p.src);
  T* __restrict__ dst = static_cast<T*>(p.dst);
  const Index units = static_cast<Index>(p.units);
  const Index w = static_cast<Index>(p.in_w);
  const Index tile = static_cast<Index>(kBlock) * kItems;
  const Index per_row = kLayout == kNCHW ? w / kPack : static_cast<Index>(p.c) / kPack;
  for (Index base = static_cast<Index>(blockIdx.x) * tile + threadIdx.x; base < units;
       base += static_cast<Index>(gridDim.x) * tile) {
    float acc[kItems][kPack];
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const Index u = base + static_cast<Index>(it) * kBlock;
      if (u >= units) continue;
      const Index row = u / per_row, j = u - row * per_row;
      if (kLayout == kNCHW) {
        // grad_input row `row` sums grad_output rows 2 * row and 2 * row + 1, columns [2 j kPack, 2 (j + 1) kPack).
        const T* g = src + (2 * row) * (2 * w) + 2 * j * kPack;
        T top[2 * kPack], bottom[2 * kPack];
        load_run<T, 2 * kPack>(g, top);
        load_run<T, 2 * kPack>(g + 2 * w, bottom);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          float s = 0.0f;
          s += to_float(top[2 * k]);
          s += to_float(top[2 * k + 1]);
          s += to_float(bottom[2 * k]);
          s += to_float(bottom[2 * k + 1]);
          acc[it][k] = s;
        }
      } else {
        const Index c = static_cast<Index>(p.c);
        const Index r = row / w, col = row - r * w;
        const T* g = src + ((2 * r) * (2 * w) + 2 * col) * c + j * kPack;
        const Pack<T, kPack> a = *reinterpret_cast<const Pack<T, kPack>*>(g);
        const Pack<T, kPack> b = *reinterpret_cast<const Pack<T, kPack>*>(g + c);
        const Pack<T, kPack> d = *reinterpret_cast<const Pack<T, kPack>*>(g + 2 * w * c);
        const Pack<T, kPack> e = *reinterpret_cast<const Pack<T, kPack>*>(g + 2 * w * c + c);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          float s = 0.0f;
          s += to_float(a.v[k]);
          s += to_float(b.v[k]);
          s += to_float(d.v[k]);
          s += to_float(e.v[k]);
          acc[it][k] = s;
        }
      }
    }
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const Index u = base + static_cast<Index>(it) * kBlock;
      if (u >= units) continue;
      Pack<T, kPack> y;
#pragma unroll
      for (int k = 0; k < kPack; ++k) y.v[k] = from_float<T>(acc[it][k]);
      reinterpret_cast<Pack<T, kPack>*>(dst)[u] = y;
    }
  }
}

/// Backward for any scales. kStrategy 0: gather, each grad_input pack sums its windows (no atomics).
/// kStrategy 1: scatter, each grad_output pack is added to its owners with the fast atomic add (dst pre-zeroed).
/// kWin > 0 (gather only, by rule): no window is longer than kWin along either dimension; the window loops are
/// unrolled to kWin x kWin and every load of a unit is issued before its sums (past a shorter window: zeros, which
/// leave the float sum unchanged: it starts at +0 and so is never -0). kUniform: every window is exactly kWin x kWin
/// at (kWin i, kWin j) (no bounds computed, no loads masked).
template <class T, int kLayout, int kMode, int kStrategy, int kWin, int kUniform, int kPack, int kBlock, int kItems,
          class Index>
__global__ void __launch_bounds__(kBlock) backward(Params p) {
  static_assert(kWin == 0 || kStrategy == 0, "unrolled windows are the gather's");
  const T* __restrict__ src = static_cast<const T*>(p.src);
  T* __restrict__ dst = static_cast<T*>(p.dst);
  const Index units = static_cast<Index>(p.units);
  const int in_h = static_cast<int>(p.in_h), in_w = static_cast<int>(p.in_w);
  const int out_h = static_cast<int>(p.out_h), out_w = static_cast<int>(p.out_w);
  const Index c = static_cast<Index>(p.c);
  const Index tile = static_cast<Index>(kBlock) * kItems;
  for (Index base = static_cast<Index>(blockIdx.x) * tile + threadIdx.x; base < units;
       base += static_cast<Index>(gridDim.x) * tile) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const Index u = base + static_cast<Index>(it) * kBlock;
      if (u >= units) continue;
      if constexpr (kWin > 0) {
        T v[kWin][kWin][kPack];  // the unit's windows, element k's at [y][x][k]; zeros past a shorter window
        const T zero = from_float<T>(0.0f);
        if constexpr (kLayout == kNCHW) {
          // grad_input row `row` = nc * in_h + ih, columns [j kPack, (j + 1) kPack): scalar loads of grad_output
          // (no alignment asked of it), all in flight.
          const Index per_row = static_cast<Index>(in_w) / kPack;
          const Index row = u / per_row, j = u - row * per_row;
          const Index nc = row / in_h;
          const int ih = static_cast<int>(row - nc * in_h);
          const int y0 = kUniform ? ih * kWin : window_start<kMode>(ih, p.scale_h, out_h, p.identity_h);
          const int rows = kUniform ? kWin : window_start<kMode>(ih + 1, p.scale_h, out_h, p.identity_h) - y0;
          int x0[kPack + 1];  // the pack's window starts, and the next column's
#pragma unroll
          for (int k = 0; k <= kPack; ++k) {
            const int iw = static_cast<int>(j * kPack + k);
            x0[k] = kUniform ? iw * kWin : window_start<kMode>(iw, p.scale_w, out_w, p.identity_w);
          }
          const T* g = src + (nc * out_h + y0) * out_w;
#pragma unroll
          for (int y = 0; y < kWin; ++y)
#pragma unroll
            for (int k = 0; k < kPack; ++k)
#pragma unroll
              for (int x = 0; x < kWin; ++x)
                v[y][x][k] = kUniform || (y < rows && x0[k] + x < x0[k + 1])
                                 ? g[static_cast<Index>(y) * out_w + x0[k] + x]
                                 : zero;
        } else {
          // u walks grad_input channel packs of pixel (n, ih, iw): kWin x kWin packs of grad_output at most.
          const Index per_pixel = c / kPack;
          const Index pixel = u / per_pixel, j = u - pixel * per_pixel;
          const Index t = pixel / in_w;
          const int iw = static_cast<int>(pixel - t * in_w);
          const Index n = t / in_h;
          const int ih = static_cast<int>(t - n * in_h);
          const int y0 = kUniform ? ih * kWin : window_start<kMode>(ih, p.scale_h, out_h, p.identity_h);
          const int x0 = kUniform ? iw * kWin : window_start<kMode>(iw, p.scale_w, out_w, p.identity_w);
          const int rows = kUniform ? kWin : window_start<kMode>(ih + 1, p.scale_h, out_h, p.identity_h) - y0;
          const int cols = kUniform ? kWin : window_start<kMode>(iw + 1, p.scale_w, out_w, p.identity_w) - x0;
          const T* g = src + ((n * out_h + y0) * out_w + x0) * c + j * kPack;
#pragma unroll
          for (int y = 0; y < kWin; ++y)
#pragma unroll
            for (int x = 0; x < kWin; ++x) {
              Pack<T, kPack> q;
              if (kUniform || (y < rows && x < cols))
                q = *reinterpret_cast<const Pack<T, kPack>*>(g + (static_cast<Index>(y) * out_w + x) * c);
              else {
#pragma unroll
                for (int k = 0; k < kPack; ++k) q.v[k] = zero;
              }
#pragma unroll
              for (int k = 0; k < kPack; ++k) v[y][x][k] = q.v[k];
            }
        }
        Pack<T, kPack> out;
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          float acc = 0.0f;
#pragma unroll
          for (int y = 0; y < kWin; ++y)
#pragma unroll
            for (int x = 0; x < kWin; ++x) acc += to_float(v[y][x][k]);
          out.v[k] = from_float<T>(acc);
        }
        reinterpret_cast<Pack<T, kPack>*>(dst)[u] = out;
      } else if (kStrategy == 0 && kLayout == kNCHW) {
        // u walks grad_input packs: row = nc * in_h + ih, columns [j kPack, (j + 1) kPack).
        const Index per_row = static_cast<Index>(in_w) / kPack;
        const Index row = u / per_row, j = u - row * per_row;
        const Index nc = row / in_h;
        const int ih = static_cast<int>(row - nc * in_h);
        const int y0 = window_start<kMode>(ih, p.scale_h, out_h, p.identity_h);
        const int y1 = window_start<kMode>(ih + 1, p.scale_h, out_h, p.identity_h);
        int x[kPack + 1];
#pragma unroll
        for (int k = 0; k <= kPack; ++k)
          x[k] = window_start<kMode>(static_cast<int>(j * kPack + k), p.scale_w, out_w, p.identity_w);
        float acc[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) acc[k] = 0.0f;
        // Window lengths are data: keep these loops rolled (unrolling them only adds registers).
#pragma unroll 1
        for (int y = y0; y < y1; ++y) {
          const T* g = src + (nc * out_h + y) * out_w;
#pragma unroll
          for (int k = 0; k < kPack; ++k)
#pragma unroll 1
            for (int xx = x[k]; xx < x[k + 1]; ++xx) acc[k] += to_float(g[xx]);
        }
        Pack<T, kPack> out;
#pragma unroll
        for (int k = 0; k < kPack; ++k) out.v[k] = from_float<T>(acc[k]);
        reinterpret_cast<Pack<T, kPack>*>(dst)[u] = out;
      } else if (kStrategy == 0) {
        // u walks grad_input channel packs: pixel (n, ih, iw), channels [j kPack, (j + 1) kPack).
        const Index per_pixel = c / kPack;
        const Index pixel = u / per_pixel, j = u - pixel * per_pixel;
        const Index t = pixel / in_w;
        const int iw = static_cast<int>(pixel - t * in_w);
        const Index n = t / in_h;
        const int ih = static_cast<int>(t - n * in_h);
        const int y0 = window_start<kMode>(ih, p.scale_h, out_h, p.identity_h);
        const int y1 = window_start<kMode>(ih + 1, p.scale_h, out_h, p.identity_h);
        const int x0 = window_start<kMode>(iw, p.scale_w, out_w, p.identity_w);
        const int x1 = window_start<kMode>(iw + 1, p.scale_w, out_w, p.identity_w);
        float acc[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) acc[k] = 0.0f;
#pragma unroll 1
        for (int y = y0; y < y1; ++y)
#pragma unroll 1
          for (int xx = x0; xx < x1; ++xx) {
            const Pack<T, kPack> g =
                reinterpret_cast<const Pack<T, kPack>*>(src + ((n * out_h + y) * out_w + xx) * c)[j];
#pragma unroll
            for (int k = 0; k < kPack; ++k) acc[k] += to_float(g.v[k]);
          }
        Pack<T, kPack> out;
#pragma unroll
        for (int k = 0; k < kPack; ++k) out.v[k] = from_float<T>(acc[k]);
        reinterpret_cast<Pack<T, kPack>*>(dst)[u] = out;
      } else if (kLayout == kNCHW) {
        // u walks grad_output packs: row = nc * out_h + oh, columns [j kPack, (j + 1) kPack).
        const Index per_row = static_cast<Index>(out_w) / kPack;
        const Index row = u / per_row, j = u - row * per_row;
        const Index nc = row / out_h;
        const int oh = static_cast<int>(row - nc * out_h);
        const int ih = window_owner<kMode>(oh, p.scale_h, in_h, out_h, p.identity_h);
        if (ih < 0) continue;
        const Pack<T, kPack> g = reinterpret_cast<const Pack<T, kPack>*>(src)[u];
        const Index in_row = (nc * in_h + ih) * in_w;
        // Owners are non-decreasing along the row: sum runs of one owner in float, one atomic per run.
        int owner = -1;
        float run = 0.0f;
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          const int iw = window_owner<kMode>(static_cast<int>(j * kPack + k), p.scale_w, in_w, out_w, p.identity_w);
          if (iw != owner) {
            if (owner >= 0)
              fast_atomic_add(dst, static_cast<long long>(in_row + owner), p.dst_numel, from_float<T>(run));
            owner = iw;
            run = 0.0f;
          }
          run += to_float(g.v[k]);
        }
        if (owner >= 0) fast_atomic_add(dst, static_cast<long long>(in_row + owner), p.dst_numel, from_float<T>(run));
      } else {
        // u walks grad_output channel packs: pixel (n, oh, ow), channels [j kPack, (j + 1) kPack).
        const Index per_pixel = c / kPack;
        const Index pixel = u / per_pixel, j = u - pixel * per_pixel;
        const Index t = pixel / out_w;
        const int ow = static_cast<int>(pixel - t * out_w);
        const Index n = t / out_h;
        const int oh = static_cast<int>(t - n * out_h);
        const int ih = window_owner<kMode>(oh, p.scale_h, in_h, out_h, p.identity_h);
        const int iw = window_owner<kMode>(ow, p.scale_w, in_w, out_w, p.identity_w);
        if (ih < 0 || iw < 0) continue;
        const Pack<T, kPack> g = reinterpret_cast<const Pack<T, kPack>*>(src)[u];
        const Index at = ((n * in_h + ih) * in_w + iw) * c + j * kPack;
#pragma unroll
        for (int k = 0; k < kPack; ++k) fast_atomic_add(dst, static_cast<long long>(at + k), p.dst_numel, g.v[k]);
      }
    }
  }
}

}  // namespace upn
}  // namespace jitune
