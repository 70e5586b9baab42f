// Row reduction kernels: y[r] = sum or max over c of x[r, c] for a contiguous rows x cols tensor, accumulated
// in float, y in x's type (torch.sum(x, -1) / torch.amax(x, -1); max propagates NaN).
//
// Every thread folds kPack elements per aligned vector load (16 bytes at most), kUnroll loads of each of its
// kRows rows issued before any is folded, into kPack independent float accumulators. A team of threads then
// combines its threads' partials; which team is the kernel:
//   reduce_rows_group:   teams of 1..32 threads inside a warp, one row each (warp shuffles only); a block
//                        of kGroupBlock threads takes kGroupBlock / kThreads * kRows rows per step of a
//                        grid-stride loop. For short and medium rows.
//   reduce_rows_block:   the whole block on one row (shuffles, then one float per warp through shared
//                        memory), a grid-stride loop over rows. kWorkspace: `split` blocks per row, each on
//                        a slice of the row; each writes its partial to the workspace, and the block that
//                        arrives last at the row's counter combines the partials in slice order
//                        (deterministic) and resets the counter.
//   reduce_rows_cluster: sm_90+: the `kCluster` blocks of one row form a thread-block cluster; block 0
//                        reads the other blocks' partials from their shared memory (distributed shared
//                        memory): no workspace, no second launch.
// kPeel: a row may start anywhere (any x address, any cols): its elements before the first kPack-aligned
// address (the head) and after its last whole pack (the tail), fewer than kPack each, go through a scalar
// path, the packs between through full-width aligned loads (RowCut). Without kPeel rows start pack-aligned
// (x's address and row pitch; the host checks) and only the tail is scalar: less work per row, which short
// rows notice. Every kernel waits for the previous kernel of the
// stream before its first global memory access (programmatic dependent launch on sm_90+).
#pragma once

#include "common/types.cuh"
#include "reduce_rows/reduce_rows_params.cuh"

namespace jitune {
namespace templates {
namespace reduce_rows {

/// Op codes, as the call passes them: 0 sum, 1 max.
enum { kSum = 0, kMax = 1 };

template <int kOp>
struct Combine;

template <>
struct Combine<kSum> {
  static __device__ __forceinline__ float identity() { return 0.0f; }
  static __device__ __forceinline__ float apply(float a, float b) { return a + b; }
};

/// max that propagates NaN, as torch.amax does: a NaN operand gives NaN.
template <>
struct Combine<kMax> {
  static __device__ __forceinline__ float identity() { return -__int_as_float(0x7f800000); }
  static __device__ __forceinline__ float apply(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return (a != a || a > b) ? a : b;
#endif
  }
};

/// Programmatic dependent launch (sm_90+): returns once the stream's previous kernel has finished and its
/// writes are visible; nothing before it may touch global memory. A no-op for a normal launch.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// The integer type of kBytes, for read-only vector loads.
template <int kBytes>
struct Word;
template <>
struct Word<2> {
  typedef unsigned short type;
};
template <>
struct Word<4> {
  typedef unsigned int type;
};
template <>
struct Word<8> {
  typedef uint2 type;
};
template <>
struct Word<16> {
  typedef uint4 type;
};

/// One aligned pack through the read-only path (ld.global.nc, up to 16 bytes).
template <class T, int kPack>
__device__ __forceinline__ Pack<T, kPack> load_pack(const Pack<T, kPack>* at) {
  typedef typename Word<sizeof(Pack<T, kPack>)>::type W;
  Pack<T, kPack> out;
  *reinterpret_cast<W*>(&out) = __ldg(reinterpret_cast<const W*>(at));
  return out;
}

/// Combines v across the aligned teams of kWidth lanes (a power of two <= 32); every lane of the warp must
/// call it and every lane of a team ends with the team's result. The order is fixed, so results are
/// deterministic.
template <int kOp, int kWidth>
__device__ __forceinline__ float team_reduce(float v) {
#pragma unroll
  for (int o = kWidth / 2; o > 0; o /= 2) v = Combine<kOp>::apply(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// The block's result in warp 0 (all of it); `warp_partial` holds kBlock / 32 floats. Every thread must call
/// it.
template <int kOp, int kBlock>
__device__ __forceinline__ float block_reduce(float v, float* warp_partial) {
  constexpr int kWarps = kBlock / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = team_reduce<kOp, 32>(v);
  if (lane == 0) warp_partial[warp] = v;
  __syncthreads();
  if (warp == 0) v = team_reduce<kOp, kWarps>(lane < kWarps ? warp_partial[lane] : Combine<kOp>::identity());
  __syncthreads();  // warp_partial is written again for the next row
  return v;
}

/// How a row of `cols` elements at `row` is read: `head` elements before its first kPack-aligned address
/// (0 <= head < kPack; the row's address decides it; 0 without kPeel), `packs` whole packs from there, then
/// fewer than kPack tail elements. The head and the tail are the row's scalars: scalar e of them is element
/// index(e).
template <class T, int kPack, bool kPeel>
struct RowCut {
  int head, packs;
  __device__ __forceinline__ RowCut(const T* row, int cols) {
    constexpr unsigned kBytes = sizeof(T) * kPack;
    const unsigned past = static_cast<unsigned>(reinterpret_cast<unsigned long long>(row)) % kBytes;
    head = !kPeel || past == 0 ? 0 : min(cols, static_cast<int>((kBytes - past) / sizeof(T)));
    packs = (cols - head) / kPack;
  }
  __device__ __forceinline__ int scalars(int cols) const { return cols - packs * kPack; }
  __device__ __forceinline__ int index(int e) const { return e < head ? e : e + packs * kPack; }
  __device__ __forceinline__ const Pack<T, kPack>* vec(const T* row) const {
    return reinterpret_cast<const Pack<T, kPack>*>(row + head);
  }
};

/// Rows that start pack-aligned (no kPeel): thread `t` of a team of kTeam threads folds packs begin + t,
/// begin + t + kTeam, ... (< end) of each live row, then the scalar elements tail_begin + t, ... (< tail_end),
/// into out[r]. kUnroll packs of every row are loaded before any is folded: kRows * kUnroll loads in flight.
template <int kOp, class T, int kPack, int kUnroll, int kRows, int kTeam>
__device__ __forceinline__ void fold_aligned(const T* const (&row)[kRows], const bool (&live)[kRows], int begin,
                                             int end, int tail_begin, int tail_end, int t, float (&out)[kRows]) {
  typedef Pack<T, kPack> P;
  float acc[kRows][kPack];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int k = 0; k < kPack; ++k) acc[r][k] = Combine<kOp>::identity();
  // Whole steps (every load in range) without bounds checks, then one checked step.
  int i = begin + t;
#pragma unroll 1
  for (; i + (kUnroll - 1) * kTeam < end; i += kTeam * kUnroll) {
    P v[kRows][kUnroll];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r]) v[r][u] = load_pack(reinterpret_cast<const P*>(row[r]) + i + u * kTeam);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r])
#pragma unroll
          for (int k = 0; k < kPack; ++k) acc[r][k] = Combine<kOp>::apply(acc[r][k], to_float(v[r][u].v[k]));
  }
  if (i < end) {
    P v[kRows][kUnroll];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r] && i + u * kTeam < end)
          v[r][u] = load_pack(reinterpret_cast<const P*>(row[r]) + i + u * kTeam);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r] && i + u * kTeam < end)
#pragma unroll
          for (int k = 0; k < kPack; ++k) acc[r][k] = Combine<kOp>::apply(acc[r][k], to_float(v[r][u].v[k]));
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (live[r])
#pragma unroll 1
      for (int e = tail_begin + t; e < tail_end; e += kTeam)
        acc[r][0] = Combine<kOp>::apply(acc[r][0], to_float(row[r][e]));
#pragma unroll
    for (int s = kPack / 2; s > 0; s /= 2)
#pragma unroll
      for (int k = 0; k < s; ++k) acc[r][k] = Combine<kOp>::apply(acc[r][k], acc[r][k + s]);
    out[r] = acc[r][0];
  }
}

/// kPeel: thread `t` of a team of kTeam threads folds packs begin + t, begin + t + kTeam, ... of each live row r
/// (its RowCut; up to `end`, or up to its own packs when end < 0), then (with_scalars) the row's scalars t,
/// t + kTeam, ..., into out[r]. kUnroll packs of every row are loaded before any is folded: kRows * kUnroll
/// loads in flight. Rows starting at different offsets within a pack end up to one pack apart, never more.
template <int kOp, class T, int kPack, int kUnroll, int kRows, int kTeam>
__device__ __forceinline__ void fold_peeled(const T* const (&row)[kRows], const bool (&live)[kRows], int cols,
                                            int begin, int end, bool with_scalars, int t, float (&out)[kRows]) {
  constexpr bool kPeel = true;
  typedef Pack<T, kPack> P;
  float acc[kRows][kPack];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int k = 0; k < kPack; ++k) acc[r][k] = Combine<kOp>::identity();
  // Every row reaches pack `common` (a row's packs are floor((cols - head) / kPack) with head < kPack);
  // none goes past `reach`. The same for every thread: no divergence, nothing per row kept.
  const int common = end >= 0 ? end : max(0, cols - (kPack - 1)) / kPack;
  const int reach = end >= 0 ? end : cols / kPack;
  const P* vec[kRows];
  // kEarly: each thread's first scalar of its row (head or tail) is loaded before the packs, so that rows
  // read one after another do not each wait for a scalar load at their end (one row a team: with several,
  // ptxas spills).
  constexpr bool kEarly = kPack > 1 && kRows == 1;
  float early[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const RowCut<T, kPack, kPeel> cut(row[r], cols);
    vec[r] = cut.vec(row[r]);
    early[r] = Combine<kOp>::identity();
    if (kEarly && live[r] && with_scalars && t < cut.scalars(cols))
      early[r] = to_float(row[r][cut.index(t)]);
  }
  // Whole steps (every load of every live row in range) without bounds checks, then one checked step: the
  // loop left fewer than a step to common, and reach is at most common + 1.
  int i = begin + t;
#pragma unroll 1
  for (; i + (kUnroll - 1) * kTeam < common; i += kTeam * kUnroll) {
    P v[kRows][kUnroll];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r]) v[r][u] = load_pack(vec[r] + i + u * kTeam);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r])
#pragma unroll
          for (int k = 0; k < kPack; ++k) acc[r][k] = Combine<kOp>::apply(acc[r][k], to_float(v[r][u].v[k]));
  }
  if (i < reach) {
    P v[kRows][kUnroll];
    int e[kRows];  // this row's end
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      e[r] = end >= 0 ? end : RowCut<T, kPack, kPeel>(row[r], cols).packs;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r] && i + u * kTeam < e[r]) v[r][u] = load_pack(vec[r] + i + u * kTeam);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[r] && i + u * kTeam < e[r])
#pragma unroll
          for (int k = 0; k < kPack; ++k) acc[r][k] = Combine<kOp>::apply(acc[r][k], to_float(v[r][u].v[k]));
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (kPack > 1 && live[r] && with_scalars) {
      const RowCut<T, kPack, kPeel> cut(row[r], cols);
      acc[r][0] = Combine<kOp>::apply(acc[r][0], early[r]);  // kEarly: scalar t (or the identity)
#pragma unroll 1
      for (int e = kEarly ? t + kTeam : t; e < cut.scalars(cols); e += kTeam)
        acc[r][0] = Combine<kOp>::apply(acc[r][0], to_float(row[r][cut.index(e)]));
    }
#pragma unroll
    for (int s = kPack / 2; s > 0; s /= 2)
#pragma unroll
      for (int k = 0; k < s; ++k) acc[r][k] = Combine<kOp>::apply(acc[r][k], acc[r][k + s]);
    out[r] = acc[r][0];
  }
}

/// Slice `part` of `split` of a row of `packs` whole packs: [begin, end) in packs; the last slice also takes
/// the scalar tail [packs * kPack, cols) (fold_aligned) or the row's scalars (fold_peeled: `last`).
template <int kPack>
struct Slice {
  int begin, end, tail_begin, tail_end;
  bool last;
  __device__ __forceinline__ Slice(int packs, int cols, int split, int part) {
    const int per = (packs + split - 1) / split;
    begin = min(packs, part * per);
    end = min(packs, begin + per);
    tail_begin = packs * kPack;
    last = part == split - 1;
    tail_end = last ? cols : tail_begin;
  }
};

// Tunables (host names in brackets; the host also rejects combinations that cannot help, reduce_rows.cpp):
//   kThreads [threads]: threads reducing one row: 1, 2, 4, 8, 16, 32 (reduce_rows_group, a team inside a
//                       warp) or 128, 256, 512, 1024 (reduce_rows_block / _cluster, the whole block).
//   kPack    [pack]:    elements per vector load, 1, 2, 4, 8 with kPack * sizeof(T) <= 16 bytes.
//   kPeel    [peel]:    1: rows may start anywhere (each row's head and tail go the scalar path, RowCut);
//                       0: rows start kPack-aligned. The host takes 1 for rows of a pitch that is not a
//                       multiple of the pack, and the runtime for an x off the pack's alignment.
//   kUnroll  [unroll]:  loads of one row each thread issues before folding them, 1, 2, 4, 8.
//   kRows    [rows]:    rows one team reduces at once, 1, 2, 4, 8 (group kernel; loads in flight for rows
//                       one pass covers).
//   split    [split]:   blocks per row, 1, 2, 4, 8, 16, 32 (block kernels; > 1 for fewer rows than SMs).
//   kCluster [cluster]: 1: the split blocks of a row form a cluster (sm_90+, split <= 8); 0: they meet in a
//                       workspace (any device).
template <int kOp, class T, int kThreads, int kPack, bool kPeel, int kUnroll, int kRows>
__global__ void __launch_bounds__(kGroupBlock) reduce_rows_group(const Params p) {
  constexpr int kGroups = kGroupBlock / kThreads;
  constexpr long long kStep = kGroups * kRows;  // rows per block and step
  const T* x = reinterpret_cast<const T*>(p.x);
  T* y = reinterpret_cast<T*>(p.y);
  const int cols = static_cast<int>(p.cols), packs = cols / kPack;
  const int group = threadIdx.x / kThreads, t = threadIdx.x % kThreads;
  wait_for_previous_kernel();
  for (long long first = blockIdx.x * kStep; first < p.rows; first += gridDim.x * kStep) {
    const T* row[kRows];
    bool live[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const long long i = first + r * kGroups + group;  // a warp's teams read adjacent rows
      live[r] = i < p.rows;
      row[r] = x + (live[r] ? i : 0) * p.cols;
    }
    float v[kRows];
    if constexpr (kPeel)
      fold_peeled<kOp, T, kPack, kUnroll, kRows, kThreads>(row, live, cols, 0, -1, true, t, v);
    else
      fold_aligned<kOp, T, kPack, kUnroll, kRows, kThreads>(row, live, 0, packs, packs * kPack, cols, t, v);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      v[r] = team_reduce<kOp, kThreads>(v[r]);
      if (live[r] && t == r % kThreads) y[first + r * kGroups + group] = from_float<T>(v[r]);
    }
  }
}

template <int kOp, class T, int kThreads, int kPack, bool kPeel, int kUnroll, bool kWorkspace>
__global__ void __launch_bounds__(kThreads) reduce_rows_block(const Params p) {
  __shared__ float warp_partial[kThreads / 32];
  __shared__ bool last_arrival;
  const T* x = reinterpret_cast<const T*>(p.x);
  T* y = reinterpret_cast<T*>(p.y);
  const int cols = static_cast<int>(p.cols), packs = cols / kPack;
  const long long split = kWorkspace ? p.split : 1, units = p.rows * split;
  wait_for_previous_kernel();
  for (long long unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const long long r = unit / split;
    const int part = static_cast<int>(unit - r * split);
    const T* row[1] = {x + r * p.cols};
    const Slice<kPack> s(kPeel ? RowCut<T, kPack, kPeel>(row[0], cols).packs : packs, cols,
                         static_cast<int>(split), part);
    const bool live[1] = {true};
    float v[1];
    if constexpr (kPeel)
      fold_peeled<kOp, T, kPack, kUnroll, 1, kThreads>(row, live, cols, s.begin, s.end, s.last, threadIdx.x, v);
    else
      fold_aligned<kOp, T, kPack, kUnroll, 1, kThreads>(row, live, s.begin, s.end, s.tail_begin, s.tail_end,
                                                        threadIdx.x, v);
    const float total = block_reduce<kOp, kThreads>(v[0], warp_partial);
    if constexpr (!kWorkspace) {
      if (threadIdx.x == 0) y[r] = from_float<T>(total);
    } else {
      float* partials = reinterpret_cast<float*>(p.partials);
      unsigned* arrivals = reinterpret_cast<unsigned*>(p.arrivals);
      if (threadIdx.x == 0) {
        partials[unit] = total;
        __threadfence();  // the partial is visible before the arrival is counted
        last_arrival = atomicAdd(arrivals + r, 1u) == static_cast<unsigned>(split - 1);
      }
      __syncthreads();
      if (last_arrival && threadIdx.x < 32) {
        __threadfence();
        float w = Combine<kOp>::identity();
        for (int i = threadIdx.x; i < split; i += 32)
          w = Combine<kOp>::apply(w, __ldcg(partials + r * split + i));
        w = team_reduce<kOp, 32>(w);
        if (threadIdx.x == 0) {
          y[r] = from_float<T>(w);
          arrivals[r] = 0;  // ready for the next launch on the same workspace
        }
      }
      __syncthreads();  // last_arrival is written again for the next unit
    }
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// This block's rank in its cluster.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/// Barrier of every thread of the cluster; shared memory writes before it are visible to the cluster after
/// it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/// The float at `local` (this block's shared memory) in the shared memory of block `rank` of the cluster.
__device__ __forceinline__ float load_from_block(const float* local, unsigned rank) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

/// Grid: rows * kCluster blocks; the kCluster blocks of row blockIdx.x / kCluster form one cluster.
template <int kOp, class T, int kThreads, int kPack, bool kPeel, int kUnroll, int kCluster>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    reduce_rows_cluster(const Params p) {
  __shared__ float warp_partial[kThreads / 32];
  __shared__ float block_partial;
  const T* x = reinterpret_cast<const T*>(p.x);
  const int cols = static_cast<int>(p.cols), packs = cols / kPack;
  const long long r = blockIdx.x / kCluster;
  const unsigned part = cluster_rank();
  const T* row[1] = {x + r * p.cols};
  const Slice<kPack> s(kPeel ? RowCut<T, kPack, kPeel>(row[0], cols).packs : packs, cols, kCluster,
                       static_cast<int>(part));
  const bool live[1] = {true};
  float v[1];
  wait_for_previous_kernel();
  if constexpr (kPeel)
    fold_peeled<kOp, T, kPack, kUnroll, 1, kThreads>(row, live, cols, s.begin, s.end, s.last, threadIdx.x, v);
  else
    fold_aligned<kOp, T, kPack, kUnroll, 1, kThreads>(row, live, s.begin, s.end, s.tail_begin, s.tail_end,
                                                      threadIdx.x, v);
  const float total = block_reduce<kOp, kThreads>(v[0], warp_partial);
  if (threadIdx.x == 0) block_partial = total;
  cluster_sync();
  if (part == 0 && threadIdx.x < 32) {
    const float w = team_reduce<kOp, kCluster>(
        threadIdx.x < kCluster ? load_from_block(&block_partial, threadIdx.x) : Combine<kOp>::identity());
    if (threadIdx.x == 0) reinterpret_cast<T*>(p.y)[r] = from_float<T>(w);
  }
  cluster_sync();  // every block's shared memory stays until block 0 has read it
}

#endif

}  // namespace reduce_rows
}  // namespace templates
}  // namespace jitune
