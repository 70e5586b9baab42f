// Scatter-add family kernels: index_add (torch's index_add_ along dim 0 of a rows x row_length tensor; the
// 1-D scatter_add is row_length 1) and dot (half / bf16 / float vectors, float accumulation).
//
// index_add: each thread takes kItems "units" per loop step, a unit being one element of a source row, or
// with packed atomics one aligned pair of the destination row. It loads every unit's index first, then the
// source values, then issues the atomics (fire-and-forget reductions, except the 16-bit plain atomics, whose
// compare-and-swap loops wait). Optional warp pre-reduction combines lanes that add to the same element
// before the atomic. With the float workspace the atomics go to a zeroed float copy of the destination, and
// the last block to finish adds it into the destination (one rounding per element) and zeroes it again, so
// the workspace is all zeros between launches. Indices outside [0, rows) are skipped (the host API can check
// them first).
//
// dot: grid-stride float accumulation with vector loads, a block reduction, one partial per block in the
// workspace; the last block to finish sums the partials in block order (deterministic for a given config) and
// writes the result, then zeroes the workspace.
#pragma once

#include "common/atomics.cuh"
#include "common/cache_hints.cuh"

namespace jitune {
namespace sa {

/// Atomic strategies [atomic].
enum AtomicKind : int {
  kPlainAtomic = 0,   ///< atomicAdd on the element type.
  kFastAtomic = 1,    ///< fast_atomic_add: 16-bit types as a pair atomic with -0.0 in the neighbour slot.
  kPackedAtomic = 2,  ///< two adjacent elements of a row per pair atomic (half2 / bfloat162 / float2).
};

/// Most blocks a dot launch uses: its workspace holds this many partials plus the counter.
constexpr int kMaxDotBlocks = 4096;

template <bool kCond, class A, class B>
struct Select {
  using type = A;
};
template <class A, class B>
struct Select<false, A, B> {
  using type = B;
};

/// Sums `v0` (and `v1` when kTwo) over the lanes of the warp holding the same `key`; true in the lane that
/// holds the group's sum (the lowest lane of the group). Every lane of the warp must call it.
template <bool kTwo>
__device__ __forceinline__ bool warp_combine(long long key, float& v0, float& v1) {
  const unsigned full = 0xffffffffu;
  const unsigned lane = threadIdx.x & 31u;
  const unsigned peers = __match_any_sync(full, key);
  if (peers == full) {  // the whole warp adds to one element (uniform: every lane sees the full mask)
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      v0 += __shfl_xor_sync(full, v0, offset);
      if (kTwo) v1 += __shfl_xor_sync(full, v1, offset);
    }
    return lane == 0;
  }
  const unsigned leader = static_cast<unsigned>(__ffs(peers)) - 1u;
  unsigned todo = lane == leader ? peers & (peers - 1u) : 0u;  // the leader gathers its peers, lowest first
  while (__any_sync(full, todo != 0u)) {
    const int from = todo ? __ffs(todo) - 1 : static_cast<int>(lane);
    const float o0 = __shfl_sync(full, v0, from);
    const float o1 = kTwo ? __shfl_sync(full, v1, from) : 0.f;
    if (todo) {
      v0 += o0;
      if (kTwo) v1 += o1;
      todo &= todo - 1u;
    }
  }
  return lane == leader;
}

/// Adds the float workspace into dst in the last block to arrive, then zeroes the workspace and its counter.
/// Called by every thread of every block after its atomics.
template <class T, int kBlock>
__device__ __forceinline__ void finish_workspace(T* dst, float* workspace, long long numel) {
  __shared__ int last;
  unsigned* counter = reinterpret_cast<unsigned*>(workspace + numel);
  // The pattern of a grid barrier (cooperative groups' grid sync): the block barrier orders every thread's
  // atomics before thread 0's fence, which is cumulative, so one fence per block publishes them all. (A fence
  // in every thread would make each thread wait for its own atomics to drain before the block can retire.)
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x * gridDim.y - 1u;
    if (last) __threadfence();
  }
  __syncthreads();
  if (!last) return;
  // One block does the whole pass: load a batch first, then store it, so the loads overlap.
  constexpr int kBatch = 8;
  for (long long base = threadIdx.x; base < numel; base += static_cast<long long>(kBlock) * kBatch) {
    float sum[kBatch], old[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const long long e = base + static_cast<long long>(b) * kBlock;
      sum[b] = e < numel ? __ldcg(workspace + e) : 0.f;
      old[b] = e < numel ? to_float(dst[e]) : 0.f;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const long long e = base + static_cast<long long>(b) * kBlock;
      if (e < numel) {
        dst[e] = from_float<T>(old[b] + sum[b]);
        __stcg(workspace + e, 0.f);
      }
    }
  }
  if (threadIdx.x == 0) *counter = 0u;
}

/// Shared-memory slices of the block pre-reduction [prereduce=2]: slice `y` of gridDim.y covers destination
/// elements [y * slice, (y + 1) * slice), slice even (pairs never straddle two slices of one block).
__device__ __forceinline__ long long block_slice(long long numel) {
  const long long s = (numel + gridDim.y - 1) / gridDim.y;
  return (s + 1) & ~1ll;
}

/// -0.0f: the identity of floating-point addition (x + -0.0 == x for every x, -0.0 included).
__device__ __forceinline__ float neg_zero() {
  return __int_as_float(0x80000000);
}
__device__ __forceinline__ bool is_neg_zero(float v) {
  return __float_as_uint(v) == 0x80000000u;
}

/// Adds the block's shared bins of [s0, s1) to the accumulation target (acc_parity: element offset of acc
/// modulo 2). Bins still holding -0.0 received nothing (or only -0.0) and are skipped.
template <class Acc, int kAtomic, int kBlock>
__device__ __forceinline__ void flush_bins(Acc* acc, const float* bins, long long s0, long long s1,
                                           long long numel, int acc_parity) {
  if constexpr (kAtomic == kPackedAtomic) {
    // Aligned pairs (even offsets of acc) overlapping [s0, s1); the slot outside [s0, s1) gets -0.0.
    const long long first = s0 - ((acc_parity + s0) & 1);
    for (long long e = first + 2 * static_cast<long long>(threadIdx.x); e < s1; e += 2ll * kBlock) {
      const float b0 = e >= s0 ? bins[e - s0] : neg_zero();
      const float b1 = e + 1 < s1 ? bins[e + 1 - s0] : neg_zero();
      if (is_neg_zero(b0) && is_neg_zero(b1)) continue;
      if (e >= 0 && e + 1 < numel)
        pair_atomic_add(acc + e, from_float<Acc>(b0), from_float<Acc>(b1));
      else if (e >= 0)
        fast_atomic_add(acc, e, numel, from_float<Acc>(b0));
      else
        fast_atomic_add(acc, e + 1, numel, from_float<Acc>(b1));
    }
  } else {
    for (long long e = s0 + threadIdx.x; e < s1; e += kBlock) {
      const float b = bins[e - s0];
      if (is_neg_zero(b)) continue;
      if constexpr (kAtomic == kPlainAtomic)
        plain_atomic_add(acc + e, from_float<Acc>(b));
      else
        fast_atomic_add(acc, e, numel, from_float<Acc>(b));
    }
  }
}

/// The source row, the unit within it and the target row (index[row], or -1 past the end) of this thread's
/// kItems units of the tile starting at unit `base` (unit u: base + k * kBlock + threadIdx.x).
template <int kBlock, int kItems, class I, class Index>
__device__ __forceinline__ void locate_units(Index base, Index units, Index total, const I* index,
                                             Index (&row)[kItems], Index (&unit)[kItems],
                                             long long (&target_row)[kItems]) {
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const Index u = base + static_cast<Index>(k) * kBlock + static_cast<Index>(threadIdx.x);
    row[k] = units == 1 ? u : u / units;
    unit[k] = u - row[k] * units;
    target_row[k] = u < total ? static_cast<long long>(index[row[k]]) : -1;
  }
}

// Tunables (host names in brackets):
//   kAtomic     [atomic]:    AtomicKind; 0 plain, 1 fast, 2 packed.
//   kWorkspace  [workspace]: accumulate in a zeroed float workspace, the last block adds it into dst (16-bit
//   dst). kPrereduce  [prereduce]: 0 none; 1 combine the lanes of a warp that add to the same element before
//   the atomic;
//                            2 accumulate in float bins in shared memory, one slice of the destination per
//                            gridDim.y, then add the touched bins with kAtomic (block pre-reduction).
//   kBlock      [block]:     threads per block; 128, 256, 512, 1024.
//   kItems      [items]:     units each thread loads before issuing its atomics; 1, 2, 4, 8.
//   Index:                   int when count * units_per_row fits in 31 bits with a step to spare, else long
//   long.
// Arguments: dst (rows x row_length), index (count entries of I), src (count x row_length), workspace (see
// finish_workspace; null unless kWorkspace), units_per_row (row_length, or with packed atomics and no block
// pre-reduction the pair units of a row), parity (element offset of dst modulo 2, which decides where aligned
// pairs start), alpha (src multiplier). kPrereduce == 2 takes slice * 4 bytes of dynamic shared memory. (The
// minimum of one block per SM in __launch_bounds__ keeps ptxas from squeezing to 32 registers and spilling.)
template <class T, class I, int kAtomic, bool kWorkspace, int kPrereduce, int kBlock, int kItems, class Index>
__global__ void __launch_bounds__(kBlock, 1)
    index_add(T* dst, const I* index, const T* src, float* workspace, long long rows, long long count,
              long long row_length, long long units_per_row, int parity, float alpha) {
  using Acc = typename Select<kWorkspace, float, T>::type;
  Acc* acc = kWorkspace ? reinterpret_cast<Acc*>(workspace) : reinterpret_cast<Acc*>(dst);
  const long long numel = rows * row_length;
  const int acc_parity = kWorkspace ? 0 : parity;
  const Index units = static_cast<Index>(units_per_row);
  const Index total = static_cast<Index>(count) * units;
  const Index tile = static_cast<Index>(kBlock) * kItems;
  constexpr bool kPairs = kAtomic == kPackedAtomic && kPrereduce != 2;

  extern __shared__ float bins[];
  long long s0 = 0, s1 = 0;
  if constexpr (kPrereduce == 2) {
    const long long slice = block_slice(numel);
    s0 = static_cast<long long>(blockIdx.y) * slice;
    s1 = s0 + slice < numel ? s0 + slice : numel;
    for (long long i = threadIdx.x; i < slice; i += kBlock) bins[i] = neg_zero();
    __syncthreads();
  }

  for (Index base = static_cast<Index>(blockIdx.x) * tile; base < total;
       base += static_cast<Index>(gridDim.x) * tile) {
    Index row[kItems], unit[kItems];
    long long target_row[kItems];
    locate_units<kBlock, kItems>(base, units, total, index, row, unit, target_row);
    long long target[kItems];  // flat dst element of the unit's first column
    float v0[kItems], v1[kItems];
    int width[kItems];  // columns the unit adds: 0 (none or index out of range), 1, or 2 (a packed pair)
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      width[k] = 0;
      target[k] = -1;
      v0[k] = v1[k] = 0.f;
      const long long r = target_row[k];
      if (r < 0 || r >= rows) continue;
      const T* s = src + static_cast<long long>(row[k]) * row_length;
      if constexpr (kPairs) {
        // Pairs start at even offsets of the accumulation target: a row whose first element sits at an odd
        // offset begins with a single column.
        const long long h = (acc_parity + r * row_length) & 1;
        const long long c = 2 * static_cast<long long>(unit[k]) - h;
        if (c >= 0 && c + 1 < row_length) {
          width[k] = 2;
          target[k] = r * row_length + c;
          v0[k] = to_float(s[c]) * alpha;
          v1[k] = to_float(s[c + 1]) * alpha;
        } else if (c == -1 || c == row_length - 1) {
          const long long col = c < 0 ? 0 : c;
          width[k] = 1;
          target[k] = r * row_length + col;
          v0[k] = to_float(s[col]) * alpha;
        }
      } else {
        const long long t = r * row_length + static_cast<long long>(unit[k]);
        if (kPrereduce == 2 && (t < s0 || t >= s1)) continue;  // another slice's element
        width[k] = 1;
        target[k] = t;
        v0[k] = to_float(s[unit[k]]) * alpha;
      }
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if constexpr (kPrereduce == 2) {
        if (width[k]) atomicAdd(bins + (target[k] - s0), v0[k]);
        continue;
      }
      if constexpr (kPrereduce == 1) {
        // Single columns and pairs never share a first element, so the flat target is a safe key.
        const bool leader = warp_combine<kPairs>(width[k] ? target[k] : -1, v0[k], v1[k]);
        if (!leader) width[k] = 0;
      }
      if constexpr (kPairs) {
        if (width[k] == 2)
          pair_atomic_add(acc + target[k], from_float<Acc>(v0[k]), from_float<Acc>(v1[k]));
        else if (width[k] == 1)
          fast_atomic_add(acc, target[k], numel, from_float<Acc>(v0[k]));
      } else if (width[k] == 1) {
        if constexpr (kAtomic == kPlainAtomic)
          plain_atomic_add(acc + target[k], from_float<Acc>(v0[k]));
        else
          fast_atomic_add(acc, target[k], numel, from_float<Acc>(v0[k]));
      }
    }
  }
  if constexpr (kPrereduce == 2) {
    __syncthreads();
    flush_bins<Acc, kAtomic, kBlock>(acc, bins, s0, s1, numel, acc_parity);
  }
  if constexpr (kWorkspace) finish_workspace<T, kBlock>(dst, workspace, numel);
}

template <class T>
struct IsHalf {
  static constexpr bool value = false;
};
template <>
struct IsHalf<__half> {
  static constexpr bool value = true;
};

/// Two 16-bit values as one 32-bit register, `lo` at the lower address (a half2 / bfloat162 pair).
template <class T>
__device__ __forceinline__ unsigned pack_pair(float lo, float hi) {
  const T a = from_float<T>(lo), b = from_float<T>(hi);
  return static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&a)) |
         (static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&b)) << 16);
}

/// Adds v[0..kVec) to acc[0..kVec); `acc` is aligned to kVec elements. From sm_90 one vector reduction per 16
/// bytes (red.global.add.v2/v4.f32, or .f16x2 / .bf16x2 pairs as one, two or four registers); before, pair
/// atomics (half2 anywhere, bfloat162 as the hardware has it) or, for float, one atomic per element.
template <class Acc, int kVec>
__device__ __forceinline__ void vector_red_add(Acc* acc, const float (&v)[kVec]) {
#if __CUDA_ARCH__ >= 900
  constexpr bool kVectorRed = true;
#else
  constexpr bool kVectorRed = false;
#endif
  if constexpr (sizeof(Acc) == 4) {
    if constexpr (kVectorRed && kVec >= 2) {
      constexpr int kChunk = kVec >= 4 ? 4 : 2;
#pragma unroll
      for (int c = 0; c < kVec; c += kChunk) {
        const size_t a = __cvta_generic_to_global(acc + c);
        if constexpr (kChunk == 4)
          asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(a), "f"(v[c]), "f"(v[c + 1]),
                       "f"(v[c + 2]), "f"(v[c + 3])
                       : "memory");
        else
          asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(a), "f"(v[c]), "f"(v[c + 1]) : "memory");
      }
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) atomicAdd(reinterpret_cast<float*>(acc) + e, v[e]);
    }
  } else {
    static_assert(kVec % 2 == 0, "16-bit vector units hold whole pairs");
    if constexpr (kVectorRed && kVec >= 4) {
      constexpr bool kHalf = IsHalf<Acc>::value;  // else bfloat16
      unsigned r[kVec / 2];
#pragma unroll
      for (int e = 0; e < kVec / 2; ++e) r[e] = pack_pair<Acc>(v[2 * e], v[2 * e + 1]);
      const size_t a = __cvta_generic_to_global(acc);
      if constexpr (kVec == 8) {
        if constexpr (kHalf)
          asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};" ::"l"(a), "r"(r[0]), "r"(r[1]),
                       "r"(r[2]), "r"(r[3])
                       : "memory");
        else
          asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(a), "r"(r[0]), "r"(r[1]),
                       "r"(r[2]), "r"(r[3])
                       : "memory");
      } else {
        if constexpr (kHalf)
          asm volatile("red.global.add.noftz.v2.f16x2 [%0], {%1, %2};" ::"l"(a), "r"(r[0]), "r"(r[1]) : "memory");
        else
          asm volatile("red.global.add.noftz.v2.bf16x2 [%0], {%1, %2};" ::"l"(a), "r"(r[0]), "r"(r[1]) : "memory");
      }
    } else {
#pragma unroll
      for (int e = 0; e < kVec; e += 2) pair_atomic_add(acc + e, from_float<Acc>(v[e]), from_float<Acc>(v[e + 1]));
    }
  }
}

// Tunables: those of index_add with kAtomic packed and no pre-reduction, plus
//   kVec [vec]: elements per unit, 2, 4 or 8 (16 bytes at most): one vector load of the source and one vector
//               reduction (vector_red_add) per unit. The host gives it rows of a multiple of kVec elements and
//               source (and, without the workspace, destination) pointers aligned to kVec elements.
// Same arguments as index_add (units_per_row = row_length / kVec; parity is unused: every unit is aligned).
template <class T, class I, bool kWorkspace, int kBlock, int kItems, int kVec, class Index>
__global__ void __launch_bounds__(kBlock, 1)
    index_add_vec(T* dst, const I* index, const T* src, float* workspace, long long rows, long long count,
                  long long row_length, long long units_per_row, int /*parity*/, float alpha) {
  using Acc = typename Select<kWorkspace, float, T>::type;
  Acc* acc = kWorkspace ? reinterpret_cast<Acc*>(workspace) : reinterpret_cast<Acc*>(dst);
  const Index units = static_cast<Index>(units_per_row);
  const Index total = static_cast<Index>(count) * units;
  const Index tile = static_cast<Index>(kBlock) * kItems;
  for (Index base = static_cast<Index>(blockIdx.x) * tile; base < total;
       base += static_cast<Index>(gridDim.x) * tile) {
    Index row[kItems], unit[kItems];
    long long target_row[kItems];
    locate_units<kBlock, kItems>(base, units, total, index, row, unit, target_row);
    Pack<T, kVec> value[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      if (target_row[k] >= 0 && target_row[k] < rows)
        value[k] = *reinterpret_cast<const Pack<T, kVec>*>(src + static_cast<long long>(row[k]) * row_length +
                                                           static_cast<long long>(unit[k]) * kVec);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (target_row[k] < 0 || target_row[k] >= rows) continue;
      float v[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] = to_float(value[k].v[e]) * alpha;
      vector_red_add<Acc, kVec>(acc + target_row[k] * row_length + static_cast<long long>(unit[k]) * kVec, v);
    }
  }
  if constexpr (kWorkspace) finish_workspace<T, kBlock>(dst, workspace, rows * row_length);
}

/// Block-wide float sum (every thread calls; the result is valid in thread 0).
template <int kBlock>
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[kBlock / 32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();  // warp_sums may still be read by an earlier call
  if ((threadIdx.x & 31u) == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0.f;
  if (threadIdx.x < 32) {
    v = threadIdx.x < kBlock / 32 ? warp_sums[threadIdx.x] : 0.f;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Tunables (host names in brackets):
//   kBlock [block]: threads per block; 128, 256, 512, 1024.
//   kItems [items]: vectors each thread loads per operand before accumulating; 1, 2, 4, 8.
//   kVec   [vec]:   elements per vector load, kVec * sizeof(T) <= 16 bytes; lowered at run time when x and y are
//                   not equally aligned.
//   kOrder [order]: 0 grid-stride (the grid sweeps the vectors together), 1 each block sums one contiguous chunk.
//   kCache [cache]: the loads' L2 eviction priority (CacheHint: 0 normal, 2 evict_first: read once).
//   Index:          int when n fits in 31 bits with a step to spare, else long long.
// Arguments: x, y (n elements), head (elements before the first kVec-aligned element of both), out (one
// element), workspace (kMaxDotBlocks partials + a counter, zero between launches).
template <class T, int kBlock, int kItems, int kVec, int kOrder, int kCache, class Index>
__global__ void __launch_bounds__(kBlock)
    dot(const T* x, const T* y, long long n, long long head, T* out, float* workspace) {
  const Index stride = static_cast<Index>(gridDim.x) * kBlock;
  const Index first = static_cast<Index>(blockIdx.x) * kBlock + static_cast<Index>(threadIdx.x);
  float sum = 0.f;
  const Index vecs = (static_cast<Index>(n) - static_cast<Index>(head)) / kVec;
  const Pack<T, kVec>* xv = reinterpret_cast<const Pack<T, kVec>*>(x + head);
  const Pack<T, kVec>* yv = reinterpret_cast<const Pack<T, kVec>*>(y + head);
  // Sums this thread's vectors i, i + step, ... below end, kItems of them per operand in flight.
  auto sweep = [&](Index i, Index end, Index step) {
    for (; i < end; i += step * kItems) {
      Pack<T, kVec> a[kItems], b[kItems];
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const Index j = i + static_cast<Index>(k) * step;
        if (j < end) {
          a[k] = load_hinted<kCache>(xv + j);
          b[k] = load_hinted<kCache>(yv + j);
        }
      }
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        if (i + static_cast<Index>(k) * step < end) {
#pragma unroll
          for (int e = 0; e < kVec; ++e) sum = fmaf(to_float(a[k].v[e]), to_float(b[k].v[e]), sum);
        }
      }
    }
  };
  if constexpr (kOrder == 1) {
    using Unsigned = typename Select<sizeof(Index) == 8, unsigned long long, unsigned>::type;
    const Index chunk = static_cast<Index>((static_cast<Unsigned>(vecs) + gridDim.x - 1) / gridDim.x);
    const Index start = static_cast<Index>(blockIdx.x) * chunk;
    // The step as blockDim.x (== kBlock): with the constant, ptxas capped itself at 32 registers and spilled.
    sweep(start + static_cast<Index>(threadIdx.x), start + chunk < vecs ? start + chunk : vecs,
          static_cast<Index>(blockDim.x));
  } else {
    sweep(first, vecs, stride);
  }
  // Scalar elements: the head before the aligned part and the tail after it.
  const Index tail = static_cast<Index>(head) + vecs * kVec;
  const Index rest = static_cast<Index>(head) + (static_cast<Index>(n) - tail);
  for (Index r = first; r < rest; r += stride) {
    const Index e = r < static_cast<Index>(head) ? r : tail + (r - static_cast<Index>(head));
    sum = fmaf(to_float(x[e]), to_float(y[e]), sum);
  }

  __shared__ int last;
  sum = block_sum<kBlock>(sum);
  unsigned* counter = reinterpret_cast<unsigned*>(workspace + kMaxDotBlocks);
  if (threadIdx.x == 0) {
    __stcg(workspace + blockIdx.x, sum);
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1u;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float total = 0.f;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kBlock) {
    total += __ldcg(workspace + b);
    __stcg(workspace + b, 0.f);
  }
  total = block_sum<kBlock>(total);
  if (threadIdx.x == 0) {
    out[0] = from_float<T>(total);
    *counter = 0u;
  }
}

}  // namespace sa
}  // namespace jitune

#include "scatter_add/partition.cuh"  // partition=1: bucket the sources, sum each bucket in shared memory
