// Elementwise over views (issue 21): the operands of templates/elementwise/views.hpp's plan, each with its own
// strides over the merged shape (0 where it is broadcast). Three kernels, and flat beside rows:
//   gather: any layout; each element's index is split over the dims and every operand's offset summed.
//   rows:   the "rows" and "broadcast_column" classes: the inner dim is dense (stride 1) or constant (stride 0) for
//           every operand; threads walk each row in kPack-element packs where the output's row start is aligned
//           to the pack, each input dense along the row reading its pack as one vector where its own row start is
//           aligned (checked per row: a sliced view's rows may not be) and element by element otherwise.
//   flat:   the same classes as one run of packs over the output (each pack's row found by division), tuned
//           against rows (config key flat).
//   tiled:  the "inner_transpose" class: square tiles over dim kT (where the transposed inputs are dense) and the
//           inner dim (where the output is dense); transposed inputs are read along kT in vectors into shared
//           memory and used along the inner dim, the others read in place, the output written in vectors, so every
//           global access is coalesced.
#pragma once

#include "common/pdl.cuh"
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
  wait_for_previous_kernel();
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

/// The rows kernel's sweep of one row in packs (the output row aligned to the pack). kMixed: some dense input is
/// misaligned in this row and reads its packs element by element (vector[a] false); otherwise every dense input
/// reads vectors.
template <bool kMixed, int kPack, int kBlock, int kUnroll, class Op, class T, int kArity, class Index>
__device__ __forceinline__ void row_packs(const Op& op, const T* const (&in)[kArity], T* out, const bool (&dense)[kArity],
                                          const bool (&vector)[kArity], const float (&fixed)[kArity], Index packs) {
  for (Index c = threadIdx.x; c < packs; c += static_cast<Index>(kBlock) * kUnroll) {
    Pack<T, kPack> x[kUnroll][kArity];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index i = c + static_cast<Index>(u) * kBlock;
      if (i < packs) {
#pragma unroll
        for (int a = 0; a < kArity; ++a) {
          if (!dense[a]) continue;
          if (!kMixed || vector[a]) {
            x[u][a] = reinterpret_cast<const Pack<T, kPack>*>(in[a])[i];
          } else {
#pragma unroll
            for (int k = 0; k < kPack; ++k) x[u][a].v[k] = in[a][i * kPack + k];
          }
        }
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
}

// kMixed (by rule, views_rows_mixed): some dense input's rows may be aligned differently from the output's (a
// sliced view's pitch that is not a multiple of the pack); such rows read that input element by element. Without
// it, a row whose operands are not all aligned goes element by element (only a misaligned pointer does that), and
// the kernel carries no second sweep (whose registers cost occupancy).
template <class Op, class T, int kArity, int kDims, int kPack, int kBlock, int kUnroll, class Index,
          unsigned kScalars, bool kMixed>
__global__ void __launch_bounds__(kBlock) rows(ViewParams<T, kArity, kDims> p) {
  static_assert(kDims >= 2, "rows needs an outer and an inner dim");
  const Op op;
  const Index cols = static_cast<Index>(p.shape[kDims - 1]);
  const Index rows_total = static_cast<Index>(p.n) / cols;
  // Blocks take whole rows in a grid-stride loop; a block's threads sweep the row in tiles of
  // kBlock * kUnroll * kPack elements.
  wait_for_previous_kernel();
  for (Index r = blockIdx.x; r < rows_total; r += gridDim.x) {
    Index at[kArity + 1];
    split_index<kArity, kDims - 2>(p, r, at);  // the row's start: an index over the outer dims
    T* out = p.out + at[0];
    const T* in[kArity];
    bool dense[kArity];
    bool vector[kArity];  // dense and aligned to the pack in this row: vector loads (a sliced row may not be)
    float fixed[kArity];  // inputs constant along the row: one value
    const bool aligned = cols % kPack == 0 && reinterpret_cast<unsigned long long>(out) % (sizeof(T) * kPack) == 0;
#pragma unroll
    for (int a = 0; a < kArity; ++a) {
      const bool scalar = (kScalars >> a) & 1u;
      in[a] = scalar ? nullptr : p.in[a] + at[a + 1];
      dense[a] = !scalar && p.stride[a + 1][kDims - 1] != 0;
      fixed[a] = dense[a] ? 0.0f : load_input<kScalars>(p, a, at[a + 1]);
      vector[a] = dense[a] && reinterpret_cast<unsigned long long>(in[a]) % (sizeof(T) * kPack) == 0;
    }
    // Packs where the output row is aligned: every dense input as one vector per pack where all are aligned in this
    // row (the common case, kept free of per-input branches), else (kMixed) each misaligned input element by element.
    bool all_vector = true;
#pragma unroll
    for (int a = 0; a < kArity; ++a) all_vector = all_vector && (vector[a] || !dense[a]);
    if (kPack > 1 && aligned && all_vector) {
      row_packs<false, kPack, kBlock, kUnroll>(op, in, out, dense, vector, fixed, cols / kPack);
    } else if (kMixed && kPack > 1 && aligned) {
      row_packs<true, kPack, kBlock, kUnroll>(op, in, out, dense, vector, fixed, cols / kPack);
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

/// The unsigned integer of an index's width (the flat kernel's offsets: unsigned division is the cheaper one).
template <int kBytes>
struct UnsignedOf {
  typedef unsigned long long type;
};
template <>
struct UnsignedOf<4> {
  typedef unsigned type;
};

// flat ([flat] = 1): the same classes as one run of packs over the output's elements in the plan's index order:
// pack i holds elements e = i * kPack on, of row e / cols (each operand's row start from split_index, in unsigned
// arithmetic) at column e % cols. No thread idles on short rows and no per-row setup sits between a thread's
// packs: Inductor's indexing of x.permute(0, 2, 1) * s + b in x's memory order. kDense (by the plan): bit a set
// when input a is dense along the row (a vector per pack), clear when it is constant there (one value per pack).
// The host allows it where rows are whole packs and every operand dense along the row has outer strides that are
// multiples of the pack; pointers off the pack's alignment go element by element (checked once per thread).
template <class Op, class T, int kArity, int kDims, int kPack, int kBlock, int kUnroll, class Index, unsigned kScalars,
          unsigned kDense>
__global__ void __launch_bounds__(kBlock) flat(ViewParams<T, kArity, kDims> p) {
  static_assert(kDims >= 2, "flat needs an outer and an inner dim");
  typedef Pack<T, kPack> P;
  typedef typename UnsignedOf<sizeof(Index)>::type U;
  const Op op;
  const U cols = static_cast<U>(p.shape[kDims - 1]);
  const U packs = static_cast<U>(p.n) / kPack;
  const U tile = static_cast<U>(kBlock) * kUnroll;
  bool vec = reinterpret_cast<unsigned long long>(p.out) % (sizeof(T) * kPack) == 0;
#pragma unroll
  for (int a = 0; a < kArity; ++a)
    if ((kDense >> a) & 1u) vec = vec && reinterpret_cast<unsigned long long>(p.in[a]) % (sizeof(T) * kPack) == 0;
  wait_for_previous_kernel();
  for (U base = static_cast<U>(blockIdx.x) * tile + threadIdx.x; base < packs;
       base += static_cast<U>(gridDim.x) * tile) {
    P x[kUnroll][kArity];
    float fixed[kUnroll][kArity];
    U out_at[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const U i = base + static_cast<U>(u) * kBlock;
      if (i >= packs) continue;
      const U e = i * kPack, row = e / cols, col = e - row * cols;
      U at[kArity + 1];
      split_index<kArity, kDims - 2>(p, row, at);
      out_at[u] = at[0] + col;
#pragma unroll
      for (int a = 0; a < kArity; ++a) {
        if (!((kDense >> a) & 1u)) {
          fixed[u][a] = load_input<kScalars>(p, a, at[a + 1]);
        } else if (vec) {
          x[u][a] = *reinterpret_cast<const P*>(p.in[a] + at[a + 1] + col);
        } else {
#pragma unroll
          for (int k = 0; k < kPack; ++k) x[u][a].v[k] = p.in[a][at[a + 1] + col + k];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + static_cast<U>(u) * kBlock >= packs) continue;
      P y;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        float v[kArity];
#pragma unroll
        for (int a = 0; a < kArity; ++a) v[a] = (kDense >> a) & 1u ? to_float(x[u][a].v[k]) : fixed[u][a];
        y.v[k] = from_float<T>(op(v));
      }
      if (vec) {
        *reinterpret_cast<P*>(p.out + out_at[u]) = y;
      } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) p.out[out_at[u] + k] = y.v[k];
      }
    }
  }
}

constexpr int popcount_bits(unsigned m) { return m == 0 ? 0 : static_cast<int>(m & 1u) + popcount_bits(m >> 1); }

/// Where one tile of the tiled kernel lies: each operand's offset of the tile's batch, and the tile's first row
/// (along kT) and column (along the inner dim).
template <int kArity, class Index>
struct ViewTileSpot {
  Index base[kArity + 1];
  Index r0, c0;
};

/// Tile t of the order: batch by batch; within a batch's plane, bands of kGroup tile rows, each band column by
/// column (kGroup = 1: row by row along the columns, where consecutive tiles write neighbouring output segments;
/// larger bands also read neighbouring segments of the transposed inputs).
template <int kArity, int kDims, int kT, int kTile, int kGroup, class Index, class P>
__device__ __forceinline__ ViewTileSpot<kArity, Index> locate_view_tile(const P& p, Index t, Index tiles_r,
                                                                         Index tiles_c) {
  constexpr int kInner = kDims - 1;
  ViewTileSpot<kArity, Index> s;
  const Index plane = tiles_r * tiles_c, i = t % plane;
  Index b = t / plane;
  if (kGroup == 1) {
    s.c0 = (i % tiles_c) * kTile;
    s.r0 = (i / tiles_c) * kTile;
  } else {
    const Index first = i / (kGroup * tiles_c) * kGroup;  // the band's first tile row
    const Index height = tiles_r - first < kGroup ? tiles_r - first : static_cast<Index>(kGroup);
    const Index j = i - first * tiles_c;
    s.r0 = (first + j % height) * kTile;
    s.c0 = (j / height) * kTile;
  }
#pragma unroll
  for (int a = 0; a <= kArity; ++a) s.base[a] = 0;
#pragma unroll
  for (int d = kDims - 1; d >= 0; --d) {  // the batch index over every dim but kT and the inner one
    if (d == kT || d == kInner) continue;
    const Index size = static_cast<Index>(p.shape[d]);
    const Index i = b % size;
    b /= size;
#pragma unroll
    for (int a = 0; a <= kArity; ++a) s.base[a] += i * static_cast<Index>(p.stride[a][d]);
  }
  return s;
}

// The tiled kernel (inner_transpose). Rows r run along kT, where the transposed inputs (bit a of kTransposed) are
// dense; columns c along the inner dim, where the output is dense. Tunables (host names in brackets):
//   kTile  [tile]:  tile edge in elements, 32, 64, 128; shared memory popcount(kTransposed) * kTile * kTile
//                   elements of T. A tile column (kTile rows along kT) is stored in kVec-element chunks whose
//                   order is XORed with the column's chunk index: a load writes whole chunks (one vector store per
//                   thread, a quarter-warp on distinct banks) and the compute pass, which reads one row across
//                   kVec-spaced columns, meets distinct banks too; no padding, any element size.
//   kVec   [pack]:  elements per vector access: transposed inputs read kVec rows at a time, the output and every
//                   input dense along the inner dim move kVec columns at a time. Legal where the rows and columns
//                   are multiples of kVec (by rule) and every such operand's pointer and pitches are aligned to
//                   kVec elements (the runtime narrows kVec per call, Family::variant).
//   kBlock [block]: threads; kTile / kVec lanes along a tile row, kBlock / lanes rows per pass, kRows = tile rows
//                   each thread covers (at most 16).
//   kGroup [group]: tile rows per band of the tile order (locate_view_tile).
//   kMinBlocks [minblocks]: blocks per SM the compiler must fit (__launch_bounds__' second argument: it caps the
//                   registers per thread); 1 leaves the registers free. More resident warps hide more latency.
// Blocks loop over tiles; a block that moves several loads its next tile's transposed inputs into registers
// before it computes and writes the current one, so reads and writes overlap (permute_tiled's scheme).
template <class Op, class T, int kArity, int kDims, int kT, int kTile, int kVec, int kBlock, int kGroup, class Index,
          unsigned kScalars, unsigned kTransposed, int kMinBlocks>
__global__ void __launch_bounds__(kBlock, kMinBlocks) tiled(ViewParams<T, kArity, kDims> p) {
  constexpr int kInner = kDims - 1;
  constexpr int kLanes = kTile / kVec;   // threads along a tile row, one vector each
  constexpr int kStep = kBlock / kLanes;  // tile rows one pass of the block covers
  constexpr int kRows = kTile / kStep;    // passes per tile
  constexpr int kNumT = popcount_bits(kTransposed);
  static_assert(kT >= 0 && kT < kInner, "kT is an outer dim");
  static_assert(kNumT >= 1 && (kTransposed & kScalars) == 0, "at least one transposed input, none a scalar");
  static_assert(kBlock % kLanes == 0 && kStep <= kTile && kTile % kStep == 0, "the block covers whole tile rows");
  typedef Pack<T, kVec> Vec;
  constexpr int kChunks = kTile / kVec;  // chunks per tile column
  __shared__ __align__(16) unsigned char raw[kNumT * kTile * kTile * sizeof(T)];
  T(*tile)[kTile * kTile] = reinterpret_cast<T(*)[kTile * kTile]>(raw);  // [input][column * kTile + swizzled row]
  const Op op;
  const int tx = static_cast<int>(threadIdx.x) % kLanes, ty = static_cast<int>(threadIdx.x) / kLanes;
  const Index rows = static_cast<Index>(p.shape[kT]), cols = static_cast<Index>(p.shape[kInner]);
  const Index tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  Index tiles = tiles_r * tiles_c;
#pragma unroll
  for (int d = 0; d < kInner; ++d)
    if (d != kT) tiles *= static_cast<Index>(p.shape[d]);

  Vec held[kNumT][kRows];  // the transposed inputs of one tile, kVec rows of one column per vector
  auto load = [&](const ViewTileSpot<kArity, Index>& s) {
    const Index r = s.r0 + static_cast<Index>(tx * kVec);
#pragma unroll
    for (int a = 0, slot = 0; a < kArity; ++a) {
      if (!((kTransposed >> a) & 1u)) continue;
      const Index pitch = static_cast<Index>(p.stride[a + 1][kInner]);
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const Index c = s.c0 + static_cast<Index>(ty + k * kStep);
        if (r < rows && c < cols) held[slot][k] = *reinterpret_cast<const Vec*>(p.in[a] + (s.base[a + 1] + r + c * pitch));
      }
      ++slot;
    }
  };

  Index t = blockIdx.x;
  if (t >= tiles) return;  // the whole block: no barrier is skipped by part of it
  ViewTileSpot<kArity, Index> spot = locate_view_tile<kArity, kDims, kT, kTile, kGroup>(p, t, tiles_r, tiles_c);
  wait_for_previous_kernel();
  load(spot);
  while (true) {
#pragma unroll
    for (int slot = 0; slot < kNumT; ++slot)
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const int cl = ty + k * kStep;  // this thread's tile column; its chunk tx lands at tx ^ (cl / kVec)
        *reinterpret_cast<Vec*>(&tile[slot][cl * kTile + (tx ^ ((cl / kVec) % kChunks)) * kVec]) = held[slot][k];
      }
    __syncthreads();
    const Index next = t + gridDim.x;
    const bool more = next < tiles;  // the same for the whole block
    ViewTileSpot<kArity, Index> next_spot = spot;
    if (more) {
      next_spot = locate_view_tile<kArity, kDims, kT, kTile, kGroup>(p, next, tiles_r, tiles_c);
      load(next_spot);
    }
    // Every output element of the tile: kVec columns per thread, the other inputs read in place.
    const Index c = spot.c0 + static_cast<Index>(tx * kVec);
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const int rl = ty + k * kStep;
      const Index r = spot.r0 + static_cast<Index>(rl);
      if (r < rows && c < cols) {  // kVec > 1 only where the columns are a multiple of kVec
        float v[kVec][kArity];
#pragma unroll
        for (int a = 0, slot = 0; a < kArity; ++a) {
          if ((kTransposed >> a) & 1u) {
#pragma unroll
            for (int j = 0; j < kVec; ++j)  // column tx * kVec + j, whose chunk index is tx
              v[j][a] = to_float(tile[slot][(tx * kVec + j) * kTile + ((rl / kVec) ^ (tx % kChunks)) * kVec + rl % kVec]);
            ++slot;
            continue;
          }
          if ((kScalars >> a) & 1u) {
#pragma unroll
            for (int j = 0; j < kVec; ++j) v[j][a] = p.scalar[a];
            continue;
          }
          const Index pitch = static_cast<Index>(p.stride[a + 1][kInner]);
          const T* at = p.in[a] + (spot.base[a + 1] + r * static_cast<Index>(p.stride[a + 1][kT]) + c * pitch);
          if (kVec > 1 && pitch == 1) {  // dense along the columns: one vector
            const Vec x = *reinterpret_cast<const Vec*>(at);
#pragma unroll
            for (int j = 0; j < kVec; ++j) v[j][a] = to_float(x.v[j]);
          } else if (pitch == 0) {  // constant along the columns (a 0-d tensor's element, a per-row value): one load
            const float x = to_float(*at);
#pragma unroll
            for (int j = 0; j < kVec; ++j) v[j][a] = x;
          } else {
#pragma unroll
            for (int j = 0; j < kVec; ++j) v[j][a] = to_float(at[j * pitch]);
          }
        }
        Vec y;
#pragma unroll
        for (int j = 0; j < kVec; ++j) y.v[j] = from_float<T>(op(v[j]));
        *reinterpret_cast<Vec*>(p.out + (spot.base[0] + r * static_cast<Index>(p.stride[0][kT]) + c)) = y;
      }
    }
    if (!more) break;
    __syncthreads();  // the tile is refilled with the next one
    t = next;
    spot = next_spot;
  }
}

}  // namespace ewv
}  // namespace jitune
