// conv2d algo 3: Winograd F(2x2, 3x3) for float32, 3x3 filters of stride 1 and dilation 1, NCHW or channels
// last, any padding, any N, C, K, H, W; bias and the fused epilogue as the other algorithms.
//
// Each 2x2 output tile is Aᵀ [Σ_c (G g_kc Gᵀ) ⊙ (Bᵀ d_c B)] A over the tile's 4x4 input patch d_c (Lavin and
// Gray): 16 multiplies per tile and channel pair instead of 36, in float (no tensor cores, no precision mode).
// The sum over c is 16 independent GEMMs, M_ξ[k][t] = Σ_c U_ξ[k][c] V_ξ[c][t], ξ the 16 positions of the 4x4
// transform. A block owns kBK output channels x kBT tiles and runs all 16 GEMMs over C in stages of kBC
// channels, fused: per stage every thread loads its share of input patches and filters from global memory into
// registers (the next stage's loads are issued before this stage's products), transforms them and stores U and V
// in shared memory as [ξ][c][k] and [ξ][c][t]; then thread (ξ, tk, tt) accumulates a kRK x kRT tile of M_ξ in
// registers from vector reads of U_ξ and V_ξ. At the end the accumulators pass through shared memory in groups of
// kRK / kGroups rows, and each (k, t) output tile is transformed, biased, put through the epilogue and stored
// (rows and columns past the output, channels past K, tiles past the batch are skipped).
#pragma once

#include "common/types.cuh"

namespace jitune {
namespace conv {

/// The largest divisor g of rk whose staged accumulator rows (tk x g rows of `pitch` floats for each of the 16
/// positions) fit `floats`; 1 when none does.
__host__ __device__ constexpr int wino_group(int rk, int tk, int pitch, int floats) {
  for (int g = rk; g > 1; --g)
    if (rk % g == 0 && 16 * tk * g * pitch <= floats) return g;
  return 1;
}

/// Block shape and shared-memory layout of conv2d_wino, mirrored by the host's wino_geometry (winograd.cpp).
template <int kNhwc, int kBK, int kBT, int kBC, int kRK, int kRT>
struct WinoGeometry {
  static constexpr int kTK = kBK / kRK, kTT = kBT / kRT;   // threads along k and along tiles, per ξ
  static constexpr int kThreads = 16 * kTK * kTT;
  static constexpr int kVPitch = kBT + (kNhwc ? 4 : 0);    // V_ξ's row (one channel) in floats
  static constexpr int kStage = 16 * kBC * (kVPitch + kBK);  // V then U, floats
  static constexpr int kMPitch = kBT + (kNhwc ? 1 : 4);    // one accumulator row in the output pass
  // Accumulator rows staged per output pass: the largest divisor of kRK whose staging fits the stage buffers.
  static constexpr int kGroup = wino_group(kRK, kTK, kMPitch, kStage);
  static constexpr int kRowsPerPass = kTK * kGroup;
  static constexpr int kOut = 16 * kRowsPerPass * kMPitch;
  static constexpr int kShared = kStage > kOut ? kStage : kOut;  // floats
  static constexpr int kInItems = kBC * kBT, kWItems = kBC * kBK;
  static constexpr int kInPerThread = (kInItems + kThreads - 1) / kThreads;
  static constexpr int kWPerThread = (kWItems + kThreads - 1) / kThreads;
};

// Tunables (host names in brackets): kBK [wino_k] output channels and kBT [wino_tiles] 2x2 output tiles per
// block, kBC [wino_c] input channels per stage, kRK x kRT [wino_rk, wino_rt] accumulators per thread and ξ,
// kMinBlocks [wino_min_blocks] blocks per SM the registers must allow. Problem constants: kNhwc (x {N,H,W,C}, w
// {K,3,3,C}, y {N,P,Q,K}; else NCHW and w {K,C,3,3}), kC, kK; kBias adds bias[k]; Epi the epilogue.
template <int kNhwc, int kC, int kK, int kBK, int kBT, int kBC, int kRK, int kRT, int kMinBlocks, int kBias,
          class Epi = NoEpilogue>
__global__ void __launch_bounds__(16 * (kBK / kRK) * (kBT / kRT), kMinBlocks) conv2d_wino(Args<float> a) {
  using G = WinoGeometry<kNhwc, kBK, kBT, kBC, kRK, kRT>;
  static_assert(kBK % kRK == 0 && kBT % kRT == 0, "thread tiles divide the block tile");
  constexpr int kStages = (kC + kBC - 1) / kBC;
  extern __shared__ float4 shared_raw[];
  float* const s_v = reinterpret_cast<float*>(shared_raw);  // [ξ][c][kVPitch]
  float* const s_u = s_v + 16 * kBC * G::kVPitch;            // [ξ][c][kBK]

  const int tid = threadIdx.x;
  const int xi = tid / (G::kTK * G::kTT);
  const int tk = (tid / G::kTT) % G::kTK, tt = tid % G::kTT;
  const int tiles_x = a.tiles_x, tiles_y = (a.p + 1) / 2;
  const long long tiles_image = static_cast<long long>(tiles_x) * tiles_y;
  const long long tiles_total = tiles_image * a.n;
  const long long t0 = static_cast<long long>(blockIdx.x) * kBT;
  const int k0 = blockIdx.y * kBK;
  const long long plane = static_cast<long long>(a.h) * a.w;
  // Element strides of x: channel, row, column (the column's a constant).
  const long long x_c = kNhwc ? 1 : plane, x_h = kNhwc ? static_cast<long long>(a.w) * kC : a.w;
  constexpr int x_w = kNhwc ? kC : 1;

  // This thread's input items: (channel of the stage, tile of the block), channels fastest for channels last
  // (consecutive threads read consecutive addresses), tiles fastest for NCHW. Per item, the patch's first
  // element and which of its 16 elements lie inside the image.
  int in_c[G::kInPerThread];
  long long in_base[G::kInPerThread];
  unsigned in_mask[G::kInPerThread];
#pragma unroll
  for (int i = 0; i < G::kInPerThread; ++i) {
    const int item = tid + i * G::kThreads;
    const int c = kNhwc ? item % kBC : item / kBT, t = kNhwc ? item / kBC : item % kBT;
    in_c[i] = c;
    in_base[i] = 0;
    in_mask[i] = 0;
    const long long tile = t0 + t;
    if (item < G::kInItems && tile < tiles_total) {
      const long long n = tile / tiles_image;
      const int rem = static_cast<int>(tile - n * tiles_image);
      const int th = rem / tiles_x, tw = rem - th * tiles_x;
      const int iy = 2 * th - a.pad_h, ix = 2 * tw - a.pad_w;
      in_base[i] = n * kC * plane + static_cast<long long>(iy) * x_h + static_cast<long long>(ix) * x_w;
#pragma unroll
      for (int dy = 0; dy < 4; ++dy)
#pragma unroll
        for (int dx = 0; dx < 4; ++dx)
          if (iy + dy >= 0 && iy + dy < a.h && ix + dx >= 0 && ix + dx < a.w) in_mask[i] |= 1u << (dy * 4 + dx);
    }
  }

  float in_reg[G::kInPerThread][16];
  float w_reg[G::kWPerThread][9];
  // Global loads of stage s into registers; zeros outside the image, past C and past K.
  auto load_stage = [&](int s) {
    const int c0 = s * kBC;
#pragma unroll
    for (int i = 0; i < G::kInPerThread; ++i) {
      const bool c_ok = kC % kBC == 0 || c0 + in_c[i] < kC;
      const float* src = a.x + in_base[i] + (c0 + in_c[i]) * x_c;
#pragma unroll
      for (int dy = 0; dy < 4; ++dy)
#pragma unroll
        for (int dx = 0; dx < 4; ++dx)
          in_reg[i][dy * 4 + dx] =
              c_ok && (in_mask[i] >> (dy * 4 + dx) & 1u) ? __ldg(src + dy * x_h + dx * x_w) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < G::kWPerThread; ++i) {
      const int item = tid + i * G::kThreads;
      const int k = item % kBK, c = item / kBK;  // output channels fastest: conflict-free U stores
      const bool ok = (G::kWItems % G::kThreads == 0 || item < G::kWItems) && k0 + k < kK &&
                      (kC % kBC == 0 || c0 + c < kC);
      const long long kk = k0 + k, cc = c0 + c;
#pragma unroll
      for (int rs = 0; rs < 9; ++rs)
        w_reg[i][rs] = ok ? __ldg(a.wt + (kNhwc ? (kk * 9 + rs) * kC + cc : (kk * kC + cc) * 9 + rs)) : 0.f;
    }
  };
  // V = Bᵀ d B and U = G g Gᵀ of the registers into shared memory.
  auto store_stage = [&]() {
#pragma unroll
    for (int i = 0; i < G::kInPerThread; ++i) {
      const int item = tid + i * G::kThreads;
      if (G::kInItems % G::kThreads != 0 && item >= G::kInItems) continue;
      const int t = kNhwc ? item / kBC : item % kBT;
      const float* d = in_reg[i];
      float r[16];  // Bᵀ d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        r[0 + j] = d[0 + j] - d[8 + j];
        r[4 + j] = d[4 + j] + d[8 + j];
        r[8 + j] = d[8 + j] - d[4 + j];
        r[12 + j] = d[4 + j] - d[12 + j];
      }
      float* dst = s_v + in_c[i] * G::kVPitch + t;
#pragma unroll
      for (int row = 0; row < 4; ++row) {  // (Bᵀ d) B: the same combinations along each row
        const float* q = r + 4 * row;
        dst[(4 * row + 0) * kBC * G::kVPitch] = q[0] - q[2];
        dst[(4 * row + 1) * kBC * G::kVPitch] = q[1] + q[2];
        dst[(4 * row + 2) * kBC * G::kVPitch] = q[2] - q[1];
        dst[(4 * row + 3) * kBC * G::kVPitch] = q[1] - q[3];
      }
    }
#pragma unroll
    for (int i = 0; i < G::kWPerThread; ++i) {
      const int item = tid + i * G::kThreads;
      if (G::kWItems % G::kThreads != 0 && item >= G::kWItems) continue;
      const int k = item % kBK, c = item / kBK;
      const float* g = w_reg[i];
      float r[12];  // G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2
#pragma unroll
      for (int j = 0; j < 3; ++j) {
        r[0 + j] = g[j];
        r[3 + j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        r[6 + j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        r[9 + j] = g[6 + j];
      }
      float* dst = s_u + c * kBK + k;
#pragma unroll
      for (int row = 0; row < 4; ++row) {  // (G g) Gᵀ
        const float* q = r + 3 * row;
        dst[(4 * row + 0) * kBC * kBK] = q[0];
        dst[(4 * row + 1) * kBC * kBK] = 0.5f * (q[0] + q[1] + q[2]);
        dst[(4 * row + 2) * kBC * kBK] = 0.5f * (q[0] - q[1] + q[2]);
        dst[(4 * row + 3) * kBC * kBK] = q[2];
      }
    }
  };

  float acc[kRK][kRT];
#pragma unroll
  for (int i = 0; i < kRK; ++i)
#pragma unroll
    for (int j = 0; j < kRT; ++j) acc[i][j] = 0.f;

  load_stage(0);
  for (int s = 0; s < kStages; ++s) {
    if (s > 0) __syncthreads();  // every thread is done with the previous stage's U and V
    store_stage();
    __syncthreads();
    if (s + 1 < kStages) load_stage(s + 1);  // in flight while this stage is multiplied
    const float* u = s_u + xi * kBC * kBK + tk * kRK;
    const float* v = s_v + xi * kBC * G::kVPitch + tt * kRT;
#pragma unroll
    for (int c = 0; c < kBC; ++c) {
      float uk[kRK], vt[kRT];
      load_shared_vec<vector_of(kRK), kRK>(uk, u + c * kBK);
      load_shared_vec<vector_of(kRT), kRT>(vt, v + c * G::kVPitch);
#pragma unroll
      for (int i = 0; i < kRK; ++i)
#pragma unroll
        for (int j = 0; j < kRT; ++j) acc[i][j] = fmaf(uk[i], vt[j], acc[i][j]);
    }
  }

  // Output: kGroup of this thread's kRK rows at a time through shared memory as [ξ][row][kMPitch], then each
  // (row, tile) of the pass is transformed by Aᵀ M A into its 2x2 outputs.
  float* const s_m = reinterpret_cast<float*>(shared_raw);
  constexpr int kPassItems = G::kRowsPerPass * kBT;
  const int p_out = a.p, q_out = a.q;
#pragma unroll  // static accumulator indices: the accumulators stay in registers
  for (int i0 = 0; i0 < kRK; i0 += G::kGroup) {
    __syncthreads();
#pragma unroll
    for (int g = 0; g < G::kGroup; ++g) {
      float* dst = s_m + (xi * G::kRowsPerPass + tk * G::kGroup + g) * G::kMPitch + tt * kRT;
      if constexpr (!kNhwc && kRT % 4 == 0) {
#pragma unroll
        for (int j = 0; j < kRT; j += 4)
          *reinterpret_cast<float4*>(dst + j) =
              make_float4(acc[i0 + g][j], acc[i0 + g][j + 1], acc[i0 + g][j + 2], acc[i0 + g][j + 3]);
      } else {
#pragma unroll
        for (int j = 0; j < kRT; ++j) dst[j] = acc[i0 + g][j];
      }
    }
    __syncthreads();
#pragma unroll 1
    for (int item = tid; item < kPassItems; item += G::kThreads) {
      // Channels fastest for channels last (consecutive threads store consecutive k), tiles fastest for NCHW.
      const int row = kNhwc ? item % G::kRowsPerPass : item / kBT;
      const int t = kNhwc ? item / G::kRowsPerPass : item % kBT;
      const int k = k0 + (row / G::kGroup) * kRK + i0 + row % G::kGroup;
      const long long tile = t0 + t;
      if (k >= kK || tile >= tiles_total) continue;
      float m[16];
#pragma unroll
      for (int e = 0; e < 16; ++e) m[e] = s_m[(e * G::kRowsPerPass + row) * G::kMPitch + t];
      float r[8];  // Aᵀ M: rows m0 + m1 + m2, m1 - m2 - m3
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        r[j] = m[j] + m[4 + j] + m[8 + j];
        r[4 + j] = m[4 + j] - m[8 + j] - m[12 + j];
      }
      float out[4];  // (Aᵀ M) A
#pragma unroll
      for (int row2 = 0; row2 < 2; ++row2) {
        out[2 * row2] = r[4 * row2] + r[4 * row2 + 1] + r[4 * row2 + 2];
        out[2 * row2 + 1] = r[4 * row2 + 1] - r[4 * row2 + 2] - r[4 * row2 + 3];
      }
      const float b = kBias ? a.bias[k] : 0.f;
      const long long n = tile / tiles_image;
      const int rem = static_cast<int>(tile - n * tiles_image);
      const int th = rem / tiles_x, tw = rem - th * tiles_x;
#pragma unroll
      for (int dy = 0; dy < 2; ++dy)
#pragma unroll
        for (int dx = 0; dx < 2; ++dx) {
          const int oy = 2 * th + dy, ox = 2 * tw + dx;
          if (oy >= p_out || ox >= q_out) continue;
          const long long at = kNhwc ? ((n * p_out + oy) * q_out + ox) * kK + k
                                     : ((n * kK + k) * p_out + oy) * static_cast<long long>(q_out) + ox;
          a.y[at] = apply_epilogue<Epi>(out[2 * dy + dx] + b, a.res + at);
        }
    }
  }
}

}  // namespace conv
}  // namespace jitune
