// conv2d algo 5: Winograd F(4x4, 3x3) for float32 as three passes of one cooperative launch, with the 36 products
// as batched GEMMs of large tiles (Lavin and Gray's non-fused scheme). Same problems, transforms and precision as
// algo 4 (winograd4.cuh), which fuses the three: there each block re-transforms its tiles' inputs for every kBK
// output channels and multiplies 16 x 32 tiles of the 36 GEMMs; here each input and filter is transformed once and
// each GEMM block multiplies kBK x kBT (up to 128 x 128), reusing each staged value kBK or kBT times.
//
//   pass 1: U_ξ[c][k] = (G g_kc Gᵀ)_ξ and V_ξ[c][t] = (Bᵀ d_ct B)_ξ into the workspace, zeros past C, K and the
//           tiles (the GEMMs then need no bounds);
//   pass 2: M_ξ[k][t] = Σ_c U_ξ[c][k] V_ξ[c][t], 36 x (Kp / kBK) x (Tp / kBT) block tiles taken in turn;
//   pass 3: y = Aᵀ M A per (k, tile), + bias, the epilogue, stored in x's layout.
// A grid barrier (common/grid_barrier.cuh) separates the passes; every block is resident (LaunchShape::cooperative).
//
// It lives in a template of its own (Family::template_of): adding it left every record of algos 0-4 current.
#pragma once

#include "common/grid_barrier.cuh"
#include "conv2d/winograd4.cuh"

namespace jitune {
namespace conv {

/// The workspace of conv2d_winograd_gemm, mirrored by the host's wgemm_geometry (winograd_gemm.cpp), in floats
/// from its start: the barrier counter's 64 floats (256 bytes), then U [36][Cp][Kp], V [36][Cp][Tp] and
/// M [36][Kp][Tp], each starting on 256 bytes. Cp, Kp and Tp are C, K and the batch's 4 x 4 tiles rounded up to
/// kBC, kBK and kBT. Channels last keeps V as [36][Tp][Cp] and M as [36][Tp][Kp]: its passes read x and write y
/// channels fastest, and so write V and read M channels fastest.
__host__ __device__ constexpr long long wgemm_align(long long floats) {
  return (floats + 63) / 64 * 64;
}

// Tunables (host names in brackets): kBK x kBT [wino_k, wino_tiles] the GEMM's block tile (output channels x
// tiles), kBC [wino_c] channels per shared-memory stage, kRK x kRT [wino_rk, wino_rt] each thread's accumulators
// (in groups of 4 rows / columns spread over the tile, so that a warp's shared-memory reads are 16-byte vectors
// without conflicts), kMinBlocks [wino_min_blocks] blocks per SM the registers must allow. Problem constants as
// algo 4's: kNhwc, kC, kK, kBias, Epi.
template <int kNhwc, int kC, int kK, int kBK, int kBT, int kBC, int kRK, int kRT, int kMinBlocks, int kBias,
          class Epi = NoEpilogue>
__global__ void __launch_bounds__((kBK / kRK) * (kBT / kRT), kMinBlocks)
    conv2d_winograd_gemm(Args<float> a, void* workspace) {
  using W = Winograd<4>;
  constexpr int kA = 6, kPoints = 36;
  constexpr int kTK = kBK / kRK, kTT = kBT / kRT, kThreads = kTK * kTT;
  constexpr int kCp = (kC + kBC - 1) / kBC * kBC, kKp = (kK + kBK - 1) / kBK * kBK;
  static_assert(kRK % 4 == 0 && kRT % 4 == 0 && kBK % kRK == 0 && kBT % kRT == 0, "thread tiles of 4s");
  const int tiles_x = a.tiles_x, tiles_y = (a.p + 3) / 4;
  const int tiles_image = tiles_x * tiles_y;  // the host checks the batch's tiles and the workspace fit 32 bits
  const int tiles = tiles_image * a.n;
  const int tp = (tiles + kBT - 1) / kBT * kBT;
  unsigned* const barrier = static_cast<unsigned*>(workspace);
  float* const u_ws = static_cast<float*>(workspace) + 64;
  float* const v_ws = u_ws + wgemm_align(static_cast<long long>(kPoints) * kCp * kKp);
  float* const m_ws = v_ws + wgemm_align(static_cast<long long>(kPoints) * kCp * tp);
  const long long u_point = static_cast<long long>(kCp) * kKp, v_point = static_cast<long long>(kCp) * tp,
                  m_point = static_cast<long long>(kKp) * tp;
  const int tid = threadIdx.x;
  const int first = blockIdx.x * kThreads + tid, stride = gridDim.x * kThreads;
  const long long plane = static_cast<long long>(a.h) * a.w;
  const long long x_c = kNhwc ? 1 : plane, x_h = kNhwc ? static_cast<long long>(a.w) * kC : a.w;
  constexpr int x_w = kNhwc ? kC : 1;

  // Pass 1: the filters' transforms (k fastest: the stores of a warp are consecutive), then the inputs' (tiles
  // fastest for NCHW, channels fastest for channels last: a warp's loads and stores are consecutive). Rows first,
  // then each column, stored as made (as winograd4.cuh's stage).
  const int u_items = kCp * kKp, v_items = kCp * tp;
  for (int item = first; item < u_items + v_items; item += stride) {
    if (item < u_items) {
      const int c = item / kKp, k = item - c * kKp;
      const bool ok = c < kC && k < kK;
      float g[9];
#pragma unroll
      for (int rs = 0; rs < 9; ++rs)
        g[rs] = ok ? __ldg(a.wt + (kNhwc ? (static_cast<long long>(k) * 9 + rs) * kC + c
                                         : (static_cast<long long>(k) * kC + c) * 9 + rs))
                   : 0.f;
      float r[3 * kA];
#pragma unroll
      for (int row = 0; row < 3; ++row) W::template filter<1, 1>(g + 3 * row, r + kA * row);
      float* const dst = u_ws + static_cast<long long>(c) * kKp + k;
#pragma unroll
      for (int col = 0; col < kA; ++col) {
        float u[kA];
        W::template filter<kA, 1>(r + col, u);
#pragma unroll
        for (int e = 0; e < kA; ++e) dst[(e * kA + col) * u_point] = u[e];
      }
    } else {
      const int j = item - u_items;
      const int c = kNhwc ? j % kCp : j / tp, t = kNhwc ? j / kCp : j - c * tp;
      float d[kPoints];
      if (c < kC && t < tiles) {
        const int n = t / tiles_image, rem = t - n * tiles_image;
        const int th = rem / tiles_x, tw = rem - th * tiles_x;
        const int iy = 4 * th - a.pad_h, ix = 4 * tw - a.pad_w;
        const float* const src = a.x + n * kC * plane + c * x_c + iy * x_h + static_cast<long long>(ix) * x_w;
#pragma unroll
        for (int dy = 0; dy < kA; ++dy)
#pragma unroll
          for (int dx = 0; dx < kA; ++dx)
            d[dy * kA + dx] = iy + dy >= 0 && iy + dy < a.h && ix + dx >= 0 && ix + dx < a.w
                                  ? __ldg(src + dy * x_h + dx * x_w)
                                  : 0.f;
      } else {
#pragma unroll
        for (int e = 0; e < kPoints; ++e) d[e] = 0.f;
      }
      float r[kPoints];
#pragma unroll
      for (int row = 0; row < kA; ++row) W::template input<1, 1>(d + kA * row, r + kA * row);
      float* const dst = v_ws + (kNhwc ? static_cast<long long>(t) * kCp + c : static_cast<long long>(c) * tp + t);
#pragma unroll
      for (int col = 0; col < kA; ++col) {
        float v[kA];
        W::template input<kA, 1>(r + col, v);
#pragma unroll
        for (int e = 0; e < kA; ++e) dst[(e * kA + col) * v_point] = v[e];
      }
    }
  }
  grid_barrier(barrier, 1);

  // Pass 2: the GEMMs. Block tile (ξ, k tile, t tile), k tiles fastest (the blocks of one V tile run together and
  // share it through L2). Stages of kBC channels, double-buffered: the next stage's loads are in registers while
  // this one is multiplied. Channels last loads V's rows of channels and stores them transposed (rows padded by 4:
  // at most two-way bank conflicts), and stores M transposed.
  constexpr int kVPitch = kBT + (kNhwc ? 4 : 0);
  __shared__ __align__(16) float s_u[2][kBC][kBK];
  __shared__ __align__(16) float s_v[2][kBC][kVPitch];
  constexpr int kULoads = (kBC * kBK / 4 + kThreads - 1) / kThreads, kVLoads = (kBC * kBT / 4 + kThreads - 1) / kThreads;
  constexpr int kStages = kCp / kBC;
  const int tk = tid / kTT, tt = tid - tk * kTT;
  const int k_tiles = kKp / kBK, t_tiles = tp / kBT;
  const int gemm_items = kPoints * k_tiles * t_tiles;
  for (int item = blockIdx.x; item < gemm_items; item += gridDim.x) {
    const int kt = item % k_tiles, rest = item / k_tiles;
    const int tt0 = rest % t_tiles, xi = rest / t_tiles;
    const float* const u_src = u_ws + xi * u_point + kt * kBK;
    const float* const v_src = v_ws + xi * v_point + static_cast<long long>(tt0) * kBT * (kNhwc ? kCp : 1);
    float4 u_reg[kULoads], v_reg[kVLoads];
    auto load = [&](int s) {
#pragma unroll
      for (int i = 0; i < kULoads; ++i) {
        const int f = tid + i * kThreads, c = f / (kBK / 4), k4 = f - c * (kBK / 4);
        if ((kBC * kBK / 4) % kThreads == 0 || f < kBC * kBK / 4)
          u_reg[i] = *reinterpret_cast<const float4*>(u_src + static_cast<long long>(s * kBC + c) * kKp + 4 * k4);
      }
#pragma unroll
      for (int i = 0; i < kVLoads; ++i) {
        const int f = tid + i * kThreads;
        if ((kBC * kBT / 4) % kThreads != 0 && f >= kBC * kBT / 4) continue;
        if constexpr (kNhwc) {  // 4 channels of tile t
          const int t = f / (kBC / 4), c4 = f - t * (kBC / 4);
          v_reg[i] = *reinterpret_cast<const float4*>(v_src + static_cast<long long>(t) * kCp + s * kBC + 4 * c4);
        } else {  // 4 tiles of channel c
          const int c = f / (kBT / 4), t4 = f - c * (kBT / 4);
          v_reg[i] = *reinterpret_cast<const float4*>(v_src + static_cast<long long>(s * kBC + c) * tp + 4 * t4);
        }
      }
    };
    auto store = [&](int buf) {
#pragma unroll
      for (int i = 0; i < kULoads; ++i) {
        const int f = tid + i * kThreads, c = f / (kBK / 4), k4 = f - c * (kBK / 4);
        if ((kBC * kBK / 4) % kThreads == 0 || f < kBC * kBK / 4)
          *reinterpret_cast<float4*>(&s_u[buf][c][4 * k4]) = u_reg[i];
      }
#pragma unroll
      for (int i = 0; i < kVLoads; ++i) {
        const int f = tid + i * kThreads;
        if ((kBC * kBT / 4) % kThreads != 0 && f >= kBC * kBT / 4) continue;
        if constexpr (kNhwc) {
          const int t = f / (kBC / 4), c4 = f - t * (kBC / 4);
          s_v[buf][4 * c4][t] = v_reg[i].x;
          s_v[buf][4 * c4 + 1][t] = v_reg[i].y;
          s_v[buf][4 * c4 + 2][t] = v_reg[i].z;
          s_v[buf][4 * c4 + 3][t] = v_reg[i].w;
        } else {
          const int c = f / (kBT / 4), t4 = f - c * (kBT / 4);
          *reinterpret_cast<float4*>(&s_v[buf][c][4 * t4]) = v_reg[i];
        }
      }
    };
    float acc[kRK][kRT];
#pragma unroll
    for (int i = 0; i < kRK; ++i)
#pragma unroll
      for (int j = 0; j < kRT; ++j) acc[i][j] = 0.f;
    load(0);
    store(0);
    __syncthreads();
#pragma unroll 1
    for (int s = 0; s < kStages; ++s) {
      const int buf = s & 1;
      if (s + 1 < kStages) load(s + 1);
#pragma unroll
      for (int c = 0; c < kBC; ++c) {
        float uk[kRK], vt[kRT];
#pragma unroll
        for (int g = 0; g < kRK / 4; ++g) {
          const float4 q = *reinterpret_cast<const float4*>(&s_u[buf][c][g * (kBK / (kRK / 4)) + 4 * tk]);
          uk[4 * g] = q.x, uk[4 * g + 1] = q.y, uk[4 * g + 2] = q.z, uk[4 * g + 3] = q.w;
        }
#pragma unroll
        for (int g = 0; g < kRT / 4; ++g) {
          const float4 q = *reinterpret_cast<const float4*>(&s_v[buf][c][g * (kBT / (kRT / 4)) + 4 * tt]);
          vt[4 * g] = q.x, vt[4 * g + 1] = q.y, vt[4 * g + 2] = q.z, vt[4 * g + 3] = q.w;
        }
#pragma unroll
        for (int i = 0; i < kRK; ++i)
#pragma unroll
          for (int j = 0; j < kRT; ++j) acc[i][j] = fmaf(uk[i], vt[j], acc[i][j]);
      }
      if (s + 1 < kStages) store(buf ^ 1);  // its last readers finished before the previous barrier
      __syncthreads();
    }
    if constexpr (kNhwc) {  // M [ξ][t][k]: 4 channels of one tile a store
      float* const dst = m_ws + xi * m_point + static_cast<long long>(tt0) * kBT * kKp + kt * kBK;
#pragma unroll
      for (int j = 0; j < kRT; ++j) {
        const int col = (j / 4) * (kBT / (kRT / 4)) + 4 * tt + j % 4;
#pragma unroll
        for (int g = 0; g < kRK / 4; ++g)
          *reinterpret_cast<float4*>(dst + static_cast<long long>(col) * kKp + g * (kBK / (kRK / 4)) + 4 * tk) =
              make_float4(acc[4 * g][j], acc[4 * g + 1][j], acc[4 * g + 2][j], acc[4 * g + 3][j]);
      }
    } else {  // M [ξ][k][t]: 4 tiles of one channel a store
      float* const dst = m_ws + xi * m_point + static_cast<long long>(kt * kBK) * tp + static_cast<long long>(tt0) * kBT;
#pragma unroll
      for (int i = 0; i < kRK; ++i) {
        const int row = (i / 4) * (kBK / (kRK / 4)) + 4 * tk + i % 4;
#pragma unroll
        for (int g = 0; g < kRT / 4; ++g)
          *reinterpret_cast<float4*>(dst + static_cast<long long>(row) * tp + g * (kBT / (kRT / 4)) + 4 * tt) =
              make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]);
      }
    }
  }
  grid_barrier(barrier, 2);

  // Pass 3: y = Aᵀ M A per (k, tile), tiles fastest for NCHW, channels fastest for channels last (a warp's reads of
  // M and stores of y are consecutive); rows of M A as M is read, then Aᵀ along each column, stored as made.
  const int p_out = a.p, q_out = a.q;
  for (int item = first; item < kK * tiles; item += stride) {
    const int k = kNhwc ? item % kK : item / tiles, t = kNhwc ? item / kK : item - k * tiles;
    const float* const src = m_ws + (kNhwc ? static_cast<long long>(t) * kKp + k : static_cast<long long>(k) * tp + t);
    float r[kA * 4];
#pragma unroll
    for (int row = 0; row < kA; ++row) {
      float m[kA];
#pragma unroll
      for (int col = 0; col < kA; ++col) m[col] = src[(row * kA + col) * m_point];
      W::template output<1, 1>(m, r + 4 * row);
    }
    const float b = kBias ? a.bias[k] : 0.f;
    const int n = t / tiles_image, rem = t - n * tiles_image;
    const int th = rem / tiles_x, tw = rem - th * tiles_x;
#pragma unroll
    for (int dx = 0; dx < 4; ++dx) {
      float y[4];
      W::template output<4, 1>(r + dx, y);
#pragma unroll
      for (int dy = 0; dy < 4; ++dy) {
        const int oy = 4 * th + dy, ox = 4 * tw + dx;
        if (oy >= p_out || ox >= q_out) continue;
        const long long at = kNhwc ? ((static_cast<long long>(n) * p_out + oy) * q_out + ox) * kK + k
                                   : ((static_cast<long long>(n) * kK + k) * p_out + oy) * q_out + ox;
        a.y[at] = apply_epilogue<Epi>(y[dy] + b, a.res + at);
      }
    }
  }
  // Every block passed the second barrier before counting itself out here: the last one resets the counter for
  // the next launch (LaunchPrep::rezeroed_by_kernel).
  if (tid == 0 && atomicAdd(barrier, 1u) == 3 * gridDim.x - 1) atomicExch(barrier, 0u);
}

}  // namespace conv
}  // namespace jitune
