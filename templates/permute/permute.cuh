// Permute kernels: OneFlow's permute, made tunable. The host simplifies every call first (size-1 dims
// dropped, dims that stay adjacent and in order merged, the widest legal movement unit chosen), so the
// kernels see at most 8 dims of "units" of 1 to 16 bytes and never look at the element type: they move bytes.
//
// permute_general: each thread writes kRows output units per iteration of a grid-stride loop; output offset
// ->
//   output index -> input offset through precomputed divisors and strides. Always legal; coalesced on both
//   sides when the last dim stays (units up to 16 bytes).
// permute_tiled: the last input dim moves. The plane (R, C) is cut into kTile x kTile tiles: C is the input's
//   contiguous dim, R the input dim that becomes the output's contiguous dim, every other dim is a batch dim
//   with its own input and output strides. A tile is read along C (kVec units per access), staged in shared
//   memory whose rows are padded by one unit against bank conflicts, and written along R (kVec units per
//   access). No batch dim is the 2-D (1,0) transpose, one the batched (0,2,1) transpose; (0,2,3,1),
//   (0,3,1,2), (4,3,2,1,0), ... are the same kernel with more batch dims. kVec = 2 with 2-byte units is the
//   half2 "movement 2" trick.
#pragma once

#include "common/types.cuh"
#include "permute/permute_params.cuh"

namespace jitune {
namespace pmt {

/// The storage type that moves kBytes as one access.
template <int kBytes>
struct UnitOf;
template <>
struct UnitOf<1> {
  typedef unsigned char type;
};
template <>
struct UnitOf<2> {
  typedef unsigned short type;
};
template <>
struct UnitOf<4> {
  typedef unsigned int type;
};
template <>
struct UnitOf<8> {
  typedef uint2 type;
};
template <>
struct UnitOf<16> {
  typedef uint4 type;
};

/// Programmatic dependent launch: on sm_90+ the runtime lets a permute kernel be scheduled while the stream's
/// previous kernel drains (LaunchShape::programmatic). This returns once that kernel has finished and its
/// writes are visible, so nothing before it may read the input or write the output (the previous kernel may
/// still be producing one or reading the other). A no-op for a normal launch.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// n / d: a multiply-high and a shift for 32-bit indices, a division for 64-bit ones.
template <class Index>
__device__ __forceinline__ Index divide(Index n, const Divisor& d);

template <>
__device__ __forceinline__ unsigned divide<unsigned>(unsigned n, const Divisor& d) {
  return (__umulhi(n, static_cast<unsigned>(d.magic)) + n) >> static_cast<unsigned>(d.magic >> 32);
}

template <>
__device__ __forceinline__ unsigned long long divide<unsigned long long>(unsigned long long n,
                                                                         const Divisor& d) {
  return n / d.value;
}

/// Input offset of output unit `o`.
template <int kRank, class Index>
__device__ __forceinline__ Index source_offset(Index o, const GeneralParams& p) {
  Index src = 0;
#pragma unroll
  for (int k = kRank - 1; k > 0; --k) {
    const Index q = divide<Index>(o, p.dims[k]);
    src += (o - q * static_cast<Index>(p.dims[k].value)) * static_cast<Index>(p.in_strides[k]);
    o = q;
  }
  return src + o * static_cast<Index>(p.in_strides[0]);
}

// Tunables (host names in brackets):
//   kBytes [movement]: bytes per unit, 1, 2, 4, 8, 16: the element size, or wider when the last dim stays and
//   its
//                      bytes (and both pointers) allow.
//   kRank:             dims after simplification, 1-8 (by rule, not tuned).
//   kRows  [rows]:     units each thread loads before storing, 1-16 (bytes in flight).
//   kBlock [block]:    threads per block, 64-1024.
//   grid cap [waves]:  set on the host, blocks <= waves * resident blocks per wave.
//   Index:             unsigned when every unit offset fits in 31 bits, unsigned long long otherwise (by
//   rule).
template <int kBytes, int kRank, int kRows, int kBlock, class Index>
__global__ void __launch_bounds__(kBlock) permute_general(const GeneralParams p) {
  typedef typename UnitOf<kBytes>::type Unit;
  const Unit* __restrict__ in = reinterpret_cast<const Unit*>(p.in);
  Unit* __restrict__ out = reinterpret_cast<Unit*>(p.out);
  const Index count = static_cast<Index>(p.count);
  const Index step = static_cast<Index>(gridDim.x) * static_cast<Index>(kBlock * kRows);
  wait_for_previous_kernel();
  for (Index base = static_cast<Index>(blockIdx.x) * static_cast<Index>(kBlock * kRows) + threadIdx.x;
       base < count; base += step) {
    Unit v[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      const Index o = base + static_cast<Index>(u * kBlock);
      if (o < count) v[u] = in[source_offset<kRank, Index>(o, p)];
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      const Index o = base + static_cast<Index>(u * kBlock);
      if (o < count) out[o] = v[u];
    }
  }
}

/// Where one tile of the tiled kernel reads and writes: batch bases and the tile's first row and column.
template <class Index>
struct TileSpot {
  Index in_base, out_base, r0, c0;
};

template <int kTile, int kBatchRank, class Index>
__device__ __forceinline__ TileSpot<Index> locate_tile(Index t, const TiledParams& p) {
  Index b = divide<Index>(t, p.plane_tiles);
  const Index in_plane = t - b * static_cast<Index>(p.plane_tiles.value);
  const Index band = divide<Index>(in_plane, p.band_tiles);
  const Index in_band = in_plane - band * static_cast<Index>(p.band_tiles.value);
  // Field by field: selecting between two parameters by reference would copy the parameters to local memory.
  const bool full = band < static_cast<Index>(p.full_bands);
  Divisor band_rows;
  band_rows.value = full ? p.band_rows.value : p.last_rows.value;
  band_rows.magic = full ? p.band_rows.magic : p.last_rows.magic;
  const Index tc = divide<Index>(in_band, band_rows);
  const Index tr =
      band * static_cast<Index>(p.band_rows.value) + (in_band - tc * static_cast<Index>(band_rows.value));
  TileSpot<Index> s;
  s.in_base = 0;
  s.out_base = 0;
#pragma unroll
  for (int k = kBatchRank - 1; k > 0; --k) {
    const Index q = divide<Index>(b, p.batch[k]);
    const Index i = b - q * static_cast<Index>(p.batch[k].value);
    s.in_base += i * static_cast<Index>(p.in_batch_strides[k]);
    s.out_base += i * static_cast<Index>(p.out_batch_strides[k]);
    b = q;
  }
  if (kBatchRank > 0) {
    s.in_base += b * static_cast<Index>(p.in_batch_strides[0]);
    s.out_base += b * static_cast<Index>(p.out_batch_strides[0]);
  }
  s.r0 = tr * kTile;
  s.c0 = tc * kTile;
  return s;
}

// Tunables (host names in brackets):
//   kBytes [movement]: bytes per unit, 1-16 (the element size; 16 when a 16-byte last dim collapsed into one
//                      unit).
//   kVec   [vec]:      units per vector access along C (reads) and R (writes), kVec * kBytes <= 16; R and C
//                      are multiples of kVec and both pointers aligned to kVec * kBytes.
//   kTile  [tile]:     tile edge in units, 16, 32, 64, 128; shared memory kTile * (kTile + 1) * kBytes,
//                      dynamic above 48 KiB, within the device's opt-in limit.
//   kRows  [rows]:     tile rows each thread moves, 1-16; threads per block = (kTile / kVec) * (kTile / kRows).
//   kBatchRank:        batch dims, 0-6 (by rule).
//   grid cap [waves]:  set on the host; blocks loop over tiles.
//   tile order [group, batch_order]: set on the host (TiledParams): tile rows per band, and whether the batch
//                      index runs through the batch dims in input or in output order.
//   Index:             unsigned or unsigned long long (by rule, as above).
// A block that moves several tiles loads its next tile into registers before it writes the current one out,
// so its reads and writes overlap.
template <int kBytes, int kVec, int kTile, int kRows, int kBatchRank, class Index>
// The launch bound's minimum of one block per SM lets ptxas keep the prefetched tile in registers: with the
// threads alone as the bound, it aims at full occupancy and spills.
__global__ void __launch_bounds__((kTile / kVec) * (kTile / kRows), 1) permute_tiled(const TiledParams p) {
  typedef typename UnitOf<kBytes>::type Unit;
  typedef Pack<Unit, kVec> Vec;
  constexpr int kLanes = kTile / kVec;  // threads along a tile row, one vector each
  constexpr int kStep = kTile / kRows;  // tile rows one pass of the block covers
  // Tiles over 48 KiB (128 x 128 of 4- or 8-byte units) live in dynamic shared memory the host opts into
  // (LaunchShape::shared_bytes); the others are static.
  Unit(*tile)[kTile + 1];
  if constexpr (kTile * (kTile + 1) * kBytes > 48 * 1024) {
    extern __shared__ __align__(16) unsigned char dynamic_tile[];
    tile = reinterpret_cast<Unit(*)[kTile + 1]>(dynamic_tile);
  } else {
    __shared__ Unit static_tile[kTile][kTile + 1];
    tile = static_tile;
  }
  const Unit* __restrict__ in = reinterpret_cast<const Unit*>(p.in);
  Unit* __restrict__ out = reinterpret_cast<Unit*>(p.out);
  const int tx = static_cast<int>(threadIdx.x) % kLanes;
  const int ty = static_cast<int>(threadIdx.x) / kLanes;
  const Index rows = static_cast<Index>(p.rows), cols = static_cast<Index>(p.cols);
  const Index in_row_stride = static_cast<Index>(p.in_row_stride);
  const Index out_col_stride = static_cast<Index>(p.out_col_stride);
  const Index tiles = static_cast<Index>(p.tiles);

  Index t = blockIdx.x;
  if (t >= tiles) return;  // the whole block: no barrier is skipped by part of it
  TileSpot<Index> spot = locate_tile<kTile, kBatchRank, Index>(t, p);
  wait_for_previous_kernel();
  Vec v[kRows];
  // Reads along C: every load of a tile is issued before the first use of its registers.
  {
    const Index c = spot.c0 + static_cast<Index>(tx * kVec);
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const Index r = spot.r0 + static_cast<Index>(ty + k * kStep);
      if (r < rows && c < cols)
        v[k] = *reinterpret_cast<const Vec*>(in + (spot.in_base + r * in_row_stride + c));
    }
  }
  while (true) {
#pragma unroll
    for (int k = 0; k < kRows; ++k)
#pragma unroll
      for (int j = 0; j < kVec; ++j) tile[ty + k * kStep][tx * kVec + j] = v[k].v[j];
    __syncthreads();

    const Index next = t + gridDim.x;
    const bool more = next < tiles;  // the same for the whole block
    TileSpot<Index> next_spot = spot;
    if (more) {
      next_spot = locate_tile<kTile, kBatchRank, Index>(next, p);
      const Index c = next_spot.c0 + static_cast<Index>(tx * kVec);
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const Index r = next_spot.r0 + static_cast<Index>(ty + k * kStep);
        if (r < rows && c < cols)
          v[k] = *reinterpret_cast<const Vec*>(in + (next_spot.in_base + r * in_row_stride + c));
      }
    }

    // Writes along R: output row = input column. Out-of-range tile cells are never read back.
    {
      const Index r = spot.r0 + static_cast<Index>(tx * kVec);
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const Index c = spot.c0 + static_cast<Index>(ty + k * kStep);
        if (r < rows && c < cols) {
          Vec w;
#pragma unroll
          for (int j = 0; j < kVec; ++j) w.v[j] = tile[tx * kVec + j][ty + k * kStep];
          *reinterpret_cast<Vec*>(out + (spot.out_base + c * out_col_stride + r)) = w;
        }
      }
    }
    if (!more) break;
    __syncthreads();
    t = next;
    spot = next_spot;
  }
}

// Tunables (host names in brackets), for 2-byte units ([movement] = 2) only:
//   kVec   [vec]:      2-byte units per read along C and per write along R, 2, 4, 8; R and C multiples of
//   kVec. kTile  [tile]:     tile edge in units, 16-128; shared memory kTile * (kTile / 2 + 1) * 4 <= 48 KiB.
//   kRows  [rows]:     row pairs each thread reads (it writes 2 * kRows output rows); threads per block =
//                      (kTile / kVec) * (kTile / (2 * kRows)).
//   kBatchRank, Index, grid cap and tile order as for permute_tiled.
// The half2 trick done fully: a thread reads rows r and r+1 (r even) at the same columns and packs each
// column's pair into one 32-bit word, which is exactly two neighbouring output elements (out[c][r],
// out[c][r+1]). Shared memory holds these words already transposed ([column][row pair], padded by one word),
// so both shared-memory passes move 32-bit words and the output is written kVec units at a time.
template <int kVec, int kTile, int kRows, int kBatchRank, class Index>
__global__ void __launch_bounds__((kTile / kVec) * (kTile / (2 * kRows)), 1)
    permute_tiled_pairs(const TiledParams p) {
  typedef Pack<unsigned short, kVec> In;
  typedef Pack<unsigned, kVec / 2> Out;
  constexpr int kLanes = kTile / kVec;      // threads along a tile row (reads) or an output row (writes)
  constexpr int kStep = kTile / 2 / kRows;  // row pairs (reads) or output rows (writes) one pass covers
  __shared__ unsigned tile[kTile][kTile / 2 + 1];
  const unsigned short* __restrict__ in = reinterpret_cast<const unsigned short*>(p.in);
  unsigned short* __restrict__ out = reinterpret_cast<unsigned short*>(p.out);
  const int tx = static_cast<int>(threadIdx.x) % kLanes;
  const int ty = static_cast<int>(threadIdx.x) / kLanes;
  const Index rows = static_cast<Index>(p.rows), cols = static_cast<Index>(p.cols);
  const Index in_row_stride = static_cast<Index>(p.in_row_stride);
  const Index out_col_stride = static_cast<Index>(p.out_col_stride);
  const Index tiles = static_cast<Index>(p.tiles);

  Index t = blockIdx.x;
  if (t >= tiles) return;  // the whole block
  TileSpot<Index> spot = locate_tile<kTile, kBatchRank, Index>(t, p);
  wait_for_previous_kernel();
  In lo[kRows], hi[kRows];
  {
    const Index c = spot.c0 + static_cast<Index>(tx * kVec);
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const Index r = spot.r0 + static_cast<Index>(2 * (ty + k * kStep));
      if (r < rows && c < cols) {
        const Index at = spot.in_base + r * in_row_stride + c;
        lo[k] = *reinterpret_cast<const In*>(in + at);
        hi[k] = *reinterpret_cast<const In*>(in + (at + in_row_stride));
      }
    }
  }
  while (true) {
#pragma unroll
    for (int k = 0; k < kRows; ++k)
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        tile[tx * kVec + j][ty + k * kStep] =
            static_cast<unsigned>(lo[k].v[j]) | (static_cast<unsigned>(hi[k].v[j]) << 16);
    __syncthreads();

    const Index next = t + gridDim.x;
    const bool more = next < tiles;
    TileSpot<Index> next_spot = spot;
    if (more) {
      next_spot = locate_tile<kTile, kBatchRank, Index>(next, p);
      const Index c = next_spot.c0 + static_cast<Index>(tx * kVec);
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const Index r = next_spot.r0 + static_cast<Index>(2 * (ty + k * kStep));
        if (r < rows && c < cols) {
          const Index at = next_spot.in_base + r * in_row_stride + c;
          lo[k] = *reinterpret_cast<const In*>(in + at);
          hi[k] = *reinterpret_cast<const In*>(in + (at + in_row_stride));
        }
      }
    }

    // Output row = input column c; kVec units (kVec / 2 words) along R per thread.
    {
      const int word = tx * (kVec / 2);
      const Index r = spot.r0 + static_cast<Index>(2 * word);
#pragma unroll
      for (int m = 0; m < 2 * kRows; ++m) {
        const int column = ty + m * kStep;
        const Index c = spot.c0 + static_cast<Index>(column);
        if (r < rows && c < cols) {
          Out w;
#pragma unroll
          for (int q = 0; q < kVec / 2; ++q) w.v[q] = tile[column][word + q];
          *reinterpret_cast<Out*>(out + (spot.out_base + c * out_col_stride + r)) = w;
        }
      }
    }
    if (!more) break;
    __syncthreads();
    t = next;
    spot = next_spot;
  }
}

}  // namespace pmt
}  // namespace jitune
