// conv2d algo 4: Winograd F(4x4, 3x3) for float32, 3x3 filters of stride 1 and dilation 1, NCHW or channels
// last, any padding, any N, C, K, H, W; bias and the fused epilogue as the other algorithms.
//
// The kernel is algo 3's (winograd.cuh) written for an output tile of kM x kM, here 4 x 4: each tile is
// Aᵀ [Σ_c (G g_kc Gᵀ) ⊙ (Bᵀ d_c B)] A over its 6x6 input patch d_c (Lavin and Gray's construction on the points
// 0, ±1/2, ±2, ∞), 36 multiplies per tile and channel pair instead of 144 (F(2x2): 16 instead of 36), so the 36
// GEMMs M_ξ[k][t] = Σ_c U_ξ[k][c] V_ξ[c][t] carry 1.78x fewer products than F(2x2)'s 16 for the same outputs, and
// each staged channel feeds four times the outputs. The price is precision: the transforms scale by up to 8, so the
// error is several times the direct sum's (docs/conv2d.md has the figures); the host takes it only where the
// family's float32 tolerance holds it (C >= 64). Block, stages and output pass as in winograd.cuh: a block owns kBK
// output channels x kBT tiles, stages kBC channels into shared memory as [ξ][c][k] and [ξ][c][t], thread
// (ξ, tk, tt) accumulates a kRK x kRT tile of M_ξ, and the accumulators leave through shared memory kGroup rows at a
// time.
//
// It lives in a template of its own (Family::template_of): adding it left every record of algos 0-3 current.
#pragma once

#include "conv2d/conv2d.cuh"

namespace jitune {
namespace conv {

/// The 1-D transforms of F(kM, 3) on kA = kM + 2 points, over elements kIn apart into elements kOut apart.
template <int kM>
struct Winograd;

template <>
struct Winograd<4> {
  // Interpolation points 0, ±1/2, ±2 and ∞ (not Lavin's 0, ±1, ±2): the transforms' largest factors are smaller, and
  // the float32 error 2.5x lower (docs/conv2d.md).
  static constexpr int kA = 6;
  /// r = Bᵀ d (6 from 6).
  template <int kIn, int kOut>
  __device__ __forceinline__ static void input(const float* d, float* r) {
    const float d0 = d[0], d1 = d[kIn], d2 = d[2 * kIn], d3 = d[3 * kIn], d4 = d[4 * kIn], d5 = d[5 * kIn];
    const float a = fmaf(-4.f, d2, d4), b = fmaf(0.5f, d3, -2.f * d1);
    const float c = fmaf(-0.25f, d2, d4), e = fmaf(2.f, d3, -0.5f * d1);
    r[0] = fmaf(-4.25f, d2, d0 + d4);
    r[kOut] = a + b;
    r[2 * kOut] = a - b;
    r[3 * kOut] = c + e;
    r[4 * kOut] = c - e;
    r[5 * kOut] = fmaf(-4.25f, d3, d1 + d5);
  }
  /// u = G g (6 from 3).
  template <int kIn, int kOut>
  __device__ __forceinline__ static void filter(const float* g, float* u) {
    const float g0 = g[0], g1 = g[kIn], g2 = g[2 * kIn];
    const float even = fmaf(8.f, g0, 2.f * g2), odd = 4.f * g1;
    const float low = fmaf(4.f, g2, g0), mid = 2.f * g1;
    u[0] = g0;
    u[kOut] = (-1.f / 15.f) * (even + odd);
    u[2 * kOut] = (-1.f / 15.f) * (even - odd);
    u[3 * kOut] = (1.f / 30.f) * (low + mid);
    u[4 * kOut] = (1.f / 30.f) * (low - mid);
    u[5 * kOut] = g2;
  }
  /// y = Aᵀ m (4 from 6).
  template <int kIn, int kOut>
  __device__ __forceinline__ static void output(const float* m, float* y) {
    const float s12 = m[kIn] + m[2 * kIn], d12 = m[kIn] - m[2 * kIn];
    const float s34 = m[3 * kIn] + m[4 * kIn], d34 = m[3 * kIn] - m[4 * kIn];
    y[0] = m[0] + s12 + s34;
    y[kOut] = fmaf(0.5f, d12, 2.f * d34);
    y[2 * kOut] = fmaf(0.25f, s12, 4.f * s34);
    y[3 * kOut] = fmaf(0.125f, d12, fmaf(8.f, d34, m[5 * kIn]));
  }
};

/// Block shape and shared-memory layout of conv2d_winograd, mirrored by the host's wino_geometry (winograd.cpp).
template <int kM, int kNhwc, int kBK, int kBT, int kBC, int kRK, int kRT>
struct WinogradGeometry {
  static constexpr int kA = kM + 2, kPoints = kA * kA;
  static constexpr int kTK = kBK / kRK, kTT = kBT / kRT;  // threads along k and along tiles, per ξ
  static constexpr int kThreads = kPoints * kTK * kTT;
  static constexpr int kVPitch = kBT + (kNhwc ? 4 : 0);          // V_ξ's row (one channel) in floats
  static constexpr int kStage = kPoints * kBC * (kVPitch + kBK);  // V then U, floats
  static constexpr int kMPitch = kBT + (kNhwc ? 1 : 4);           // one accumulator row in the output pass
  // Accumulator rows staged per output pass: the largest divisor of kRK whose staging fits the stage buffers.
  static constexpr int kGroup = [] {
    for (int g = kRK; g > 1; --g)
      if (kRK % g == 0 && kPoints * kTK * g * kMPitch <= kStage) return g;
    return 1;
  }();
  static constexpr int kRowsPerPass = kTK * kGroup;
  static constexpr int kOut = kPoints * kRowsPerPass * kMPitch;
  static constexpr int kShared = kStage > kOut ? kStage : kOut;  // floats
  static constexpr int kInItems = kBC * kBT, kWItems = kBC * kBK;
  static constexpr int kInPerThread = (kInItems + kThreads - 1) / kThreads;
  static constexpr int kWPerThread = (kWItems + kThreads - 1) / kThreads;
};

// Tunables (host names in brackets), as algo 3's: kBK [wino_k] output channels and kBT [wino_tiles] kM x kM output
// tiles per block, kBC [wino_c] input channels per stage, kRK x kRT [wino_rk, wino_rt] accumulators per thread and
// ξ, kMinBlocks [wino_min_blocks] blocks per SM the registers must allow. kPrefetch (the host's rule: where the
// registers allow it) issues the next stage's loads before this stage's products; without it each stage is loaded
// where it is stored. Problem constants: kNhwc (x {N,H,W,C}, w {K,3,3,C}, y {N,P,Q,K}; else NCHW and w {K,C,3,3}),
// kC, kK; kBias adds bias[k]; Epi the epilogue. Args::tiles_x is the number of tiles along Q, ceil(Q / kM).
template <int kM, int kNhwc, int kC, int kK, int kBK, int kBT, int kBC, int kRK, int kRT, int kMinBlocks,
          int kPrefetch, int kBias, class Epi = NoEpilogue>
__global__ void __launch_bounds__((kM + 2) * (kM + 2) * (kBK / kRK) * (kBT / kRT), kMinBlocks)
    conv2d_winograd(Args<float> a) {
  using G = WinogradGeometry<kM, kNhwc, kBK, kBT, kBC, kRK, kRT>;
  using W = Winograd<kM>;
  constexpr int kA = G::kA, kPoints = G::kPoints;
  static_assert(kBK % kRK == 0 && kBT % kRT == 0, "thread tiles divide the block tile");
  static_assert(kPoints <= 64, "a patch's in-image mask is 64 bits");
  constexpr int kStages = (kC + kBC - 1) / kBC;
  extern __shared__ float4 shared_raw[];
  float* const s_v = reinterpret_cast<float*>(shared_raw);  // [ξ][c][kVPitch]
  float* const s_u = s_v + kPoints * kBC * G::kVPitch;       // [ξ][c][kBK]

  const int tid = threadIdx.x;
  const int xi = tid / (G::kTK * G::kTT);
  const int tk = (tid / G::kTT) % G::kTK, tt = tid % G::kTT;
  const int tiles_x = a.tiles_x, tiles_y = (a.p + kM - 1) / kM;
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
  // element and which of its kA x kA elements lie inside the image.
  int in_c[G::kInPerThread];
  long long in_base[G::kInPerThread];
  unsigned long long in_mask[G::kInPerThread];
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
      const int iy = kM * th - a.pad_h, ix = kM * tw - a.pad_w;
      in_base[i] = n * kC * plane + static_cast<long long>(iy) * x_h + static_cast<long long>(ix) * x_w;
#pragma unroll
      for (int dy = 0; dy < kA; ++dy)
#pragma unroll
        for (int dx = 0; dx < kA; ++dx)
          if (iy + dy >= 0 && iy + dy < a.h && ix + dx >= 0 && ix + dx < a.w)
            in_mask[i] |= 1ull << (dy * kA + dx);
    }
  }

  float in_reg[G::kInPerThread][kPoints];
  float w_reg[G::kWPerThread][9];
  // Global loads of stage s into registers; zeros outside the image, past C and past K.
  auto load_stage = [&](int s) {
    const int c0 = s * kBC;
#pragma unroll
    for (int i = 0; i < G::kInPerThread; ++i) {
      const bool c_ok = kC % kBC == 0 || c0 + in_c[i] < kC;
      const float* src = a.x + in_base[i] + (c0 + in_c[i]) * x_c;
#pragma unroll
      for (int dy = 0; dy < kA; ++dy)
#pragma unroll
        for (int dx = 0; dx < kA; ++dx)
          in_reg[i][dy * kA + dx] =
              c_ok && (in_mask[i] >> (dy * kA + dx) & 1ull) ? __ldg(src + dy * x_h + dx * x_w) : 0.f;
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
      // d B row by row (each row of the patch dies once transformed), then Bᵀ along each column, stored as made:
      // the transform holds 36 values beside the patch's rows, not 72.
      float r[kPoints];
#pragma unroll
      for (int row = 0; row < kA; ++row) W::template input<1, 1>(in_reg[i] + kA * row, r + kA * row);
      float* dst = s_v + in_c[i] * G::kVPitch + t;
#pragma unroll
      for (int col = 0; col < kA; ++col) {
        float v[kA];
        W::template input<kA, 1>(r + col, v);
#pragma unroll
        for (int e = 0; e < kA; ++e) dst[(e * kA + col) * kBC * G::kVPitch] = v[e];
      }
    }
#pragma unroll
    for (int i = 0; i < G::kWPerThread; ++i) {
      const int item = tid + i * G::kThreads;
      if (G::kWItems % G::kThreads != 0 && item >= G::kWItems) continue;
      const int k = item % kBK, c = item / kBK;
      float r[3 * kA];  // g Gᵀ, row by row; then G along each column, stored as made
#pragma unroll
      for (int row = 0; row < 3; ++row) W::template filter<1, 1>(w_reg[i] + 3 * row, r + kA * row);
      float* dst = s_u + c * kBK + k;
#pragma unroll
      for (int col = 0; col < kA; ++col) {
        float u[kA];
        W::template filter<kA, 1>(r + col, u);
#pragma unroll
        for (int e = 0; e < kA; ++e) dst[(e * kA + col) * kBC * kBK] = u[e];
      }
    }
  };

  float acc[kRK][kRT];
#pragma unroll
  for (int i = 0; i < kRK; ++i)
#pragma unroll
    for (int j = 0; j < kRT; ++j) acc[i][j] = 0.f;

  if (kPrefetch) load_stage(0);
  for (int s = 0; s < kStages; ++s) {
    if (s > 0) __syncthreads();  // every thread is done with the previous stage's U and V
    if (!kPrefetch) load_stage(s);
    store_stage();
    __syncthreads();
    if (kPrefetch && s + 1 < kStages) load_stage(s + 1);  // in flight while this stage is multiplied
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
  // (row, tile) of the pass is transformed by Aᵀ M A into its kM x kM outputs.
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
      const int row_k = kNhwc ? item % G::kRowsPerPass : item / kBT;
      const int t = kNhwc ? item / G::kRowsPerPass : item % kBT;
      const int k = k0 + (row_k / G::kGroup) * kRK + i0 + row_k % G::kGroup;
      const long long tile = t0 + t;
      if (k >= kK || tile >= tiles_total) continue;
      const float b = kBias ? a.bias[k] : 0.f;
      const long long n = tile / tiles_image;
      const int rem = static_cast<int>(tile - n * tiles_image);
      const int th = rem / tiles_x, tw = rem - th * tiles_x;
      // M A row by row as M's rows are read, then Aᵀ along each column, stored as made.
      float r[kA * kM];
#pragma unroll
      for (int row = 0; row < kA; ++row) {
        float m[kA];
#pragma unroll
        for (int col = 0; col < kA; ++col) m[col] = s_m[((row * kA + col) * G::kRowsPerPass + row_k) * G::kMPitch + t];
        W::template output<1, 1>(m, r + kM * row);
      }
#pragma unroll
      for (int dx = 0; dx < kM; ++dx) {
        float y[kM];
        W::template output<kM, 1>(r + dx, y);
#pragma unroll
        for (int dy = 0; dy < kM; ++dy) {
          const int oy = kM * th + dy, ox = kM * tw + dx;
          if (oy >= p_out || ox >= q_out) continue;
          const long long at = kNhwc ? ((n * p_out + oy) * q_out + ox) * kK + k
                                     : ((n * kK + k) * p_out + oy) * static_cast<long long>(q_out) + ox;
          a.y[at] = apply_epilogue<Epi>(y[dy] + b, a.res + at);
        }
      }
    }
  }
}

}  // namespace conv
}  // namespace jitune
