// conv2d algo 1, repack 2: an NCHW convolution copied to channels last at the copy rate, then the implicit
// GEMM. One cooperative launch (every block resident): x {N,C,H,W} -> {N,H,W,C} and w {K,C,R,S} -> {K,R,S,C}
// into the workspace, a grid barrier, then igemm.cuh's channels-last cp.async pipeline over the copies with
// the NCHW epilogue, each block taking output tiles in turn, the last block out resetting the barrier (as
// repack 1 does).
//
// Both copies are the same batched transpose, [B][C][L] -> [B][L][C] (x: B = N, L = H * W; w: B = K,
// L = R * S). repack 1 runs it at the GEMM's occupancy (one or two blocks an SM) with a few loads a thread in
// flight, and where H * W is not a multiple of 8 element by element: on the H200 an N32 C256 14x14 layer took
// 39 us repacked against 21 us for the same GEMM on a channels-last x, N32 C512 7x7 49 us. Here a block keeps
// a ring of kRing tiles in flight through cp.async (16-byte copies only: no registers held, no element
// loads), so every SM has tens of kilobytes of reads outstanding whatever the occupancy, and writes each tile
// as 16-byte chunks of kV channels of one position. A tile is a run of channels of one batch, either whole
// rows (flat: the tile is one contiguous span of x or w, whose start is 16-byte aligned as C is a multiple of
// kV, so any L works) or, where L is long and a multiple of kV, 64-position segments of up to 64 channels
// (segments: each row chunk is aligned), stored with their 16-byte chunks swizzled by channel group so the
// column reads of the write phase fall in distinct banks. The host's repack_plan (igemm.cpp) mirrors
// RepackPlan below and refuses repack 2 where neither form fits a ring stage (repack 1 runs there), and where
// x or w is not 16-byte aligned Family::variant runs repack 1. It lives in a template of its own
// (Family::template_of), so the records of repack 0 / 1 stay current.
#pragma once

#include "conv2d/conv2d.cuh"

namespace jitune {
namespace conv {

/// How one batched transpose [B][C][L] -> [B][L][C] is cut into tiles of at most `capacity` elements: kc
/// channels x kl positions (kl elements a staged channel), flat (whole rows, one span) or segments (swizzled
/// chunks).
struct RepackPlan {
  int kc = 0, kl = 0, c_tiles = 0, l_tiles = 0;
  bool flat = true;
  long long tiles(long long batches) const { return batches * c_tiles * l_tiles; }
};

/// Tiles a block of the copies of x and of the unstaging of y aim at (balanced_channels).
constexpr int kRepackTilesPerBlock = 1, kUnstageTilesPerBlock = 1;

/// Channels a tile of whole rows, kc of c at least, for `batches` batches over `blocks` blocks: narrowed
/// (whole kV groups, split evenly) until every block has kPerBlock tiles or a tile is kV channels. A block
/// alone with one tile copies it at one SM's rate while the others wait at the barrier (N32 C256 14x14: 96
/// tiles of 88 channels on 132 blocks spent 7.5 us copying 4.4 MB; bench/RESULTS.md 2026-11-29).
template <int kPerBlock>
__device__ __forceinline__ int balanced_channels(int kc, int c, long long batches, int blocks, int v) {
  const int most = (c + v - 1) / v;  // tiles of kV channels
  int parts = (c + kc - 1) / kc;
  while (parts < most && batches * parts < static_cast<long long>(kPerBlock) * blocks) ++parts;
  return ((c + parts - 1) / parts + v - 1) / v * v;
}

/// The host's repack_plan mirrors this (a plan with kc 0 means neither form fits: the host refuses repack 2).
/// The device narrows flat tiles further for balance (balanced_channels), which changes no limit the host
/// checks.
__device__ __forceinline__ RepackPlan repack_plan(int c, int l, int capacity, int v) {
  RepackPlan plan;
  const int wanted = c < 64 ? c : 64;
  const int flat_c = (capacity / l) / v * v;  // whole rows a stage holds, in kV channel groups
  const int flat = flat_c < c ? flat_c : c;
  if (flat < wanted && l % v == 0 && capacity >= 64 * v) {
    // Segments of 64 positions (8 or 16 chunks a row: the swizzle's span), as many channels as fit, up to 64.
    int kc = wanted;  // halved in whole kV groups until 64 positions of it fit (kV channels always do)
    while (kc > v && kc * 64 > capacity) kc = kc / 2 / v * v > v ? kc / 2 / v * v : v;
    const int kl = (capacity / kc) / 64 * 64;
    plan.kc = kc, plan.kl = kl < l ? kl : (l + 63) / 64 * 64, plan.flat = false;
  } else if (flat >= v) {
    // Whole rows, the channels split evenly over the tiles (C = 512 of 7x7: two tiles of 256, not 496, 16).
    const int parts = (c + flat - 1) / flat;
    plan.kc = ((c + parts - 1) / parts + v - 1) / v * v, plan.kl = l, plan.flat = true;
  } else {
    return plan;
  }
  plan.c_tiles = (c + plan.kc - 1) / plan.kc;
  plan.l_tiles = plan.flat ? 1 : (l + plan.kl - 1) / plan.kl;
  return plan;
}

/// repack_plan with flat tiles narrowed so `batches` batches give every one of `blocks` blocks kPerBlock
/// tiles.
template <int kPerBlock>
__device__ __forceinline__ RepackPlan balanced_plan(int c, int l, int capacity, int v, long long batches,
                                                    int blocks) {
  RepackPlan plan = repack_plan(c, l, capacity, v);
  if (plan.flat && plan.kc > 0) {
    plan.kc = balanced_channels<kPerBlock>(plan.kc, c, batches, blocks, v);
    plan.c_tiles = (c + plan.kc - 1) / plan.kc;
  }
  return plan;
}

// The ring of the batched transposes of w (tiles first) and x into ws and xs; `stage` is the shared memory,
// kRing buffers of `capacity` elements. Ends with every copy landed and every write issued (the grid barrier
// follows).
template <class T, int kC, int kThreads, int kRing>
__device__ __forceinline__ void repack_ring(const T* x, const T* w, T* xs, T* ws, int n, int hw, int k,
                                            int rs, T* stage, int capacity) {
  constexpr int kV = 16 / sizeof(T);
  using Word = typename RawBits<sizeof(T)>::type;
  const RepackPlan pw = repack_plan(kC, rs, capacity, kV);
  const RepackPlan px = balanced_plan<kRepackTilesPerBlock>(kC, hw, capacity, kV, n, gridDim.x);
  const long long tw = pw.tiles(k), total = tw + px.tiles(n);
  const int tid = threadIdx.x;
  // Tile t: (source, destination, plan, batch, first channel, first position, channels, positions).
  struct Tile {
    const T* src;
    T* dst;
    RepackPlan plan;
    int l, c0, l0, cn, ln;
    long long b;
  };
  auto tile_of = [&](long long t) {
    Tile d;
    const bool is_w = t < tw;
    d.plan = is_w ? pw : px;
    d.src = is_w ? w : x;
    d.dst = is_w ? ws : xs;
    d.l = is_w ? rs : hw;
    const long long u = is_w ? t : t - tw;
    const int lt = static_cast<int>(u % d.plan.l_tiles);
    const long long rest = u / d.plan.l_tiles;
    const int ct = static_cast<int>(rest % d.plan.c_tiles);
    d.b = rest / d.plan.c_tiles;
    d.c0 = ct * d.plan.kc, d.l0 = lt * d.plan.kl;
    d.cn = kC - d.c0 < d.plan.kc ? kC - d.c0 : d.plan.kc;
    d.ln = d.l - d.l0 < d.plan.kl ? d.l - d.l0 : d.plan.kl;
    return d;
  };
  auto copy_in = [&](long long t, T* buf) {
    const Tile d = tile_of(t);
    const T* const rows = d.src + (d.b * kC + d.c0) * d.l;
    if (d.plan.flat) {
      const int chunks = d.cn * d.l / kV;  // one span: cn whole rows
      for (int j = tid; j < chunks; j += kThreads) cp_async_16<false>(buf + j * kV, rows + j * kV, true);
    } else {
      const int per_row = d.ln / kV;
      for (int j = tid; j < d.cn * per_row; j += kThreads) {
        const int c = j / per_row, q = j - c * per_row;
        cp_async_16<false>(buf + c * d.plan.kl + ((q ^ ((c / kV) & 7)) * kV),
                           rows + static_cast<long long>(c) * d.l + d.l0 + q * kV, true);
      }
    }
  };
  auto write_out = [&](long long t, const T* buf) {
    const Tile d = tile_of(t);
    const Word* const words = reinterpret_cast<const Word*>(buf);
    const int groups = d.cn / kV;
    for (int j = tid; j < d.ln * groups; j += kThreads) {
      const int pos = j / groups, cv = j - pos * groups;
      const int at = d.plan.flat ? pos : (((pos / kV) ^ (cv & 7)) * kV + pos % kV);
      unsigned h[kV];
#pragma unroll
      for (int e = 0; e < kV; ++e) h[e] = words[(cv * kV + e) * d.plan.kl + at];
      // One st.global.cg.v4 (a plain store of the uint4 compiled to four 4-byte stores).
      __stcg(reinterpret_cast<uint4*>(d.dst + (d.b * d.l + d.l0 + pos) * kC + d.c0 + cv * kV),
             pack_chunk<T>(h));
    }
  };
  const long long first = blockIdx.x, step = gridDim.x;
  const long long mine = first < total ? (total - 1 - first) / step + 1 : 0;
#pragma unroll
  for (int s = 0; s < kRing - 1; ++s) {
    if (s < mine) copy_in(first + s * step, stage + s * capacity);
    cp_async_commit();
  }
  for (long long i = 0; i < mine; ++i) {
    const long long ahead = i + kRing - 1;
    if (ahead < mine) copy_in(first + ahead * step, stage + (ahead % kRing) * capacity);
    cp_async_commit();
    cp_async_wait<kRing - 1>();
    __syncthreads();
    write_out(first + i * step, stage + (i % kRing) * capacity);
    __syncthreads();  // the buffer written out is refilled next iteration
  }
  cp_async_wait<0>();
}

// y from the workspace's channels-last copy ys {N,PQ,K} to the caller's NCHW y {N,K,PQ} with the epilogue,
// for output images whose P * Q is not a multiple of kV (igemm.cuh stores NCHW element by element there). A
// tile is kc output channels of one image, all PQ positions: its part of y is one contiguous span (its start
// 16-byte aligned as K and kc are multiples of kV), so it is written as 16-byte chunks straight from shared
// memory, staged [kc][PQ] by a scatter of each 16-byte chunk of ys (kV channels of one position) read through
// registers, four in flight.
template <class T, class Epi, int kThreads>
__device__ __forceinline__ void unstage_y(const Args<T>& a, const T* ys, int k, T* stage, int capacity) {
  constexpr int kV = 16 / sizeof(T);
  using Word = typename RawBits<sizeof(T)>::type;
  const int pq = a.p * a.q;
  const int fit = (capacity / pq) / kV * kV;
  const int kc = balanced_channels<kUnstageTilesPerBlock>(fit < k ? fit : k, k, a.n, gridDim.x, kV);
  const int parts = (k + kc - 1) / kc;
  const long long tiles = static_cast<long long>(a.n) * parts;
  Word* const words = reinterpret_cast<Word*>(stage);
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int img = static_cast<int>(t / parts), c0 = static_cast<int>(t % parts) * kc;
    const int cn = k - c0 < kc ? k - c0 : kc, groups = cn / kV, chunks = pq * groups;
    const T* const src = ys + static_cast<long long>(img) * pq * k + c0;
    for (int j0 = threadIdx.x; j0 < chunks; j0 += 4 * kThreads) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = j0 + u * kThreads, pos = j / groups, cv = j - pos * groups;
        if (j < chunks)
          v[u] = *reinterpret_cast<const uint4*>(src + static_cast<long long>(pos) * k + cv * kV);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = j0 + u * kThreads, pos = j / groups, cv = j - pos * groups;
        if (j >= chunks) break;
        const Word* const e = reinterpret_cast<const Word*>(&v[u]);
#pragma unroll
        for (int q = 0; q < kV; ++q) words[(cv * kV + q) * pq + pos] = e[q];
      }
    }
    __syncthreads();
    const long long base = (static_cast<long long>(img) * k + c0) * pq;
    for (int j = threadIdx.x; j < cn * pq / kV; j += kThreads) {
      Pack<T, kV> out = *reinterpret_cast<const Pack<T, kV>*>(stage + j * kV);
      const T* const r = a.res + base + j * kV;
      apply_epilogue_pack<Epi>(out, r, (reinterpret_cast<unsigned long long>(r) & 15) == 0);
      __stcs(reinterpret_cast<uint4*>(a.y + base + j * kV), *reinterpret_cast<const uint4*>(&out));
    }
    __syncthreads();  // the stage is refilled by the next tile
  }
}

/// Buffers of the repack ring.
constexpr int kRepackRing = 4;

/// The GEMM's epilogue: the call's, or none where y is staged (the unstaging applies it).
template <int kYStaged, class Epi>
struct YStagedEpi {
  using type = Epi;
};
template <class Epi>
struct YStagedEpi<1, Epi> {
  using type = NoEpilogue;
};

// Tunables and problem constants as conv2d_igemm's (igemm.cuh); the layout is NCHW, C a multiple of 16 /
// sizeof(T), stages 2 to 8. Workspace (igemm_prep): the barrier counter (kRepackHeaderBytes), the split-K
// part, the copy of x, the copy of w, as repack 1's.
template <class T, int kC, int kK, int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW,
          int kTileM, int kTileN, int kTileK, int kWarpsM, int kWarpsN, int kMinBlocks, int kMma, int kStages,
          int kSplitK, int kBias, int kYStaged, class Epi = NoEpilogue>
__global__ void __launch_bounds__((kMma ? 128 : 32) * kWarpsM * kWarpsN, kMinBlocks)
    conv2d_igemm_repacked(Args<T> a, void* workspace) {
  extern __shared__ float4 shared_raw[];
  T* const smem =
      reinterpret_cast<T*>(kMma ? (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull
                                : reinterpret_cast<unsigned long long>(shared_raw));
  constexpr int kV = 16 / sizeof(T);
  static_assert(kC % kV == 0 && kStages > 0, "repacking feeds the cp.async pipeline 16-byte taps");
  constexpr int kThreads = (kMma ? 128 : 32) * kWarpsM * kWarpsN;
  using G = IgemmGeometry<kTileM, kTileN, kTileK, kStages, kMma, sizeof(T)>;
  // The ring lives in the GEMM's stage buffers (the host sizes the shared memory for at least
  // min(stages, stages per split) of them), in kRepackRing buffers of whole 16-byte chunks.
  constexpr int kKTiles = (kC * kR * kS + kTileK - 1) / kTileK;
  constexpr int kPerSplit = (kKTiles + kSplitK - 1) / kSplitK;
  constexpr int kBuffers = kStages < kPerSplit ? kStages : kPerSplit;
  constexpr int kCapacity = kBuffers * G::kStage / kRepackRing / kV * kV;
  const int hw = a.h * a.w;
  const int tiles_m = (a.n * a.p * a.q + kTileM - 1) / kTileM, tiles_n = (kK + kTileN - 1) / kTileN;
  const int tiles_mn = tiles_m * tiles_n;
  unsigned char* const bytes = static_cast<unsigned char*>(workspace);
  unsigned* const barrier = reinterpret_cast<unsigned*>(bytes);
  void* const split_ws = bytes + kRepackHeaderBytes;
  const long long split_bytes =
      kSplitK > 1
          ? igemm_counter_bytes(tiles_mn) + static_cast<long long>(tiles_mn) * kSplitK * kTileM * kTileN * 4
          : 0;
  T* const xs = reinterpret_cast<T*>(bytes + kRepackHeaderBytes + igemm_align256(split_bytes));
  T* const ws = xs + igemm_align256(static_cast<long long>(a.n) * hw * kC * sizeof(T)) / sizeof(T);
  T* const ys = ws + igemm_align256(static_cast<long long>(kK) * kR * kS * kC * sizeof(T)) / sizeof(T);

  repack_ring<T, kC, kThreads, kRepackRing>(a.x, a.wt, xs, ws, a.n, hw, kK, kR * kS, smem, kCapacity);
  grid_barrier(barrier, 1);

  Args<T> b = a;
  b.x = xs;
  b.wt = ws;
  if constexpr (kYStaged) b.y = ys;  // channels last, plus bias; the epilogue runs as y is unstaged
  for (int t = blockIdx.x; t < tiles_mn * kSplitK; t += gridDim.x) {
    igemm_tile<T, 1, kYStaged ? 1 : 0, kC, kK, kR, kS, kStrideH, kStrideW, kDilH, kDilW, kTileM, kTileN,
               kTileK, kWarpsM, kWarpsN, kMma, kStages, kSplitK, kBias, 0,
               typename YStagedEpi<kYStaged, Epi>::type>(
        b, split_ws, smem, t % tiles_m, (t / tiles_m) % tiles_n, t / tiles_mn, tiles_m, tiles_mn);
    __syncthreads();  // the tile's epilogue has read the shared memory the next tile's copies write
  }
  if constexpr (kYStaged) {
    grid_barrier(barrier, 2);
    unstage_y<T, Epi, kThreads>(a, ys, kK, smem, kBuffers * G::kStage / kV * kV);
  }
  // Every block passed the barriers before counting itself out here: the last one resets it for the next
  // launch.
  if (threadIdx.x == 0 && atomicAdd(barrier, 1u) == (kYStaged ? 3 : 2) * gridDim.x - 1)
    atomicExch(barrier, 0u);
}

}  // namespace conv
}  // namespace jitune
