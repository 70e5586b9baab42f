// conv2d algo 1, repack 3: an NCHW convolution repacked to channels last in a call of up to three launches
// (the family's steps), where repack 1 and 2 run one cooperative launch:
// 1. conv2d_repack_copy, a step before: x {N,C,H,W} -> {N,H,W,C} and w {K,C,R,S} -> {K,R,S,C} into the
//    workspace by repack 2's ring (igemm_repack.cuh's repack_ring), in blocks of its own size and shared memory,
//    as many as stay resident: the copy runs at the occupancy a copy wants, not the GEMM's.
// 2. conv2d_igemm_after_copy, the main kernel: igemm.cuh's channels-last cp.async pipeline over the copies, a
//    block per output tile and split, as the channels-last kernel launches; where y is staged (P * Q not a
//    multiple of the 16-byte chunk) it stores y channels last into the workspace, else NCHW with the epilogue.
// 3. conv2d_unstage, a step after where y is staged: repack 2's unstaging, with the epilogue.
// Why: inside one cooperative launch the GEMM ran 3-5 us slower than the same tiles as the channels-last kernel
// (N32 C = K = 256 14x14 float16 on the H200: 24.3-25.1 us with the copies switched off against 21.1;
// bench/RESULTS.md 2026-11-29), and the copies ran at the GEMM's occupancy (one or two blocks an SM). The main
// kernel and the unstaging are programmatic launches (sm_90): each waits for the previous kernel
// (wait_for_previous_kernel) before it touches memory, so its launch overlaps the previous one's tail. The
// workspace is repack 1's (igemm_prep): the 256-byte header (unused here), the split-K part, x, w, then y where
// staged; the host passes the copies' addresses. It lives in a template of its own (Family::template_of), so the
// records of repack 0-2 stay current.
#pragma once

#include "common/pdl.cuh"
#include "conv2d/igemm_repack.cuh"

namespace jitune {
namespace conv {

/// Threads of the copy and unstaging kernels, and the elements of one of the copy ring's kRepackRing buffers:
/// 16 KiB, 64 KiB of shared memory a block, three blocks an SM (the host's repack3_copy_capacity mirrors it).
constexpr int kStepThreads = 256, kStepBufferBytes = 16384;

// Step before the GEMM. T, kC, kK, kRS (R * S): the problem's type, channels, filters and filter taps.
template <class T, int kC, int kK, int kRS>
__global__ void __launch_bounds__(kStepThreads) conv2d_repack_copy(Args<T> a, T* xs, T* ws) {
  extern __shared__ float4 repack_copy_smem[];
  constexpr int kCapacity = kStepBufferBytes / static_cast<int>(sizeof(T));
  repack_ring<T, kC, kStepThreads, kRepackRing>(a.x, a.wt, xs, ws, a.n, a.h * a.w, kK, kRS,
                                                reinterpret_cast<T*>(repack_copy_smem), kCapacity);
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
  igemm_tile<T, 1, kYStaged ? 1 : 0, kC, kK, kR, kS, kStrideH, kStrideW, kDilH, kDilW, kTileM, kTileN, kTileK,
             kWarpsM, kWarpsN, kMma, kStages, kSplitK, kBias, 0, typename YStagedEpi<kYStaged, Epi>::type>(
      b, static_cast<unsigned char*>(workspace) + kRepackHeaderBytes, smem, t % tiles_m,
      (t / tiles_m) % tiles_n, t / tiles_mn, tiles_m, tiles_mn);
}

// Step after the GEMM, where y is staged: ys {N,PQ,K} -> the caller's NCHW y with the epilogue.
template <class T, int kK, class Epi = NoEpilogue>
__global__ void __launch_bounds__(kStepThreads) conv2d_unstage(Args<T> a, const T* ys) {
  extern __shared__ float4 unstage_smem[];
  constexpr int kCapacity = kRepackRing * kStepBufferBytes / static_cast<int>(sizeof(T));
  wait_for_previous_kernel();  // ys is the GEMM's output
  unstage_y<T, Epi, kStepThreads>(a, ys, kK, reinterpret_cast<T*>(unstage_smem), kCapacity);
}

}  // namespace conv
}  // namespace jitune
