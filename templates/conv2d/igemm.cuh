// Implicit-GEMM convolution on tensor cores (conv2d algo 1), NCHW or channels last (NHWC): float16 / bfloat16
// storage, float accumulation, mma.sync m16n8k16 (sm_80+), PyTorch conv2d semantics (stride, zero padding,
// dilation, bias).
//
// The convolution as a GEMM: rows m = (n, oy, ox) are output pixels (M = N * P * Q), columns are output
// channels k (K), and the reduction runs over kk, the weights' own order ((c, r, s) for KCRS, (r, s, c) for
// KRSC), so a filter row w[k][0..CRS) is one contiguous GEMM column. A block computes a kTileM x kTileN tile of
// the output; its warps a kWarpsM x kWarpsN grid of (kTileM / kWarpsM) x (kTileN / kWarpsN) warp tiles. The
// reduction is consumed kTileK at a time: the input patch (im2col, never materialised) and the filter slice are
// staged in shared memory as [row][kk] with 8 halves of padding per row (ldmatrix reads without bank conflicts).
// Two ways to feed the stages (kStages):
//  - 0, through registers: two shared buffers, the next slice's global loads in flight while this one is
//    multiplied. Any layout and alignment. NCHW puts a pixel's taps H * W apart, so the patch is gathered
//    element by element: each thread keeps its pixels' byte bases and reads the stage's (c, r, s) offsets and
//    tap displacements from a small table in shared memory (built one stage ahead).
//  - 2 to 4, cp.async: kStages shared buffers written by the copy engine without passing through registers,
//    kStages - 1 slices in flight while one is multiplied. Channels last with C a multiple of 8 and 16-byte
//    aligned x and w (the host's variant falls back to 0 for other pointers): an 8-channel tap is one 16-byte
//    copy, zero-filled outside the input.
// Where the output tiles are too few to fill the GPU, kSplitK blocks share a tile's reduction (split-K): each
// writes its float partial tile to a workspace and the last to arrive sums them in a fixed order.
// Weights are read as 16-byte vectors where C * R * S is a multiple of 8 and the pointer is aligned, element by
// element elsewhere. The epilogue adds the bias in float, converts, stages the tile in shared memory ([k][m] for
// NCHW, [m][k] for NHWC) and writes runs of consecutive outputs as 16-byte stores where the run length is a
// multiple of 8 and y is aligned, coalesced element stores elsewhere.
#pragma once

#include "common/types.cuh"

namespace jitune {
namespace conv {

/// Shared-memory layout of conv2d_igemm, mirrored by the host's igemm_geometry in igemm.cpp.
template <int kTileM, int kTileN, int kTileK, int kStages>
struct IgemmGeometry {
  static constexpr int kPitch = kTileK + 8;                             // halves per staged row
  static constexpr int kStage = (kTileM + kTileN) * kPitch;             // halves per buffer (A then B)
  static constexpr int kBuffers = kStages > 0 ? kStages : 2;
  static constexpr int kOutPitch = kTileM + 8;   // NCHW: halves per staged output channel ([k][m])
  static constexpr int kOutPitchNhwc = kTileN + 8;  // NHWC: halves per staged output pixel ([m][k])
  static constexpr int kMainBytes = kBuffers * kStage * 2;
  static constexpr int kOutBytes =
      (kTileN * kOutPitch > kTileM * kOutPitchNhwc ? kTileN * kOutPitch : kTileM * kOutPitchNhwc) * 2;
  static constexpr int kTableBytes = kStages > 0 ? 0 : 2 * kTileK * 16;  // two stages' reduction tables
  static constexpr int kBytes = (kMainBytes > kOutBytes ? kMainBytes : kOutBytes) + kTableBytes;
};

template <class T>
struct MmaType;
template <>
struct MmaType<__half> {
  __device__ static __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct MmaType<__nv_bfloat16> {
  __device__ static __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/// Bytes of split-K arrival counters at the start of conv2d_igemm's workspace (one per output tile; the host's
/// prep mirrors it).
__host__ __device__ constexpr unsigned igemm_counter_bytes(unsigned tiles) {
  return (tiles * 4u + 255u) / 256u * 256u;
}

/// 16 bytes global -> shared through the copy engine (cp.async, sm_80+), cached in L1 (kL1) or only in L2;
/// zero-filled where `full` is false (then `global` is only a valid address, not read).
template <bool kL1>
__device__ __forceinline__ void cp_async_16(void* shared, const void* global, bool full) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if constexpr (kL1)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(full ? 16 : 0));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits until at most kPending of this thread's committed copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

/// Four 8x8 b16 matrices from shared memory; lane l supplies the (shared-space) address of row l % 8 of
/// matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* shared) {
  ldmatrix_x4(r, static_cast<unsigned>(__cvta_generic_to_shared(shared)));
}

// Tunables (host names in brackets): kTileM [tile_m] output pixels and kTileN [tile_n] output channels per
// block, kTileK [tile_k] reduction elements per stage, kWarpsM x kWarpsN [warps_m, warps_n] warps per block,
// kMinBlocks [min_blocks] blocks per SM the registers must allow (__launch_bounds__; 2 caps 256 threads at 128),
// kStages [stages] 0: register-staged double buffer, 2..4: cp.async pipeline of that many shared buffers,
// kSplitK [split_k] blocks sharing one output tile's reduction (blockIdx.z; workspace: igemm_counter_bytes of
// zeroed arrival counters, one per tile, then a float partial tile per block).
// Problem constants: kNhwc (channels last: x {N,H,W,C}, w {K,R,S,C}, y {N,P,Q,K}), kC, kK channels, kR x kS
// filter, strides, dilations; kBias adds bias[k].
template <class T, int kNhwc, int kC, int kK, int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW, int kTileM,
          int kTileN, int kTileK, int kWarpsM, int kWarpsN, int kMinBlocks, int kStages, int kSplitK, int kBias>
__global__ void __launch_bounds__(32 * kWarpsM * kWarpsN, kMinBlocks) conv2d_igemm(Args<T> a, void* workspace) {
  static_assert(sizeof(T) == 2, "tensor-core implicit GEMM takes float16 or bfloat16");
  static_assert(kStages == 0 || (kNhwc && kC % 8 == 0 && kStages >= 2), "cp.async stages take 8-channel taps");
  using G = IgemmGeometry<kTileM, kTileN, kTileK, kStages>;
  constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  constexpr int kWarpM = kTileM / kWarpsM, kWarpN = kTileN / kWarpsN;
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "warp tiles are multiples of 16 x 16");
  static_assert(kTileK % 16 == 0, "tile_k is a multiple of 16");
  constexpr int kMI = kWarpM / 16, kNI = kWarpN / 8;
  constexpr int kRS = kR * kS, kCRS = kC * kRS;
  constexpr int kKTiles = (kCRS + kTileK - 1) / kTileK;
  constexpr int kChunksPerRow = kTileK / 8;  // 8-element chunks of a staged row
  constexpr int kAChunks = kTileM * kChunksPerRow, kBChunks = kTileN * kChunksPerRow;
  constexpr int kAPer = (kAChunks + kThreads - 1) / kThreads, kBPer = (kBChunks + kThreads - 1) / kThreads;
  constexpr bool kWeightVectors = kCRS % 8 == 0;

  extern __shared__ float4 shared_raw[];
  T* const smem = reinterpret_cast<T*>(shared_raw);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp % kWarpsM, warp_n = warp / kWarpsM;
  const int pq = a.p * a.q;
  const int m_total = a.n * pq;
  const int m0 = blockIdx.x * kTileM, k0 = blockIdx.y * kTileN;
  const long long plane = static_cast<long long>(a.h) * a.w;

  // The pixels this thread gathers: chunk i covers row (tid + i * kThreads) % kTileM of the A tile. Rows past
  // the output get a top row no filter tap reaches (the host keeps H, W and padding below 2^29).
  // base: the byte address of the pixel's tap (0, 0) of channel 0, possibly outside x (padding), only ever
  // offset to taps inside it; one IMAD.WIDE per gathered element.
  unsigned long long base[kAPer];
  int iy_base[kAPer], ix_base[kAPer];
#pragma unroll
  for (int i = 0; i < kAPer; ++i) {
    const int m = m0 + (tid + i * kThreads) % kTileM;
    const bool valid = (kAChunks % kThreads == 0 || tid + i * kThreads < kAChunks) && m < m_total;
    const int img = valid ? m / pq : 0, rem = valid ? m - img * pq : 0;
    const int oy = rem / a.q, ox = rem - oy * a.q;
    iy_base[i] = valid ? oy * kStrideH - a.pad_h : -(1 << 30);
    ix_base[i] = ox * kStrideW - a.pad_w;
    // Element offset of the tap (0, 0) of channel 0: NCHW img*C*H*W + iy*W + ix, NHWC (img*H*W + iy*W + ix)*C.
    const long long rel = valid ? static_cast<long long>(iy_base[i]) * a.w + ix_base[i] : 0;
    const long long offset = kNhwc ? (static_cast<long long>(img) * plane + rel) * kC
                                   : static_cast<long long>(img) * kC * plane + rel;
    base[i] = reinterpret_cast<unsigned long long>(a.x) +
              static_cast<unsigned long long>(offset * static_cast<long long>(sizeof(T)));
  }
  const bool weights_aligned = (reinterpret_cast<unsigned long long>(a.wt) & 15) == 0;
  const bool input_aligned = (reinterpret_cast<unsigned long long>(a.x) & 15) == 0;

  // The reduction table of a stage, double buffered: for each kk of the stage (NCHW: (c, r, s), the KCRS weights'
  // order; NHWC: (r, s, c), the KRSC weights' order) the element offset from a pixel's tap (0, 0) of channel 0
  // (NCHW c*H*W + dy*W + dx, NHWC (dy*W + dx)*C + c) and the tap's row / column displacements dy = r * dil_h,
  // dx = s * dil_w (one padded image is below 2^31 elements: the host checks). Entries past C * R * S get a row
  // displacement no pixel reaches.
  int4* const table = reinterpret_cast<int4*>(smem + 2 * G::kStage);
  auto fill_table = [&](int kt) {
    constexpr int kEntries = (kTileK + kThreads - 1) / kThreads;  // one warp may fill 64 entries
#pragma unroll
    for (int n = 0; n < kEntries; ++n) {
      const int j = tid + n * kThreads;
      if (j >= kTileK) break;
      const int kk = kt * kTileK + j;
      const int c = kNhwc ? kk % kC : kk / kRS, rs = kNhwc ? kk / kC : kk - c * kRS, r = rs / kS, s = rs - r * kS;
      const int dy = r * kDilH, dx = s * kDilW;
      const int offset = kNhwc ? (dy * a.w + dx) * kC + c : c * static_cast<int>(plane) + dy * a.w + dx;
      table[(kt & 1) * kTileK + j] = kk < kCRS ? make_int4(offset, dy, dx, 0) : make_int4(0, -(1 << 30), 0, 0);
    }
  };

  using Chunk = Pack<T, 8>;
  uint4 a_reg[kAPer], b_reg[kBPer];  // 8 elements each, two to a word
  auto load_tile = [&](int kt) {
    const int4* const tab = table + (kt & 1) * kTileK;
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int col = ((tid + i * kThreads) / kTileM) * 8;
      if (kAChunks % kThreads != 0 && tid + i * kThreads >= kAChunks) continue;  // no chunk (nor table entry)
      if (kNhwc && kC % 8 == 0 && input_aligned) {  // 8 channels of one tap: one 16-byte load
        const int4 t = tab[col];
        const int iy = iy_base[i] + t.y, ix = ix_base[i] + t.z;
        a_reg[i] = static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) && static_cast<unsigned>(ix) < static_cast<unsigned>(a.w)
                       ? __ldg(reinterpret_cast<const uint4*>(base[i] + static_cast<long long>(t.x) * 2))
                       : make_uint4(0, 0, 0, 0);
        continue;
      }
      unsigned h[8];  // raw 16-bit elements, zero outside the input
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int4 t = tab[col + e];
        const int iy = iy_base[i] + t.y, ix = ix_base[i] + t.z;
        h[e] = 0;
        if (static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) && static_cast<unsigned>(ix) < static_cast<unsigned>(a.w))
          h[e] = __ldg(reinterpret_cast<const unsigned short*>(base[i] + static_cast<long long>(t.x) * 2));
      }
      a_reg[i] = make_uint4(__byte_perm(h[0], h[1], 0x5410), __byte_perm(h[2], h[3], 0x5410),
                            __byte_perm(h[4], h[5], 0x5410), __byte_perm(h[6], h[7], 0x5410));
    }
#pragma unroll
    for (int i = 0; i < kBPer; ++i) {
      const int idx = tid + i * kThreads;
      const int row = idx / kChunksPerRow, kk0 = kt * kTileK + (idx - row * kChunksPerRow) * 8;
      const int k = k0 + row;
      const bool live = (kBChunks % kThreads == 0 || idx < kBChunks) && (kK % kTileN == 0 || k < kK);
      const T* src = a.wt + static_cast<long long>(k) * kCRS + kk0;
      if (kWeightVectors && weights_aligned) {
        b_reg[i] = live && (kCRS % kTileK == 0 || kk0 < kCRS) ? __ldg(reinterpret_cast<const uint4*>(src))
                                                              : make_uint4(0, 0, 0, 0);
      } else {
        unsigned h[8];
#pragma unroll
        for (int e = 0; e < 8; ++e)
          h[e] = live && kk0 + e < kCRS ? __ldg(reinterpret_cast<const unsigned short*>(src) + e) : 0u;
        b_reg[i] = make_uint4(__byte_perm(h[0], h[1], 0x5410), __byte_perm(h[2], h[3], 0x5410),
                              __byte_perm(h[4], h[5], 0x5410), __byte_perm(h[6], h[7], 0x5410));
      }
    }
  };
  auto store_tile = [&](int buf) {
    T* const s_a = smem + buf * G::kStage;
    T* const s_b = s_a + kTileM * G::kPitch;
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads;
      if (kAChunks % kThreads == 0 || idx < kAChunks)
        *reinterpret_cast<uint4*>(s_a + (idx % kTileM) * G::kPitch + (idx / kTileM) * 8) = a_reg[i];
    }
#pragma unroll
    for (int i = 0; i < kBPer; ++i) {
      const int idx = tid + i * kThreads;
      if (kBChunks % kThreads == 0 || idx < kBChunks) {
        const int row = idx / kChunksPerRow;
        *reinterpret_cast<uint4*>(s_b + row * G::kPitch + (idx - row * kChunksPerRow) * 8) = b_reg[i];
      }
    }
  };

  float acc[kMI][kNI][4];
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < kNI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // One stage's products: per 16-wide step, the warp's A and B fragments by ldmatrix, then its MMAs.
  auto multiply = [&](int buf) {
    const T* const s_a = smem + buf * G::kStage;
    const T* const s_b = s_a + kTileM * G::kPitch;
#pragma unroll
    for (int ks = 0; ks < kTileK; ks += 16) {
      unsigned af[kMI][4], bf[kNI / 2][4];
#pragma unroll
      for (int i = 0; i < kMI; ++i)
        ldmatrix_x4(af[i], s_a + (warp_m * kWarpM + i * 16 + lane % 16) * G::kPitch + ks + (lane / 16) * 8);
#pragma unroll
      for (int j = 0; j < kNI / 2; ++j)
        ldmatrix_x4(bf[j], s_b + (warp_n * kWarpN + j * 16 + (lane / 16) * 8 + lane % 8) * G::kPitch + ks +
                               ((lane / 8) % 2) * 8);
#pragma unroll
      for (int i = 0; i < kMI; ++i)
#pragma unroll
        for (int j = 0; j < kNI; ++j)
          MmaType<T>::mma(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
    }
  };

  // This block's slices of the reduction: split blockIdx.z of kSplitK takes kPerSplit of the kKTiles stages.
  constexpr int kPerSplit = (kKTiles + kSplitK - 1) / kSplitK;
  const int kt0 = blockIdx.z * kPerSplit;
  const int count = kKTiles - kt0 < kPerSplit ? kKTiles - kt0 : kPerSplit;
  if constexpr (kStages > 0) {
    // Stage kt's copies into buffer `buf`: each A chunk is the 8 channels (c .. c + 7) of tap (r, s) of one
    // pixel (kk = (r * S + s) * C + c), each B chunk 8 consecutive weights of one filter row.
    auto copy_stage = [&](int kt, int buf) {
      T* const s_a = smem + buf * G::kStage;
      T* const s_b = s_a + kTileM * G::kPitch;
#pragma unroll
      for (int i = 0; i < kAPer; ++i) {
        const int idx = tid + i * kThreads;
        if (kAChunks % kThreads != 0 && idx >= kAChunks) continue;
        const int col = (idx / kTileM) * 8, kk = kt * kTileK + col;
        const int c = kk % kC, rs = kk / kC, r = rs / kS, dy = r * kDilH, dx = (rs - r * kS) * kDilW;
        const int iy = iy_base[i] + dy, ix = ix_base[i] + dx;
        const bool inside = (kCRS % kTileK == 0 || kk < kCRS) && static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) &&
                            static_cast<unsigned>(ix) < static_cast<unsigned>(a.w);
        const void* src = inside ? reinterpret_cast<const void*>(base[i] + static_cast<long long>((dy * a.w + dx) * kC + c) * 2)
                                 : static_cast<const void*>(a.x);
        cp_async_16<true>(s_a + (idx % kTileM) * G::kPitch + col, src, inside);
      }
#pragma unroll
      for (int i = 0; i < kBPer; ++i) {
        const int idx = tid + i * kThreads;
        if (kBChunks % kThreads != 0 && idx >= kBChunks) continue;
        const int row = idx / kChunksPerRow, col = (idx - row * kChunksPerRow) * 8, kk = kt * kTileK + col;
        const int k = k0 + row;
        const bool live = (kK % kTileN == 0 || k < kK) && (kCRS % kTileK == 0 || kk < kCRS);
        const void* src = live ? static_cast<const void*>(a.wt + static_cast<long long>(k) * kCRS + kk)
                               : static_cast<const void*>(a.wt);
        cp_async_16<false>(s_b + row * G::kPitch + col, src, live);
      }
    };
    // Prologue: stages 0 .. kStages - 2 of this block's slices in flight (a group per stage, empty past them, so
    // the count of groups a wait leaves pending always means the same stages).
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < count) copy_stage(kt0 + st, st);
      cp_async_commit();
    }
    int read = 0, write = kStages - 1;
#pragma unroll 1
    for (int it = 0; it < count; ++it) {
      cp_async_wait<kStages - 2>();  // slice it has landed (this thread's copies) ...
      __syncthreads();               // ... everyone's; and buffer `write` (slice it - 1) is no longer read
      if (it + kStages - 1 < count) copy_stage(kt0 + it + kStages - 1, write);
      cp_async_commit();
      multiply(read);
      read = read + 1 == kStages ? 0 : read + 1;
      write = write + 1 == kStages ? 0 : write + 1;
    }
    cp_async_wait<0>();
    __syncthreads();
  } else if (count > 0) {
    // Tables by stage parity (kt & 1), shared buffers by this block's slice parity (it & 1).
    fill_table(kt0);
    if (count > 1) fill_table(kt0 + 1);
    __syncthreads();
    load_tile(kt0);
    store_tile(0);
    __syncthreads();
#pragma unroll 1
    for (int it = 0; it < count; ++it) {
      const int kt = kt0 + it;
      if (it + 1 < count) load_tile(kt + 1);
      // Stage kt + 2's table goes where stage kt's was (read by load_tile(kt), before the last barrier).
      if (it + 2 < count) fill_table(kt + 2);
      multiply(it & 1);
      if (it + 1 < count) store_tile((it + 1) & 1);  // the other buffer: last read before the previous barrier
      __syncthreads();
    }
  }

  if constexpr (kSplitK > 1) {
    // Split reduction: every block stores its float partial tile (element e of every thread contiguous), then
    // counts itself in; the tile's last block to arrive sums the kSplitK partials in split order (the same
    // result whichever block is last), resets the counter for the next launch and runs the epilogue.
    constexpr int kAcc = kMI * kNI * 4;
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    unsigned* const counters = static_cast<unsigned*>(workspace);
    float* const partials = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) +
                                                     igemm_counter_bytes(gridDim.x * gridDim.y));
    float* const mine = partials + (static_cast<long long>(tile) * kSplitK + blockIdx.z) * kAcc * kThreads;
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < kNI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) __stcg(mine + ((i * kNI + j) * 4 + e) * kThreads + tid, acc[i][j][e]);
    __threadfence();
    __syncthreads();
    bool last = false;
    if (tid == 0) {
      last = atomicAdd(counters + tile, 1u) == kSplitK - 1;
      if (last) counters[tile] = 0;
    }
    if (!__syncthreads_or(last)) return;
    __threadfence();
    const float* const first = partials + static_cast<long long>(tile) * kSplitK * kAcc * kThreads;
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < kNI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float* src = first + ((i * kNI + j) * 4 + e) * kThreads + tid;
          float sum = __ldcg(src);
#pragma unroll 1
          for (int z = 1; z < kSplitK; ++z) sum += __ldcg(src + static_cast<long long>(z) * kAcc * kThreads);
          acc[i][j][e] = sum;
        }
  }

  // Epilogue: accumulators (+ bias) -> shared as T, [k][m] for NCHW, [m][k] for NHWC (the last barrier freed the
  // staging buffers).
  T* const s_out = smem;
  const int gid = lane / 4, tig = lane % 4;
#pragma unroll
  for (int j = 0; j < kNI; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = warp_n * kWarpN + j * 8 + tig * 2 + e;
      float b = 0.f;
      if (kBias && (kK % kTileN == 0 || k0 + col < kK)) b = to_float(a.bias[k0 + col]);
#pragma unroll
      for (int i = 0; i < kMI; ++i) {
        const int row = warp_m * kWarpM + i * 16 + gid;
        if (kNhwc) {
          s_out[row * G::kOutPitchNhwc + col] = from_float<T>(acc[i][j][e] + b);
          s_out[(row + 8) * G::kOutPitchNhwc + col] = from_float<T>(acc[i][j][e + 2] + b);
        } else {
          s_out[col * G::kOutPitch + row] = from_float<T>(acc[i][j][e] + b);
          s_out[col * G::kOutPitch + row + 8] = from_float<T>(acc[i][j][e + 2] + b);
        }
      }
    }
  __syncthreads();
  if constexpr (kNhwc != 0) {
    // A pixel's channels are consecutive in y: y[m * K + k]; 16-byte stores where K is a multiple of 8.
    const bool vectors = kK % 8 == 0 && (reinterpret_cast<unsigned long long>(a.y) & 15) == 0;
    constexpr int kColChunks = kTileN / 8;
#pragma unroll 4
    for (int idx = tid; idx < kTileM * kColChunks; idx += kThreads) {
      const int row = idx / kColChunks, kk = (idx - row * kColChunks) * 8;
      const int m = m0 + row, k = k0 + kk;
      if (m >= m_total || (kK % kTileN != 0 && k >= kK)) continue;
      T* dst = a.y + static_cast<long long>(m) * kK + k;
      const T* src = s_out + row * G::kOutPitchNhwc + kk;
      if (vectors) {
        *reinterpret_cast<Chunk*>(dst) = *reinterpret_cast<const Chunk*>(src);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (kK % 8 == 0 || k + e < kK) dst[e] = src[e];
      }
    }
    return;
  }
  // Each output channel's pixels are consecutive in y within an image: y[(img * K + k) * PQ + pq].
  const bool vectors = pq % 8 == 0 && (reinterpret_cast<unsigned long long>(a.y) & 15) == 0;
  if (vectors) {
    constexpr int kRowChunks = kTileM / 8;
#pragma unroll 4
    for (int idx = tid; idx < kTileN * kRowChunks; idx += kThreads) {
      const int col = idx / kRowChunks, mm = (idx - col * kRowChunks) * 8;
      const int k = k0 + col, m = m0 + mm;
      if ((kK % kTileN != 0 && k >= kK) || m >= m_total) continue;
      const int img = m / pq;
      *reinterpret_cast<Chunk*>(a.y + (static_cast<long long>(img) * kK + k) * pq + (m - img * pq)) =
          *reinterpret_cast<const Chunk*>(s_out + col * G::kOutPitch + mm);
    }
  } else {
#pragma unroll 4
    for (int idx = tid; idx < kTileN * kTileM; idx += kThreads) {
      const int col = idx / kTileM, mm = idx - col * kTileM;
      const int k = k0 + col, m = m0 + mm;
      if ((kK % kTileN != 0 && k >= kK) || m >= m_total) continue;
      const int img = m / pq;
      a.y[(static_cast<long long>(img) * kK + k) * pq + (m - img * pq)] = s_out[col * G::kOutPitch + mm];
    }
  }
}

}  // namespace conv
}  // namespace jitune
