// Direct convolution on tensor cores from a shared-memory halo tile (conv2d algo 2): float16 / bfloat16 storage,
// float accumulation, mma.sync m16n8k16 (sm_80+), NCHW or channels last, PyTorch conv2d semantics (stride, zero
// padding, dilation, bias). For short reductions (small C * R * S), where the implicit GEMM (algo 1) re-gathers
// every input pixel once per filter tap and the direct kernel (algo 0) runs on FFMA.
//
// A block computes kRows x kCols output pixels of one image for kNBlock output channels. It stages the input
// tile with its halo once, channels innermost ([y][x][c], C padded to a multiple of 8 with zeros), and the block's
// filters in the order the MMAs consume them. A staged pixel is an odd number of 16-byte chunks and every eighth
// column one chunk more, so the eight rows an ldmatrix phase reads (consecutive pixels) and the eight chunks a
// fill phase writes (pixels eight apart) fall on distinct banks. The reduction runs over 8-channel chunks of the
// filter taps, two chunks per k16 step; each warp keeps every step's filter fragments in registers and reads its
// A fragments with ldmatrix straight from the halo tile: the row address of a fragment row is the pixel's tap,
// so im2col costs nothing. Blocks are persistent: each stages its filters once and loops over output tiles (of
// every image). Fills: NCHW with W a multiple of 8 and a 16-byte aligned input copies the next tile's channel rows
// with cp.async (8 pixels a copy, from the halo's column rounded down to 8) into a raw buffer while the current
// tile is computed, then transposes them into the halo tile in shared memory; channels last with C a multiple of
// 8 and an aligned input copies 16-byte chunks straight into the halo tile; anything else (odd channel counts or
// widths, any alignment) gathers 8 channels of a pixel per thread. The output is written from the accumulators
// (NCHW: eight consecutive pixels of a channel row per eight lanes; NHWC: channel pairs).
#pragma once

#include "common/types.cuh"
#include "conv2d/igemm.cuh"  // MmaType, cp.async

namespace jitune {
namespace conv {

/// Shared-memory layout of conv2d_tcd, mirrored by the host's tcd_geometry in tcd.cpp.
template <int kNhwc, int kC, int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW, int kRows, int kCols,
          int kNBlock>
struct TcdGeometry {
  static constexpr int kChunks = (kC + 7) / 8;  // 16-byte chunks of a pixel's (padded) channels
  static constexpr int kPitch = kChunks | 1;    // chunks per staged pixel: odd
  static constexpr int kHaloH = (kRows - 1) * kStrideH + (kR - 1) * kDilH + 1;
  static constexpr int kHaloW = (kCols - 1) * kStrideW + (kS - 1) * kDilW + 1;
  // Staged columns: NCHW's tile starts at the halo's first column rounded down to a multiple of 8 (up to 7 more).
  static constexpr int kStagedW = kNhwc ? kHaloW : (kHaloW + 7 + 7) / 8 * 8;
  static constexpr int kRowChunks = kStagedW * kPitch + (kStagedW + 7) / 8;  // + one chunk every 8 columns
  static constexpr int kQ = kR * kS * kChunks;  // reduction chunks, tap-major
  static constexpr int kSteps = (kQ + 1) / 2;   // k16 steps; an odd kQ pairs its last chunk with a zero chunk
  static constexpr int kWPitch = 24;            // halves per staged filter row (16 + 8: conflict-free ldmatrix)
  static constexpr int kPixels = kRows * kCols;
  static constexpr int kHaloBytes = kHaloH * kRowChunks * 16 + 16;  // + the zero chunk
  // NCHW's raw tile: the C channel rows of the staged columns as they are in memory, filled by cp.async while the
  // previous tile is computed, then transposed into the halo tile.
  static constexpr int kRawBytes = kNhwc ? 0 : kC * kHaloH * kStagedW * 2;
  static constexpr int kWeightBytes = kSteps * kNBlock * kWPitch * 2;
  static constexpr int kBytes = kHaloBytes + kRawBytes + kWeightBytes;
};

/// Two 8x8 b16 matrices from shared memory; lanes 0-15 supply the row addresses.
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
}

/// The staged chunk of column x of a halo row (one extra chunk every 8 columns).
template <int kPitch>
__device__ __forceinline__ int tcd_column(int x) {
  return x * kPitch + (x >> 3);
}

// Tunables (host names in brackets): kRows [rows] x kCols [cols] output pixels and kNBlock [n_block] output
// channels per block, kWarps [warps] warps, each computing kMTiles [m_tiles] 16-pixel groups at a time.
// Problem constants: kNhwc (channels last: x {N,H,W,C}, w {K,R,S,C}, y {N,P,Q,K}; else x {N,C,H,W}, w {K,C,R,S},
// y {N,K,P,Q}), kC, kK channels, kR x kS filter, strides, dilations; kBias adds bias[k]; Epi the call's epilogue.
// Grid: x persistent blocks looping over the output tiles of every image (a.tiles_x along Q), y over K in kNBlock.
template <class T, int kNhwc, int kC, int kK, int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW,
          int kRows, int kCols, int kNBlock, int kWarps, int kMTiles, int kBias, class Epi = NoEpilogue>
__global__ void __launch_bounds__(32 * kWarps) conv2d_tcd(Args<T> a) {
  static_assert(sizeof(T) == 2, "tensor-core direct convolution takes float16 or bfloat16");
  using G = TcdGeometry<kNhwc, kC, kR, kS, kStrideH, kStrideW, kDilH, kDilW, kRows, kCols, kNBlock>;
  constexpr int kThreads = 32 * kWarps;
  constexpr int kNT = kNBlock / 8;  // n8 tiles per warp (every warp computes all kNBlock channels)
  constexpr int kGroups = G::kPixels / 16;
  static_assert(kNBlock % 8 == 0 && (kNT == 1 || kNT % 2 == 0), "n_block is 8 or a multiple of 16");
  static_assert(G::kPixels % 16 == 0 && kGroups % (kWarps * kMTiles) == 0,
                "the block's 16-pixel groups split evenly over warps x m_tiles");
  static_assert(kCols % 16 == 0, "a 16-pixel group lies in one output row");
  constexpr int kChunks = G::kChunks, kPitch = G::kPitch, kRowChunks = G::kRowChunks;
  constexpr int kQ = G::kQ, kSteps = G::kSteps;

  extern __shared__ float4 shared_raw[];
  unsigned char* const smem = reinterpret_cast<unsigned char*>(shared_raw);
  uint4* const halo = reinterpret_cast<uint4*>(smem);
  T* const raw = reinterpret_cast<T*>(smem + G::kHaloBytes);
  T* const wstage = reinterpret_cast<T*>(smem + G::kHaloBytes + G::kRawBytes);
  const unsigned halo_addr = static_cast<unsigned>(__cvta_generic_to_shared(halo));
  constexpr int kZeroChunk = G::kHaloH * kRowChunks;
  const unsigned zero_addr = halo_addr + kZeroChunk * 16;
  const unsigned w_addr = static_cast<unsigned>(__cvta_generic_to_shared(wstage));

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int k0 = blockIdx.y * kNBlock;
  const int tiles_y = (a.p + kRows - 1) / kRows, per_image = a.tiles_x * tiles_y, total = per_image * a.n;
  const long long plane = static_cast<long long>(a.h) * a.w;
  const bool nhwc_vector = kNhwc && kC % 8 == 0 && (reinterpret_cast<unsigned long long>(a.x) & 15) == 0;
  const bool nchw_vector = !kNhwc && a.w % 8 == 0 && (reinterpret_cast<unsigned long long>(a.x) & 15) == 0;
  if (static_cast<int>(blockIdx.x) >= total) return;

  // The block's filters as [step][n][16]: entry j < 8 of a step is channel j of chunk 2 * step, entry j >= 8
  // channel j - 8 of chunk 2 * step + 1; zero past C, past the chunks and past K.
  for (int i = tid; i < kSteps * kNBlock * 16; i += kThreads) {
    const int j = i % 16, n = (i / 16) % kNBlock, st = i / (16 * kNBlock);
    const int q = 2 * st + j / 8, tap = q / kChunks, c = (q % kChunks) * 8 + j % 8, r = tap / kS, s = tap % kS;
    const int k = k0 + n;
    T v = from_float<T>(0.f);
    if (q < kQ && c < kC && k < kK)
      v = kNhwc ? a.wt[((static_cast<long long>(k) * kR + r) * kS + s) * kC + c]
                : a.wt[((static_cast<long long>(k) * kC + c) * kR + r) * kS + s];
    wstage[(st * kNBlock + n) * G::kWPitch + j] = v;
  }
  if (tid == 0) halo[kZeroChunk] = make_uint4(0, 0, 0, 0);
  __syncthreads();

  // One step's B fragments for every n8 tile: ldmatrix rows are output channels.
  auto load_b = [&](int st, unsigned (&bs)[kNT][2]) {
    if constexpr (kNT == 1) {
      unsigned r2[2];
      ldmatrix_x2(r2, w_addr + ((st * kNBlock + lane % 8) * G::kWPitch + ((lane / 8) % 2) * 8) * 2);
      bs[0][0] = r2[0];
      bs[0][1] = r2[1];
    } else {
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        unsigned r4[4];
        const int n = np * 16 + (lane / 16) * 8 + lane % 8;
        ldmatrix_x4(r4, w_addr + ((st * kNBlock + n) * G::kWPitch + ((lane / 8) % 2) * 8) * 2);
        bs[2 * np][0] = r4[0];
        bs[2 * np][1] = r4[1];
        bs[2 * np + 1][0] = r4[2];
        bs[2 * np + 1][1] = r4[3];
      }
    }
  };
  // Every step's filter fragments, in registers for the whole block.
  unsigned b[kSteps][kNT][2];
#pragma unroll
  for (int st = 0; st < kSteps; ++st) load_b(st, b[st]);

  // Tile t: image t / per_image, then row-major tiles; its halo's first input row and column.
  struct Tile {
    int img, oy0, ox0, iy0, ix0;
  };
  auto tile_of = [&](int t) {
    Tile o;
    o.img = t / per_image;
    const int r = t - o.img * per_image, ty = r / a.tiles_x;
    o.oy0 = ty * kRows;
    o.ox0 = (r - ty * a.tiles_x) * kCols;
    o.iy0 = o.oy0 * kStrideH - a.pad_h;
    o.ix0 = o.ox0 * kStrideW - a.pad_w;
    return o;
  };
  // NCHW vector fill, first half: the C channel rows of the staged columns (from the halo's column rounded down
  // to 8) into the raw buffer by cp.async, 8 pixels a copy, zero outside the image. W is a multiple of 8 and
  // copies start on one, so a copy is wholly inside or outside.
  constexpr int kGroupsW = G::kStagedW / 8;
  auto issue_raw = [&](const Tile& o) {
    const int sx0 = o.ix0 & ~7;
    for (int u = tid; u < kC * G::kHaloH * kGroupsW; u += kThreads) {
      const int g = u % kGroupsW, hy = (u / kGroupsW) % G::kHaloH, c = u / (kGroupsW * G::kHaloH);
      const int iy = o.iy0 + hy, gx = sx0 + 8 * g;
      const bool inside = static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) && gx >= 0 && gx < a.w;
      const T* src =
          inside ? a.x + (static_cast<long long>(o.img) * kC + c) * plane + static_cast<long long>(iy) * a.w + gx : a.x;
      cp_async_16<false>(raw + (c * G::kHaloH + hy) * G::kStagedW + 8 * g, src, inside);
    }
    cp_async_commit();
  };

  // This lane's ldmatrix row of an A fragment: pixel (lane % 8) + 8 * ((lane / 8) % 2) of the 16-pixel group,
  // chunk 2 * step + lane / 16 of the reduction.
  const int a_row = lane % 8 + 8 * ((lane / 8) % 2), a_half = lane / 16;

  if (nchw_vector) issue_raw(tile_of(blockIdx.x));
  for (int t = blockIdx.x; t < total; t += gridDim.x) {
    const Tile o = tile_of(t);
    const int img = o.img, oy0 = o.oy0, ox0 = o.ox0, iy0 = o.iy0, ix0 = o.ix0;
    // The staged tile's first column: the halo's, or (NCHW vector fill) that rounded down to a multiple of 8.
    const int shift = nchw_vector ? ix0 - (ix0 & ~7) : 0;
    // The input tile with its halo, zero outside the image and past C.
    if (nchw_vector) {
      // Second half: each unit transposes 8 pixels x 8 channels of the raw rows into 8 pixel chunks (word i of a
      // chunk holds channels 2i, low half, and 2i + 1); then the next tile's copies start.
      cp_async_wait<0>();
      __syncthreads();
      for (int u = tid; u < G::kHaloH * kGroupsW * kChunks; u += kThreads) {
        const int g = u % kGroupsW, hy = (u / kGroupsW) % G::kHaloH, cj = u / (kGroupsW * G::kHaloH);
        uint4 v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int c = cj * 8 + e;
          v[e] = kC % 8 == 0 || c < kC ? *reinterpret_cast<const uint4*>(raw + (c * G::kHaloH + hy) * G::kStagedW + 8 * g)
                                       : make_uint4(0, 0, 0, 0);
        }
        uint4* row = halo + hy * kRowChunks + cj;
#pragma unroll
        for (int p = 0; p < 8; ++p) {
          const unsigned sel = p % 2 ? 0x7632u : 0x5410u;
          auto word = [&](const uint4& w) { return p / 2 == 0 ? w.x : p / 2 == 1 ? w.y : p / 2 == 2 ? w.z : w.w; };
          row[tcd_column<kPitch>(8 * g + p)] = pack_halves(word(v[0]), word(v[1]), word(v[2]), word(v[3]), word(v[4]),
                                                           word(v[5]), word(v[6]), word(v[7]), sel);
        }
      }
      __syncthreads();
      if (t + static_cast<int>(gridDim.x) < total) issue_raw(tile_of(t + gridDim.x));
    } else if (nhwc_vector) {
      for (int i = tid; i < G::kHaloH * G::kHaloW * kChunks; i += kThreads) {
        const int pix = i / kChunks, cj = i - pix * kChunks;
        const int hy = pix / G::kHaloW, hx = pix - hy * G::kHaloW, iy = iy0 + hy, ix = ix0 + hx;
        const bool inside =
            static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) && static_cast<unsigned>(ix) < static_cast<unsigned>(a.w);
        const T* src = inside ? a.x + ((img * plane + static_cast<long long>(iy) * a.w + ix) * kC + cj * 8) : a.x;
        cp_async_16<true>(halo + hy * kRowChunks + tcd_column<kPitch>(hx) + cj, src, inside);
      }
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
    } else {
      for (int i = tid; i < G::kHaloH * G::kHaloW * kChunks; i += kThreads) {
        // NCHW: consecutive threads take consecutive pixels of one chunk (coalesced rows); NHWC: consecutive
        // chunks of a pixel.
        constexpr int kHaloPixels = G::kHaloH * G::kHaloW;
        const int pix = kNhwc ? i / kChunks : i % kHaloPixels;
        const int cj = kNhwc ? i - pix * kChunks : i / kHaloPixels;
        const int hy = pix / G::kHaloW, hx = pix - hy * G::kHaloW, iy = iy0 + hy, ix = ix0 + hx;
        const bool inside =
            static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) && static_cast<unsigned>(ix) < static_cast<unsigned>(a.w);
        unsigned short h[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int c = cj * 8 + e;
          h[e] = 0;
          if (inside && (kC % 8 == 0 || c < kC)) {
            const long long at = kNhwc ? (img * plane + static_cast<long long>(iy) * a.w + ix) * kC + c
                                       : (static_cast<long long>(img) * kC + c) * plane + static_cast<long long>(iy) * a.w + ix;
            h[e] = __ldg(reinterpret_cast<const unsigned short*>(a.x) + at);
          }
        }
        halo[hy * kRowChunks + tcd_column<kPitch>(hx) + cj] =
            make_uint4(h[0] | (unsigned{h[1]} << 16), h[2] | (unsigned{h[3]} << 16), h[4] | (unsigned{h[5]} << 16),
                       h[6] | (unsigned{h[7]} << 16));
      }
      __syncthreads();
    }

    for (int g0 = warp * kMTiles; g0 < kGroups; g0 += kWarps * kMTiles) {
      float acc[kMTiles][kNT][4];
      int row_base[kMTiles], col_base[kMTiles];  // this lane's pixel's tap (0, 0): staged row chunk, column
#pragma unroll
      for (int j = 0; j < kMTiles; ++j) {
        const int p = (g0 + j) * 16 + a_row, py = p / kCols, px = p - py * kCols;
        row_base[j] = py * kStrideH * kRowChunks;
        col_base[j] = px * kStrideW + shift;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) acc[j][nt][0] = acc[j][nt][1] = acc[j][nt][2] = acc[j][nt][3] = 0.f;
      }
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
        // This lane's chunk of the step (2 * st or 2 * st + 1): its tap's row and column displacement and its
        // channel chunk are constants of the unrolled step; the last step of an odd kQ reads the zero chunk in
        // its upper half.
        const int q = 2 * st + a_half;
        const int tap = q / kChunks, dy = (tap / kS) * kDilH, dx = (tap % kS) * kDilW, cj = q % kChunks;
        const bool zero = kQ % 2 != 0 && q == kQ;
#pragma unroll
        for (int j = 0; j < kMTiles; ++j) {
          unsigned frag[4];
          const int chunk = row_base[j] + dy * kRowChunks + tcd_column<kPitch>(col_base[j] + dx) + cj;
          ldmatrix_x4(frag, zero ? zero_addr : halo_addr + chunk * 16);
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) MmaType<T>::mma(acc[j][nt], frag, b[st][nt][0], b[st][nt][1]);
        }
      }
      // Epilogue: accumulator (j, nt, e) is pixel (g0 + j) * 16 + lane / 4 + 8 * (e / 2) of the tile, channel
      // nt * 8 + 2 * (lane % 4) + e % 2 of the block.
#pragma unroll
      for (int j = 0; j < kMTiles; ++j) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int n = nt * 8 + 2 * (lane % 4);
          const float b0 = kBias && k0 + n < kK ? to_float(a.bias[k0 + n]) : 0.f;
          const float b1 = kBias && k0 + n + 1 < kK ? to_float(a.bias[k0 + n + 1]) : 0.f;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int p = (g0 + j) * 16 + lane / 4 + 8 * h;
            T v0 = from_float<T>(acc[j][nt][2 * h] + b0), v1 = from_float<T>(acc[j][nt][2 * h + 1] + b1);
            if constexpr (kNhwc) {
              const int py = p / kCols, px = p - py * kCols, oy = oy0 + py, ox = ox0 + px;
              if (oy >= a.p || ox >= a.q || k0 + n >= kK) continue;
              const long long at = ((static_cast<long long>(img) * a.p + oy) * a.q + ox) * kK + k0 + n;
              T* out = a.y + at;
              v0 = apply_epilogue<Epi>(v0, a.res + at);
              if (k0 + n + 1 < kK) v1 = apply_epilogue<Epi>(v1, a.res + at + 1);
              if (kK % 2 == 0 && (reinterpret_cast<unsigned long long>(a.y) & 3) == 0) {
                Pack<T, 2> pair;
                pair.v[0] = v0;
                pair.v[1] = v1;
                *reinterpret_cast<Pack<T, 2>*>(out) = pair;
              } else {
                out[0] = v0;
                if (k0 + n + 1 < kK) out[1] = v1;
              }
            } else {
              // Eight lanes store eight consecutive pixels of a channel row (a group never spans two rows).
              const int py = p / kCols, px = p - py * kCols, oy = oy0 + py, ox = ox0 + px;
              if (oy >= a.p || ox >= a.q) continue;
              const long long at = ((static_cast<long long>(img) * kK + k0 + n) * a.p + oy) * a.q + ox;
              const long long plane = static_cast<long long>(a.p) * a.q;
              T* out = a.y + at;
              if (k0 + n < kK) out[0] = apply_epilogue<Epi>(v0, a.res + at);
              if (k0 + n + 1 < kK) out[plane] = apply_epilogue<Epi>(v1, a.res + at + plane);
            }
          }
        }
      }
    }
    if (t + static_cast<int>(gridDim.x) < total) __syncthreads();  // the next tile refills the halo tile
  }
}

}  // namespace conv
}  // namespace jitune
