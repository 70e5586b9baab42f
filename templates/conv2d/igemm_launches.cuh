// conv2d algo 1, repack 3: an NCHW convolution repacked to channels last in a call of up to three launches
// (the family's steps), where repack 1 and 2 run one cooperative launch:
// 1. conv2d_repack_copy, a step before: x {N,C,H,W} -> {N,H,W,C} and w {K,C,R,S} -> {K,R,S,C} into the
//    workspace, a block per tile of 64 positions x 64 16-bit (32 float) channels through shared memory, four
//    blocks an SM (64 registers; N32 C = 256 14x14's 659 tiles are 1.25 waves of the H200's 132 SMs), a
//    tile's loads in flight together where it takes whole rows, in two rounds where rows are cut in pieces;
//    rows of 65 to 256 positions (14x14, 16x16) are taken whole, 32 bytes of channels a tile (copy_narrow).
// 2. conv2d_igemm_after_copy, the main kernel: igemm.cuh's channels-last cp.async pipeline over the copies,
//    a block per output tile and split, as the channels-last kernel launches; where y is staged (P * Q not a
//    multiple of the 16-byte chunk) it stores y channels last into the workspace, else NCHW with the
//    epilogue.
// 3. conv2d_unstage, a step after where y is staged: ys {N,PQ,K} -> NCHW y with the epilogue, tiled as the
//    copy.
//
// Why: inside one cooperative launch the GEMM ran 3-5 us slower than the same tiles as the channels-last
// kernel (N32 C = K = 256 14x14 float16 on the H200: 24.3-25.1 us with the copies switched off against 21.1;
// bench/RESULTS.md 2026-11-29), and the copies ran at the GEMM's occupancy (one or two blocks an SM). The
// main kernel and the unstaging are programmatic launches (sm_90): each waits for the previous kernel
// (wait_for_previous_kernel) before it touches memory, and the kernel before lets it start its blocks early
// (start_next_kernel), so its launch and prologue overlap the previous one's tail. The steps' first form ran
// repack 2's ring of 16 KiB buffers in 396 blocks: 10-11 us for the copy and 5 us for the unstaging of N32
// C = K = 256 14x14 float16 (L2-resident, H200, bench/RESULTS.md 2026-11-29, twenty-fourth session).
//
// The workspace is repack 1's (igemm_prep): the 256-byte header (unused here), the split-K part, x, w, then y
// where staged; the host passes the copies' addresses. It lives in a template of its own
// (Family::template_of), so the records of repack 0-2 stay current.
#pragma once

#include "common/pdl.cuh"
#include "conv2d/igemm_repack.cuh"

namespace jitune {
namespace conv {

/// Threads of the copy and unstaging kernels.
constexpr int kStepThreads = 256;
/// Both steps transpose tiles of at most kStepPositions positions x kStepWords 4-byte words of channels (64
/// 16-bit or 32 float channels) through shared memory, kStepPitch words a position (or, in the unstaging, 65
/// / 66 elements a channel) so that a warp's column of positions falls in distinct banks.
constexpr int kStepPositions = 64, kStepWords = 32, kStepPitch = kStepWords + 1;
/// Rows of kStepPositions + 1 to kNarrowMax positions are copied whole, 32 bytes of channels (8 words) a
/// tile, kNarrowPitch words a position (a warp's 16 positions x 2 chunks then meet at most twice a bank).
constexpr int kNarrowMax = 256, kNarrowWords = 8, kNarrowPitch = kNarrowWords + 1;
/// The copy's shared memory: the larger of the two tile forms.
constexpr int kCopyTileWords = kNarrowMax * kNarrowPitch;
static_assert(kCopyTileWords >= kStepPositions * kStepPitch, "the cut tiles fit the copy's shared memory");

/// n / d by a multiply-high, exact for n * d < 2^32 (here n < 2^12, d <= kNarrowMax; d == 1 passes n
/// through).
struct StepDiv {
  unsigned m;
  __device__ __forceinline__ explicit StepDiv(unsigned d) : m(d > 1 ? 0xffffffffu / d + 1 : 0u) {}
  __device__ __forceinline__ int operator()(int n) const {
    return m ? static_cast<int>(__umulhi(static_cast<unsigned>(n), m)) : n;
  }
};

/// How the positions of a [rows][l] source split into tiles: `parts` tiles of at most `span` positions (l cut
/// evenly into the fewest pieces of at most kStepPositions), and where a tile takes whole rows (span == l)
/// `groups` row groups of kRows rows each (a short row, w's R * S taps, still fills a tile). The copy takes
/// rows of kStepPositions + 1 to kNarrowMax positions whole instead (`narrow`: copy_narrow's tiles); the
/// unstaging always cuts. The host's repack3_tiles mirrors it. A constant for w (R * S is a template
/// parameter), 32-bit arithmetic once a block for x.
struct StepSplit {
  int parts, span, groups;
  bool narrow;
  __host__ __device__ constexpr explicit StepSplit(int l)
      : parts((l + kStepPositions - 1) / kStepPositions),
        span((l + (l + kStepPositions - 1) / kStepPositions - 1) /
             ((l + kStepPositions - 1) / kStepPositions)),
        groups(l <= kStepPositions ? kStepPositions / l : 1),
        narrow(l > kStepPositions && l <= kNarrowMax) {}
  /// The copy's tiles of `rows` rows of T.
  template <class T>
  __host__ __device__ constexpr unsigned copy_tiles(unsigned rows) const {
    const unsigned per = narrow ? kNarrowWords * 4 / sizeof(T) : groups * (kStepWords * 4 / sizeof(T));
    return (rows + per - 1) / per * (narrow ? 1u : static_cast<unsigned>(parts));
  }
};

// One tile t of the batched transpose [B][C][l] -> [B][l][C] of `rows` = B * kC rows (row g is channel g % kC
// of batch g / kC; rows < 2^31, tiles < 2^31): groups x kRows consecutive rows by one piece of `tn`
// positions. kL is l where it is a constant (w's taps), 0 where it is not. Where a tile takes whole rows it
// is one contiguous span starting 16 bytes aligned (its first row is a multiple of kRows and the source is
// 16-byte aligned: Family::variant runs repack 1 otherwise), read as 16-byte vectors, each element placed by
// one multiply-high and a step. Rows cut in pieces (33 positions or more, any alignment) are read element by
// element: a warp takes every eighth word of rows, its lanes consecutive positions, so each thread's
// addresses are fixed offsets of one base. Element (row, position) lands in shared memory at position row p =
// group * tn + position, word (row % kRows) / elements a word; each 16-byte chunk (kV channels of one
// position) is then read back as four words (the pitch of 33 puts a warp's 8 chunks x 4 positions in 32
// banks) and stored to dst as one 16-byte write.
template <class T, int kC, int kL>
__device__ __forceinline__ void copy_tile(const T* __restrict__ src, T* __restrict__ dst, unsigned rows,
                                          int l_in, const StepSplit& split, unsigned t, unsigned* tile) {
  constexpr int kRows = kStepWords * 4 / static_cast<int>(sizeof(T)), kV = 16 / static_cast<int>(sizeof(T));
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T)), kWarps = kStepThreads / 32;
  constexpr int kVecs = kStepPositions * kStepWords * 4 / 16 / kStepThreads;
  using Word = typename RawBits<sizeof(T)>::type;
  Word* const s = reinterpret_cast<Word*>(tile);
  const int l = kL > 0 ? kL : l_in;
  const unsigned rt = t / split.parts, g0 = rt * split.groups * kRows;
  const int l0 = static_cast<int>(t - rt * split.parts) * split.span;
  const int tn = split.span < l - l0 ? split.span : l - l0;
  const int rn = rows - g0 < static_cast<unsigned>(split.groups * kRows) ? static_cast<int>(rows - g0)
                                                                         : split.groups * kRows;
  const T* const base = src + static_cast<long long>(g0) * l + l0;
  const StepDiv by_tn(static_cast<unsigned>(tn));
  if (split.span == l) {
    // rn is a multiple of kV (kC is), so the span is whole vectors.
    const int vecs = rn * tn / kV;
    const uint4* const vb = reinterpret_cast<const uint4*>(base);
    uint4 v[kVecs];
#pragma unroll
    for (int u = 0; u < kVecs; ++u)
      if (threadIdx.x + u * kStepThreads < vecs) v[u] = __ldg(vb + threadIdx.x + u * kStepThreads);
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int j = threadIdx.x + u * kStepThreads;
      if (j < vecs) {
        int row = by_tn(j * kV), pos = j * kV - row * tn;
        const Word* const e = reinterpret_cast<const Word*>(&v[u]);
#pragma unroll
        for (int q = 0; q < kV; ++q) {
          s[((row / kRows) * tn + pos) * kStepPitch * kPerWord + row % kRows] = e[q];
          if (++pos == tn) pos = 0, ++row;
        }
      }
    }
  } else {
    // A warp takes rows kPerWord * (warp + kWarps * i) + (0 .. kPerWord - 1), a word of channels a position,
    // its lanes two positions each (tn <= 64), in two rounds of half its loads (no spills at four blocks an
    // SM). 64 * l < 2^31 (the host's rule): 32-bit offsets.
    constexpr int kPerWarp = kStepWords / kWarps, kHalf = kPerWarp / 2;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const T* const mine = base + static_cast<long long>(warp * kPerWord) * l + lane;
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      unsigned v[kHalf][2][kPerWord];
#pragma unroll
      for (int i = 0; i < kHalf; ++i)
#pragma unroll
        for (int k = 0; k < 2; ++k)
#pragma unroll
          for (int h = 0; h < kPerWord; ++h) {
            const int row = (warp + (round * kHalf + i) * kWarps) * kPerWord + h;
            if (row < rn && lane + 32 * k < tn)
              v[i][k][h] = load_bits(mine + (((round * kHalf + i) * kWarps * kPerWord + h) * l + 32 * k));
          }
#pragma unroll
      for (int i = 0; i < kHalf; ++i)
#pragma unroll
        for (int k = 0; k < 2; ++k)
          if ((warp + (round * kHalf + i) * kWarps) * kPerWord < rn && lane + 32 * k < tn)
            tile[(lane + 32 * k) * kStepPitch + warp + (round * kHalf + i) * kWarps] =
                kPerWord == 1 ? v[i][k][0] : (v[i][k][0] & 0xffffu) | (v[i][k][kPerWord - 1] << 16);
    }
  }
  __syncthreads();
  // Chunks: position row p = j / 8, chunk cv = j % 8 of it; the tile's first row is channel c0 of batch b0.
  const unsigned b0 = g0 / kC;
  const int c0 = static_cast<int>(g0 - b0 * kC);
  T* const out = dst + (static_cast<long long>(b0) * l + l0) * kC;
  const int chunks = split.groups * tn * (kRows / kV);
  for (int j = threadIdx.x; j < chunks; j += kStepThreads) {
    const int p = j / (kRows / kV), cv = j % (kRows / kV);
    const int group = by_tn(p), row = group * kRows + cv * kV;
    if (row < rn) {
      const unsigned* const w = tile + p * kStepPitch + cv * (kV / kPerWord);
      const int c = c0 + row, db = c / kC;  // batches past b0 (rows of a tile span batches where kC < kRows)
      // One 16-byte store, kept in L2 for the GEMM (a plain store of the uint4 compiled to four 4-byte
      // stores: four times the L2 sectors; the intrinsic is one st.global.cg.v4).
      __stcg(reinterpret_cast<uint4*>(out + (static_cast<long long>(db) * l + p - group * tn) * kC +
                                      (c - db * kC)),
             make_uint4(w[0], w[1], w[2], w[3]));
    }
  }
}

// One tile t of the batched transpose [B][C][l] -> [B][l][C] where rows are kStepPositions + 1 to kNarrowMax
// positions long (StepSplit::narrow): kNR consecutive rows (32 bytes of channels a position; kV where only
// those are left) whole, one contiguous span starting 32 bytes aligned, read as 16-byte vectors (a thread's
// two in flight together) and placed position-major, kNarrowPitch words a position; each position's one or
// two 16-byte chunks then go out as one 32-byte sector. The cut form (copy_tile) read such rows element by
// element.
template <class T, int kC, int kL>
__device__ __forceinline__ void copy_narrow(const T* __restrict__ src, T* __restrict__ dst, unsigned rows,
                                            int l_in, unsigned t, unsigned* tile) {
  constexpr int kNR = kNarrowWords * 4 / static_cast<int>(sizeof(T)), kV = 16 / static_cast<int>(sizeof(T));
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  constexpr int kVecs = kNarrowMax * kNR / kV / kStepThreads;
  using Word = typename RawBits<sizeof(T)>::type;
  Word* const s = reinterpret_cast<Word*>(tile);
  const int l = kL > 0 ? kL : l_in;
  const unsigned g0 = t * kNR;
  const int rn = rows - g0 < static_cast<unsigned>(kNR) ? static_cast<int>(rows - g0) : kNR;  // kV or kNR
  const uint4* const vb = reinterpret_cast<const uint4*>(src + static_cast<long long>(g0) * l);
  const int vecs = rn * l / kV;
  const StepDiv by_l(static_cast<unsigned>(l));
  uint4 v[kVecs];
#pragma unroll
  for (int u = 0; u < kVecs; ++u)
    if (threadIdx.x + u * kStepThreads < vecs) v[u] = __ldg(vb + threadIdx.x + u * kStepThreads);
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int j = threadIdx.x + u * kStepThreads;
    if (j < vecs) {
      int row = by_l(j * kV), pos = j * kV - row * l;
      const Word* const e = reinterpret_cast<const Word*>(&v[u]);
#pragma unroll
      for (int q = 0; q < kV; ++q) {
        s[pos * kNarrowPitch * kPerWord + row] = e[q];
        if (++pos == l) pos = 0, ++row;
      }
    }
  }
  __syncthreads();
  // Chunk cv of position p (two a position where the tile has kNR rows); the tile's first row is channel c0
  // of batch b0, and its chunks never straddle a batch (C is a multiple of kV).
  const unsigned b0 = g0 / kC;
  const int c0 = static_cast<int>(g0 - b0 * kC), per = rn / kV;
  T* const out = dst + static_cast<long long>(b0) * l * kC;
  for (int j = threadIdx.x; j < l * per; j += kStepThreads) {
    const int p = per == 2 ? j >> 1 : j, cv = per == 2 ? j & 1 : 0;
    const unsigned* const w = tile + p * kNarrowPitch + cv * (kV / kPerWord);
    const int c = c0 + cv * kV, db = c / kC;
    __stcg(reinterpret_cast<uint4*>(out + (static_cast<long long>(db) * l + p) * kC + (c - db * kC)),
           make_uint4(w[0], w[1], w[2], w[3]));
  }
}

/// Lets the stream's next kernel, a programmatic launch, start its blocks once every block of this one has
/// passed here (it waits for this kernel's end before touching memory: wait_for_previous_kernel).
__device__ __forceinline__ void start_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Step before the GEMM. T, kC, kK, kRS (R * S): the problem's type, channels, filters and filter taps. A
// block per tile (the host launches repack3_tiles blocks; any grid is correct): x's tiles, then w's.
template <class T, int kC, int kK, int kRS>
__global__ void __launch_bounds__(kStepThreads, 4) conv2d_repack_copy(Args<T> a, T* xs, T* ws) {
  __shared__ unsigned tile[kCopyTileWords];
  start_next_kernel();  // the GEMM's blocks take their places and wait for this kernel's end
  constexpr unsigned kWRows = static_cast<unsigned>(kK) * kC;
  constexpr StepSplit kSw(kRS);
  constexpr unsigned kWTiles = kSw.copy_tiles<T>(kWRows);
  const int hw = a.h * a.w;
  const StepSplit sx(hw);
  const unsigned x_rows = static_cast<unsigned>(a.n) * kC;
  const unsigned x_tiles = sx.copy_tiles<T>(x_rows);
  for (unsigned t = blockIdx.x; t < x_tiles + kWTiles; t += gridDim.x) {
    if (t < x_tiles) {
      if (sx.narrow)
        copy_narrow<T, kC, 0>(a.x, xs, x_rows, hw, t, tile);
      else
        copy_tile<T, kC, 0>(a.x, xs, x_rows, hw, sx, t, tile);
    } else if constexpr (kSw.narrow) {
      copy_narrow<T, kC, kRS>(a.wt, ws, kWRows, kRS, t - x_tiles, tile);
    } else {
      copy_tile<T, kC, kRS>(a.wt, ws, kWRows, kRS, kSw, t - x_tiles, tile);
    }
    __syncthreads();  // the tile's shared memory is refilled by the next
  }
}

// The main kernel: tunables and problem constants as conv2d_igemm_repacked's; `workspace` is the call's (the
// split-K part after the header), xs and ws the copies, ys the staged y (null where y is not staged).
template <class T, int kC, int kK, int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW,
          int kTileM, int kTileN, int kTileK, int kWarpsM, int kWarpsN, int kMinBlocks, int kMma, int kStages,
          int kSplitK, int kBias, int kYStaged, class Epi = NoEpilogue>
__global__ void __launch_bounds__((kMma ? 128 : 32) * kWarpsM * kWarpsN, kMinBlocks)
    conv2d_igemm_after_copy(Args<T> a, void* workspace, const T* xs, const T* ws, T* ys) {
  extern __shared__ float4 shared_raw[];
  T* const smem =
      reinterpret_cast<T*>(kMma ? (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull
                                : reinterpret_cast<unsigned long long>(shared_raw));
  static_assert(kC % (16 / sizeof(T)) == 0 && kStages > 0, "the cp.async pipeline reads 16-byte taps");
  const int tiles_m = (a.n * a.p * a.q + kTileM - 1) / kTileM, tiles_n = (kK + kTileN - 1) / kTileN;
  const int tiles_mn = tiles_m * tiles_n, t = blockIdx.x;
  Args<T> b = a;
  b.x = xs;
  b.wt = ws;
  if constexpr (kYStaged) b.y = ys;  // channels last, plus bias; the epilogue runs as y is unstaged
  wait_for_previous_kernel();        // the copies are the previous kernel's output
  if constexpr (kYStaged) start_next_kernel();  // the unstaging's blocks wait for this kernel's end
  igemm_tile<T, 1, kYStaged ? 1 : 0, kC, kK, kR, kS, kStrideH, kStrideW, kDilH, kDilW, kTileM, kTileN, kTileK,
             kWarpsM, kWarpsN, kMma, kStages, kSplitK, kBias, 0, typename YStagedEpi<kYStaged, Epi>::type>(
      b, static_cast<unsigned char*>(workspace) + kRepackHeaderBytes, smem, t % tiles_m,
      (t / tiles_m) % tiles_n, t / tiles_mn, tiles_m, tiles_mn);
}

// Step after the GEMM, where y is staged: ys {N,PQ,K} -> the caller's NCHW y {N,K,PQ} with the epilogue. A
// block per tile of kRows output channels of one image by one piece of its positions (StepSplit: the host
// launches repack3_unstage_tiles blocks; any grid is correct): 16-byte chunks of ys (kV channels of one
// position), a thread's two in flight, scattered into shared memory as [channel][position] (pitch 66 / 65
// elements), then y's runs of positions written element by element, a warp's lanes along a run, the epilogue
// applied on the way.
template <class T, int kK, class Epi = NoEpilogue>
__global__ void __launch_bounds__(kStepThreads, 4) conv2d_unstage(Args<T> a, const T* ys) {
  constexpr int kRows = kStepWords * 4 / static_cast<int>(sizeof(T)), kV = 16 / static_cast<int>(sizeof(T));
  constexpr int kPitch = kStepPositions + (sizeof(T) == 2 ? 2 : 1), kChunks = kRows / kV;
  constexpr int kLoads = kStepPositions * kChunks / kStepThreads;
  using Word = typename RawBits<sizeof(T)>::type;
  __shared__ unsigned tile[kStepPositions * kStepPitch];
  static_assert(kRows * kPitch * static_cast<int>(sizeof(T)) <= kStepPositions * kStepPitch * 4, "tile fits");
  Word* const s = reinterpret_cast<Word*>(tile);
  const T* const sv = reinterpret_cast<const T*>(tile);
  wait_for_previous_kernel();  // ys is the GEMM's output
  const int pq = a.p * a.q;
  const StepSplit split(pq);
  const unsigned k_tiles = (kK + kRows - 1) / kRows, per_image = k_tiles * split.parts;
  const unsigned tiles = static_cast<unsigned>(a.n) * per_image;  // < 2^31: y's elements are
  for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long img = t / per_image;
    const int rest = static_cast<int>(t - img * per_image);
    const int c0 = rest / split.parts * kRows, l0 = rest % split.parts * split.span;
    const int tn = split.span < pq - l0 ? split.span : pq - l0, cn = kK - c0 < kRows ? kK - c0 : kRows;
    const T* const src = ys + (img * pq + l0) * kK + c0;
    uint4 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int j = threadIdx.x + u * kStepThreads, pos = j / kChunks, cv = j % kChunks;
      if (pos < tn && cv * kV < cn)
        v[u] = *reinterpret_cast<const uint4*>(src + static_cast<long long>(pos) * kK + cv * kV);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int j = threadIdx.x + u * kStepThreads, pos = j / kChunks, cv = j % kChunks;
      if (pos < tn && cv * kV < cn) {
        const Word* const e = reinterpret_cast<const Word*>(&v[u]);
#pragma unroll
        for (int q = 0; q < kV; ++q) s[(cv * kV + q) * kPitch + pos] = e[q];
      }
    }
    __syncthreads();
    // y: a warp takes every eighth channel, its lanes consecutive positions (two a lane: tn <= 64).
    constexpr int kWarps = kStepThreads / 32, kPerWarp = kRows / kWarps;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long at = (img * kK + c0 + warp) * pq + l0 + lane;
    T* const y = a.y + at;
    const T* const r = a.res + at;
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i)
#pragma unroll
      for (int k = 0; k < 2; ++k)
        if (warp + i * kWarps < cn && lane + 32 * k < tn) {
          const long long o = static_cast<long long>(i * kWarps) * pq + 32 * k;
          y[o] = apply_epilogue<Epi>(sv[(warp + i * kWarps) * kPitch + lane + 32 * k], r + o);
        }
    __syncthreads();  // the tile's shared memory is refilled by the next
  }
}

}  // namespace conv
}  // namespace jitune
