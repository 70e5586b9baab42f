// conv2d algo 6: an NCHW 1x1 convolution of stride 1 without padding, float16 / bfloat16, as a streaming GEMM on
// mma.sync (sm_80+). y[n][k][p] = sum_c w[k][c] x[n][c][p] (+ bias, the epilogue): per image a GEMM whose operands
// and product are stored pixel-major, and whose cost is memory (C = 64 -> K = 256 at 56x56 reads 12.8 MB and writes
// 51.4 MB; the FLOPs are a few microseconds of tensor-core time), so the kernel is built around the stores.
//
// Persistent blocks take tiles of kTileP pixels of one image in turn. A block keeps all of w in shared memory ([K][C],
// copied once) and a ring of kStages tiles of x ([C][kTileP]), the next kStages - 1 tiles' copies in flight by
// cp.async while this one is multiplied and stored. Each tile is multiplied kTileK output channels at a time, every
// warp a kTileK / kWarpsK x kTileP / kWarpsP warp tile (w the row-major A operand by ldmatrix, x the B operand by
// ldmatrix.trans, float accumulators), then rounded (+ bias) into the warp's own shared-memory stage and stored as
// 16-byte runs of consecutive pixels (whole 128-byte lines a warp instruction) with the streaming hint (y is not read
// again), the epilogue applied to each run as it is stored. Rows are padded by 16 bytes, so ldmatrix's eight rows
// and the stage's writes fall on distinct banks.
//
// Limits (the host's stream_hard_check): H * W and C multiples of 8, x, w, y and the residual 16-byte aligned
// (Family::variant runs the implicit GEMM otherwise), w and the ring within the shared memory.
// It lives in a template of its own (Family::template_of): adding it left every record of algos 0-5 current.
#pragma once

#include "conv2d/conv2d.cuh"

namespace jitune {
namespace conv {

/// Four transposed 8x8 b16 matrices from shared memory (lane l supplies row l % 8 of matrix l / 8).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* shared) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// Two floats rounded to T, lo in the low 16 bits.
template <class T>
__device__ __forceinline__ unsigned pack_pair(float lo, float hi) {
  const T pair[2] = {from_float<T>(lo), from_float<T>(hi)};
  unsigned bits;
  memcpy(&bits, pair, 4);
  return bits;
}

/// conv2d_1x1_stream's shared memory in elements, mirrored by the host's stream_geometry (conv1x1.cpp): w [Kp][Cp]
/// (K and C rounded up to kTileK and 16, zeros past them), the ring of x tiles [kStages][Cp][kTileP], then each
/// warp's output stage [kTileK / kWarpsK][kTileP / kWarpsP]; every row padded by 8 elements.
template <int kC, int kK, int kTileK, int kTileP, int kWarpsK, int kWarpsP, int kStages>
struct StreamLayout {
  static constexpr int kCp = (kC + 15) / 16 * 16, kKp = (kK + kTileK - 1) / kTileK * kTileK;
  static constexpr int kWK = kTileK / kWarpsK, kWP = kTileP / kWarpsP;  // a warp's channels and pixels
  static constexpr int kWPitch = kCp + 8, kXPitch = kTileP + 8, kSPitch = kWP + 8;
  static constexpr int kW = kKp * kWPitch, kX = kCp * kXPitch, kStage = kWK * kSPitch;
  static constexpr int kElements = kW + kStages * kX + kWarpsK * kWarpsP * kStage;
};

// Tunables (host names in brackets): kTileK [tile_n] output channels and kTileP [tile_m] pixels a block multiplies at
// once, kWarpsK x kWarpsP [warps_n x warps_m] warps over them, kStages [stages] x tiles in the ring, kMinBlocks
// [min_blocks] blocks per SM the registers must allow. Problem constants: T, kC, kK, kBias, Epi.
template <class T, int kC, int kK, int kTileK, int kTileP, int kWarpsK, int kWarpsP, int kStages, int kMinBlocks,
          int kBias, class Epi = NoEpilogue>
__global__ void __launch_bounds__(kWarpsK * kWarpsP * 32, kMinBlocks) conv2d_1x1_stream(Args<T> a) {
  using L = StreamLayout<kC, kK, kTileK, kTileP, kWarpsK, kWarpsP, kStages>;
  constexpr int kThreads = kWarpsK * kWarpsP * 32, kWK = L::kWK, kWP = L::kWP, kCp = L::kCp;
  static_assert(kC % 8 == 0 && kWK % 16 == 0 && kWP % 16 == 0 && kWP <= 256 && kStages >= 2, "tile shapes");
  extern __shared__ __align__(16) unsigned char stream_smem[];
  T* const s_w = reinterpret_cast<T*>(stream_smem);
  T* const s_x = s_w + L::kW;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wk = warp / kWarpsP, wp = warp - wk * kWarpsP;
  T* const s_s = s_x + kStages * L::kX + warp * L::kStage;
  const int hw = a.p * a.q, per_image = (hw + kTileP - 1) / kTileP, tiles = a.n * per_image;

  for (int f = tid; f < L::kKp * (kCp / 8); f += kThreads) {
    const int k = f / (kCp / 8), c = 8 * (f - k * (kCp / 8));
    const bool full = k < kK && c < kC;
    cp_async_16<false>(s_w + k * L::kWPitch + c, full ? a.wt + static_cast<long long>(k) * kC + c : a.wt, full);
  }
  auto copy_x = [&](int tile, int slot) {
    const int n = tile / per_image, p0 = (tile - n * per_image) * kTileP;
    for (int f = tid; f < kCp * (kTileP / 8); f += kThreads) {
      const int c = f / (kTileP / 8), p = p0 + 8 * (f - c * (kTileP / 8));
      const bool full = c < kC && p < hw;
      cp_async_16<false>(s_x + (slot * kCp + c) * L::kXPitch + (p - p0),
                         full ? a.x + (static_cast<long long>(n) * kC + c) * hw + p : a.x, full);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {  // the first group also carries w
    if (blockIdx.x + s * gridDim.x < tiles) copy_x(blockIdx.x + s * gridDim.x, s);
    cp_async_commit();
  }
  int slot = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int ahead = tile + (kStages - 1) * gridDim.x;
    if (ahead < tiles) copy_x(ahead, slot == 0 ? kStages - 1 : slot - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncthreads();
    const int n = tile / per_image, p0 = (tile - n * per_image) * kTileP;
    const T* const xs = s_x + slot * L::kX;
#pragma unroll 1
    for (int k0 = 0; k0 < L::kKp; k0 += kTileK) {
      float acc[kWK / 16][kWP / 8][4];
#pragma unroll
      for (int i = 0; i < kWK / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWP / 8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
      // Whole warp tiles of 64 x 64 (128 accumulators) load one k16 step's fragments at a time: unrolled, the
      // compiler hoists every step's loads and spills.
      constexpr int kUnroll = kWK * kWP >= 64 * 64 ? 1 : 4;
#pragma unroll kUnroll
      for (int c0 = 0; c0 < kCp; c0 += 16) {
        unsigned fa[kWK / 16][4], fb[kWP / 8][2];
#pragma unroll
        for (int i = 0; i < kWK / 16; ++i)
          ldmatrix_x4(fa[i], s_w + (k0 + wk * kWK + 16 * i + lane % 16) * L::kWPitch + c0 + 8 * (lane / 16));
#pragma unroll
        for (int j = 0; j < kWP / 16; ++j) {
          unsigned r[4];
          ldmatrix_x4_trans(r, xs + (c0 + lane % 16) * L::kXPitch + wp * kWP + 16 * j + 8 * (lane / 16));
          fb[2 * j][0] = r[0], fb[2 * j][1] = r[1], fb[2 * j + 1][0] = r[2], fb[2 * j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < kWK / 16; ++i)
#pragma unroll
          for (int j = 0; j < kWP / 8; ++j) MmaType<T>::mma(acc[i][j], fa[i], fb[j][0], fb[j][1]);
      }
      // Rounded (+ bias) into the warp's stage: rows are its channels, columns its pixels.
#pragma unroll
      for (int i = 0; i < kWK / 16; ++i) {
        float b_lo = 0.f, b_hi = 0.f;
        if constexpr (kBias != 0) {
          const int k = k0 + wk * kWK + 16 * i + g;
          b_lo = k < kK ? to_float(a.bias[k]) : 0.f;
          b_hi = k + 8 < kK ? to_float(a.bias[k + 8]) : 0.f;
        }
#pragma unroll
        for (int j = 0; j < kWP / 8; ++j) {
          T* const at = s_s + (16 * i + g) * L::kSPitch + 8 * j + 2 * t;
          *reinterpret_cast<unsigned*>(at) = pack_pair<T>(acc[i][j][0] + b_lo, acc[i][j][1] + b_lo);
          *reinterpret_cast<unsigned*>(at + 8 * L::kSPitch) = pack_pair<T>(acc[i][j][2] + b_hi, acc[i][j][3] + b_hi);
        }
      }
      __syncwarp();
      constexpr int kChunks = kWP / 8, kRows = 32 / kChunks;  // 16-byte runs a stage row; rows a warp instruction
#pragma unroll
      for (int r0 = 0; r0 < kWK; r0 += kRows) {
        const int row = r0 + lane / kChunks, run = lane % kChunks;
        const int k = k0 + wk * kWK + row, p = p0 + wp * kWP + 8 * run;
        if (k < kK && p < hw) {
          Pack<T, 8> v = *reinterpret_cast<const Pack<T, 8>*>(s_s + row * L::kSPitch + 8 * run);
          const long long at = (static_cast<long long>(n) * kK + k) * hw + p;
          apply_epilogue_pack<Epi>(v, a.res + at, true);
          __stcs(reinterpret_cast<uint4*>(a.y + at), *reinterpret_cast<const uint4*>(&v));
        }
      }
      __syncwarp();  // the stage is rewritten by the next channels
    }
    __syncthreads();  // every warp has read this slot before a later copy is issued into it
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }
  cp_async_wait<0>();
}

}  // namespace conv
}  // namespace jitune
