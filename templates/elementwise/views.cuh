// Elementwise over views (issue 21): the operands of templates/elementwise/views.hpp's plan, each with its own
// strides over the merged shape (0 where it is broadcast). Three kernels:
//   gather: any layout; each element's index is split over the dims and every operand's offset summed.
//   rows:   the "rows" and "broadcast_column" classes: the inner dim is dense (stride 1) or constant (stride 0) for
//           every operand; threads walk each row with kPack-element vector accesses where every dense operand's row
//           start is aligned to the pack (checked per row: a sliced view's rows may not be), scalar otherwise.
//   tiled:  the "inner_transpose" class: 32 x 32 tiles over dim kT (where the transposed inputs are dense) and the
//           inner dim (where the output is dense); transposed inputs are read along kT into shared memory and used
//           along the inner dim, the others read directly, so every global access is coalesced.
#pragma once

#include "common/types.cuh"

namespace jitune {
namespace ewv {

/// Kernel parameters: the output and kArity inputs, kDims merged dims (outermost first).
template <class T, int kArity, int kDims>
struct ViewParams {
  T* out;
  const T* in[kArity];                  ///< Null for a scalar input.
  long long n;                          ///< Output elements.
  long long shape[kDims];               ///< Merged sizes.
  long long stride[kArity + 1][kDims];  ///< Element strides: the output's, then each input's.
  float scalar[kArity];                 ///< The value of each scalar input (kScalars bit set), unused otherwise.
};

/// Input a's value at `offset`: its scalar when bit a of kScalars is set (a value passed with the call, no memory).
template <unsigned kScalars, class T, int kArity, int kDims, class Index>
__device__ __forceinline__ float load_input(const ViewParams<T, kArity, kDims>& p, int a, Index offset) {
  return (kScalars >> a) & 1u ? p.scalar[a] : to_float(p.in[a][offset]);
}

/// Every operand's offset for `index`, a row-major index over dims 0..kLast: split over those dims (the
/// outermost takes what is left) and summed with each operand's strides.
template <int kArity, int kLast, class Index, class P>
__device__ __forceinline__ void split_index(const P& p, Index index, Index (&at)[kArity + 1]) {
#pragma unroll
  for (int a = 0; a <= kArity; ++a) at[a] = 0;
#pragma unroll
  for (int d = kLast; d >= 0; --d) {
    const Index size = static_cast<Index>(p.shape[d]);
    const Index i = d == 0 ? index : index % size;
    index = d == 0 ? 0 : index / size;
#pragma unroll
    for (int a = 0; a <= kArity; ++a) at[a] += i * static_cast<Index>(p.stride[a][d]);
  }
}

// Tunables (host names in brackets):
//   kBlock  [block]:  threads per block; 128, 256, 512, 1024.
//   kUnroll [unroll]: elements (gather) or packs (rows) each thread loads before computing; 1, 2, 4.
//   kPack   [pack]:   rows only: elements per vector access, kPack * sizeof(T) <= 16 bytes; 1, 2, 4, 8.
//   grid cap [waves]: set on the host, blocks <= waves * resident blocks per wave.
//   Index:            int when every offset and index fits in 31 bits, long long otherwise (by rule).
//   kScalars:         bit a set when input a is a scalar passed with the call (by the problem, not tuned).
// Op: a functor `float operator()(const float* v) const` over the kArity input values.
template <class Op, class T, int kArity, int kDims, int kBlock, int kUnroll, class Index, unsigned kScalars>
__global__ void __launch_bounds__(kBlock) gather(ViewParams<T, kArity, kDims> p) {
  const Op op;
  const Index n = static_cast<Index>(p.n);
  const Index tile = static_cast<Index>(kBlock) * kUnroll;
  for (Index base = static_cast<Index>(blockIdx.x) * tile + threadIdx.x; base < n;
       base += static_cast<Index>(gridDim.x) * tile) {
    float v[kUnroll][kArity];
    Index out_at[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index e = base + static_cast<Index>(u) * kBlock;
      out_at[u] = -1;
      if (e < n) {
        Index at[kArity + 1];
        split_index<kArity, kDims - 1>(p, e, at);
        out_at[u] = at[0];
#pragma unroll
        for (int a = 0; a < kArity; ++a) v[u][a] = load_input<kScalars>(p, a, at[a + 1]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (out_at[u] >= 0) p.out[out_at[u]] = from_float<T>(op(v[u]));
  }
}

template <class Op, class T, int kArity, int kDims, int kPack, int kBlock, int kUnroll, class Index,
          unsigned kScalars>
__global__ void __launch_bounds__(kBlock) rows(ViewParams<T, kArity, kDims> p) {
  static_assert(kDims >= 2, "rows needs an outer and an inner dim");
  const Op op;
  const Index cols = static_cast<Index>(p.shape[kDims - 1]);
  const Index rows_total = static_cast<Index>(p.n) / cols;
  // Blocks take whole rows in a grid-stride loop; a block's threads sweep the row in tiles of
  // kBlock * kUnroll * kPack elements.
  for (Index r = blockIdx.x; r < rows_total; r += gridDim.x) {
    Index at[kArity + 1];
    split_index<kArity, kDims - 2>(p, r, at);  // the row's start: an index over the outer dims
    T* out = p.out + at[0];
    const T* in[kArity];
    bool dense[kArity];
    float fixed[kArity];  // inputs constant along the row: one value
    bool aligned = cols % kPack == 0 && reinterpret_cast<unsigned long long>(out) % (sizeof(T) * kPack) == 0;
#pragma unroll
    for (int a = 0; a < kArity; ++a) {
      const bool scalar = (kScalars >> a) & 1u;
      in[a] = scalar ? nullptr : p.in[a] + at[a + 1];
      dense[a] = !scalar && p.stride[a + 1][kDims - 1] != 0;
      fixed[a] = dense[a] ? 0.0f : load_input<kScalars>(p, a, at[a + 1]);
      if (dense[a]) aligned = aligned && reinterpret_cast<unsigned long long>(in[a]) % (sizeof(T) * kPack) == 0;
    }
    if (kPack > 1 && aligned) {
      const Index packs = cols / kPack;
      for (Index c = threadIdx.x; c < packs; c += static_cast<Index>(kBlock) * kUnroll) {
        Pack<T, kPack> x[kUnroll][kArity];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const Index i = c + static_cast<Index>(u) * kBlock;
          if (i < packs) {
#pragma unroll
            for (int a = 0; a < kArity; ++a)
              if (dense[a]) x[u][a] = reinterpret_cast<const Pack<T, kPack>*>(in[a])[i];
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const Index i = c + static_cast<Index>(u) * kBlock;
          if (i < packs) {
            Pack<T, kPack> y;
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
              float v[kArity];
#pragma unroll
              for (int a = 0; a < kArity; ++a) v[a] = dense[a] ? to_float(x[u][a].v[k]) : fixed[a];
              y.v[k] = from_float<T>(op(v));
            }
            reinterpret_cast<Pack<T, kPack>*>(out)[i] = y;
          }
        }
      }
    } else {
      for (Index c = threadIdx.x; c < cols; c += kBlock) {
        float v[kArity];
#pragma unroll
        for (int a = 0; a < kArity; ++a) v[a] = dense[a] ? to_float(in[a][c]) : fixed[a];
        out[c] = from_float<T>(op(v));
      }
    }
  }
}

/// The tiled kernel's tile edge (elements).
constexpr int kViewTile = 32;

// kT: the dim along which the transposed inputs are dense (kT < kDims - 1). kRows: tile rows per pass of the
// block (block = 32 * kRows threads; each thread covers 32 / kRows rows of the tile).
template <class Op, class T, int kArity, int kDims, int kT, int kRows, class Index, unsigned kScalars>
__global__ void __launch_bounds__(kViewTile * kRows) tiled(ViewParams<T, kArity, kDims> p) {
  static_assert(kT >= 0 && kT < kDims - 1, "kT is an outer dim");
  constexpr int kInner = kDims - 1;
  __shared__ float tile[kArity][kViewTile][kViewTile + 1];  // [input][inner][kT], padded against bank conflicts
  const Op op;
  const int tx = static_cast<int>(threadIdx.x) % kViewTile, ty = static_cast<int>(threadIdx.x) / kViewTile;
  const Index rows = static_cast<Index>(p.shape[kT]), cols = static_cast<Index>(p.shape[kInner]);
  const Index tiles_r = (rows + kViewTile - 1) / kViewTile, tiles_c = (cols + kViewTile - 1) / kViewTile;
  Index batches = 1;
#pragma unroll
  for (int d = 0; d < kDims; ++d)
    if (d != kT && d != kInner) batches *= static_cast<Index>(p.shape[d]);
  bool transposed[kArity];
#pragma unroll
  for (int a = 0; a < kArity; ++a)
    transposed[a] = !((kScalars >> a) & 1u) && p.stride[a + 1][kT] == 1 && p.stride[a + 1][kInner] != 1 &&
                    p.stride[a + 1][kInner] != 0;
  for (Index t = blockIdx.x; t < batches * tiles_r * tiles_c; t += gridDim.x) {  // uniform per block: barriers ok
    const Index tc = t % tiles_c, tr = (t / tiles_c) % tiles_r;
    Index b = t / tiles_c / tiles_r;
    Index base[kArity + 1];
#pragma unroll
    for (int a = 0; a <= kArity; ++a) base[a] = 0;
#pragma unroll
    for (int d = kDims - 1; d >= 0; --d) {  // the batch index over every dim but kT and the inner one
      if (d == kT || d == kInner) continue;
      const Index size = static_cast<Index>(p.shape[d]);
      const Index i = b % size;
      b /= size;
#pragma unroll
      for (int a = 0; a <= kArity; ++a) base[a] += i * static_cast<Index>(p.stride[a][d]);
    }
    const Index r0 = tr * kViewTile, c0 = tc * kViewTile;
    // Transposed inputs: lanes along kT (their dense dim), into the tile.
#pragma unroll
    for (int a = 0; a < kArity; ++a) {
      if (!transposed[a]) continue;
      const Index r = r0 + tx;
#pragma unroll
      for (int k = 0; k < kViewTile / kRows; ++k) {
        const Index c = c0 + ty + k * kRows;
        if (r < rows && c < cols)
          tile[a][ty + k * kRows][tx] =
              to_float(p.in[a][base[a + 1] + r + c * static_cast<Index>(p.stride[a + 1][kInner])]);
      }
    }
    __syncthreads();
    // Every output element: lanes along the inner dim.
    const Index c = c0 + tx;
#pragma unroll
    for (int k = 0; k < kViewTile / kRows; ++k) {
      const int rl = ty + k * kRows;
      const Index r = r0 + rl;
      if (r < rows && c < cols) {
        float v[kArity];
#pragma unroll
        for (int a = 0; a < kArity; ++a)
          v[a] = transposed[a] ? tile[a][tx][rl]
                               : load_input<kScalars>(p, a, base[a + 1] + r * static_cast<Index>(p.stride[a + 1][kT]) +
                                                                c * static_cast<Index>(p.stride[a + 1][kInner]));
        p.out[base[0] + r * static_cast<Index>(p.stride[0][kT]) + c * static_cast<Index>(p.stride[0][kInner])] =
            from_float<T>(op(v));
      }
    }
    __syncthreads();  // the tile is reused by the block's next tile
  }
}

}  // namespace ewv
}  // namespace jitune
