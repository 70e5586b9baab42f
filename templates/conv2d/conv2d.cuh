// Direct NCHW convolution (PyTorch conv2d semantics, groups = 1): stride, zero padding, dilation, optional
// bias and fused epilogue, float / half / bfloat16 storage with float accumulation.
//
// Each block computes a tile of (kBlockH * kOutH) x (kBlockW * kOutW) output pixels for kKBlock output
// channels of one image. Input channels are consumed in stages of kCStage: a stage stages the input tile with
// its halo and the stage's filters in shared memory (as float), then every thread accumulates kOutH x kOutW
// pixels x kKBlock channels in registers. Per input row a thread reads the row segment its kOutW pixels need
// once (vector loads from shared memory) and applies it to every (output row, filter row) pair that uses that
// input row; the filter taps are broadcast vector reads. With kDoubleBuffer the next stage's global loads are
// issued before the current stage is computed and written to the other buffer afterwards (one barrier per
// stage); without, a barrier separates computing a stage from refilling the single buffer. Global loads are
// kLoad-element vectors wherever the address is aligned (checked per row segment at run time, so any pointer
// alignment and row pitch is correct); output rows are stored as vectors where aligned, element by element
// elsewhere.
#pragma once

#include "common/types.cuh"

namespace jitune {
namespace conv {

/// Kernel parameters (host mirror: launch.cpp's ArgsLayout; 5 pointers then 8 ints, no padding).
template <class T>
struct Args {
  const T* x;     ///< {N, C, H, W}
  const T* wt;    ///< {K, C, R, S}
  const T* bias;  ///< {K}; read only when the kernel is instantiated with kBias.
  T* y;           ///< {N, K, P, Q}
  const T* res;   ///< The epilogue's residual r, laid out as y; read only when the epilogue reads r.
  int n, h, w;    ///< Batch, input height and width.
  int p, q;       ///< Output height / width.
  int pad_h, pad_w;
  int tiles_x;  ///< Output tiles along Q (blockIdx.x = tile_y * tiles_x + tile_x).
};

/// The epilogue of a call without one: y is the convolution plus bias. A call's epilogue (the host's
/// epilogue_source) is a struct of the same shape made from its expression over acc and r.
struct NoEpilogue {
  static constexpr bool kActive = false, kResidual = false;
  __device__ __forceinline__ float operator()(float acc, float) const { return acc; }
};

/// One output element through the epilogue Epi: v is the convolution plus bias already rounded to T (what an
/// unfused conv2d stores, so the expression sees what PyTorch's next op would read), `r` the residual's element
/// at the same position (read only when Epi reads r); the expression runs in float and is rounded once.
template <class Epi, class T>
__device__ __forceinline__ T apply_epilogue(T v, const T* r) {
  if constexpr (!Epi::kActive) {
    return v;
  } else {
    return from_float<T>(Epi()(to_float(v), Epi::kResidual ? to_float(*r) : 0.f));
  }
}

/// The epilogue over kN consecutive outputs (a vector store's worth) whose residual elements start at r.
template <class Epi, class T, int kN>
__device__ __forceinline__ void apply_epilogue_pack(Pack<T, kN>& v, const T* r, bool r_vector) {
  if constexpr (Epi::kActive) {
    Pack<T, kN> rv;
    if constexpr (Epi::kResidual) {
      if (r_vector) {
        rv = *reinterpret_cast<const Pack<T, kN>*>(r);
      } else {
#pragma unroll
        for (int e = 0; e < kN; ++e) rv.v[e] = r[e];
      }
    }
#pragma unroll
    for (int e = 0; e < kN; ++e) v.v[e] = apply_epilogue<Epi>(v.v[e], &rv.v[e]);
  }
}

__host__ __device__ constexpr int round_up(int a, int b) {
  return (a + b - 1) / b * b;
}
/// Widest vector (4, 2 or 1 elements) that divides n.
__host__ __device__ constexpr int vector_of(int n) {
  return n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}

/// Tile geometry shared by the kernel and (mirrored) by the host's shared-memory formula in conv2d.cpp.
template <int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW, int kOutH, int kOutW, int kBlockH,
          int kBlockW, int kKBlock, int kCStage, int kLoad>
struct Geometry {
  static constexpr int kThreads = kBlockH * kBlockW;
  static constexpr int kTileH = kBlockH * kOutH;
  static constexpr int kTileW = kBlockW * kOutW;
  static constexpr int kInH = (kTileH - 1) * kStrideH + (kR - 1) * kDilH + 1;  // input rows with halo
  static constexpr int kInW = (kTileW - 1) * kStrideW + (kS - 1) * kDilW + 1;  // input columns with halo
  static constexpr int kSpan =
      (kOutW - 1) * kStrideW + (kS - 1) * kDilW + 1;            // columns one thread reads per row
  static constexpr int kReadVec = vector_of(kOutW * kStrideW);  // shared-memory read width
  static constexpr int kSpanRead = round_up(kSpan, kReadVec);
  static constexpr int kPitch = round_up((kBlockW - 1) * kOutW * kStrideW + kSpanRead, 4);  // >= kInW
  static constexpr int kRows = (kOutH - 1) * kStrideH + (kR - 1) * kDilH + 1;  // input rows one thread reads
  static constexpr int kRS = kR * kS;
  static constexpr int kInStage = kCStage * kInH * kPitch;         // floats per input buffer
  static constexpr int kWStage = kCStage * kRS * kKBlock;          // floats per filter buffer, [c][r][s][k]
  static constexpr int kWVec = vector_of(kKBlock);                 // filter read width
  static constexpr int kUnits = (kInW + 2 * (kLoad - 1)) / kLoad;  // load units per row, any misalignment
  static constexpr int kInItems = kCStage * kInH * kUnits;
  static constexpr int kInPerThread = (kInItems + kThreads - 1) / kThreads;
  static constexpr int kWPerThread = (kWStage + kThreads - 1) / kThreads;
};

/// dst[0..kN) = src[0..kN) in kV-element vector reads (src aligned to kV floats, kN a multiple of kV).
template <int kV, int kN>
__device__ __forceinline__ void load_shared_vec(float (&dst)[kN], const float* src) {
#pragma unroll
  for (int i = 0; i < kN; i += kV) {
    if constexpr (kV == 4) {
      const float4 t = *reinterpret_cast<const float4*>(src + i);
      dst[i] = t.x, dst[i + 1] = t.y, dst[i + 2] = t.z, dst[i + 3] = t.w;
    } else if constexpr (kV == 2) {
      const float2 t = *reinterpret_cast<const float2*>(src + i);
      dst[i] = t.x, dst[i + 1] = t.y;
    } else {
      dst[i] = src[i];
    }
  }
}

// Tunables (host names in brackets), each a template parameter:
//   kOutH, kOutW [out_h, out_w]: output pixels per thread (rows x contiguous columns); 1, 2, 4.
//   kBlockH, kBlockW [block_h, block_w]: thread block shape; the tile is (block_h*out_h) x (block_w*out_w).
//   kKBlock [k_block]: output channels per block, all accumulated by every thread; divides K.
//   kCStage [c_stage]: input channels per shared-memory stage; divides C.
//   kLoad [load]: elements per global vector load of the input tile; load * sizeof(T) <= 16.
//   kDoubleBuffer [double_buffer]: 0 or 1: prefetch the next stage into registers while computing this one.
//   kMaxRegs [max_regs]: register cap per thread (__maxnreg__), <= 65536 / threads; 255: none.
// Problem constants: kC, kK input / output channels, kR x kS filter, strides, dilations; kBias adds bias[k];
// Epi the call's epilogue (NoEpilogue without one).
template <class T, int kC, int kK, int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW,
          int kOutH, int kOutW, int kBlockH, int kBlockW, int kKBlock, int kCStage, int kLoad,
          int kDoubleBuffer, int kMaxRegs, int kBias, class Epi = NoEpilogue>
__global__ void __maxnreg__(kMaxRegs) conv2d(Args<T> a) {
  using G = Geometry<kR, kS, kStrideH, kStrideW, kDilH, kDilW, kOutH, kOutW, kBlockH, kBlockW, kKBlock,
                     kCStage, kLoad>;
  static_assert(kC % kCStage == 0, "c_stage must divide C");
  static_assert(kLoad * sizeof(T) <= 16, "load is at most 16 bytes");
  constexpr int kStages = kC / kCStage;
  constexpr int kBuffers = kDoubleBuffer ? 2 : 1;
  constexpr unsigned kElemShift = sizeof(T) == 4 ? 2 : sizeof(T) == 2 ? 1 : 0;

  extern __shared__ float4 shared_raw[];
  float* const s_in = reinterpret_cast<float*>(shared_raw);  // kBuffers x [c][row][pitch]
  float* const s_w = s_in + kBuffers * G::kInStage;          // kBuffers x [c][r][s][k]

  const int tid = threadIdx.x;
  const int tx = tid % kBlockW, ty = tid / kBlockW;
  const int tile_y = blockIdx.x / a.tiles_x, tile_x = blockIdx.x - tile_y * a.tiles_x;
  const int k0 = blockIdx.y * kKBlock;
  const int oy0 = tile_y * G::kTileH + ty * kOutH;  // this thread's first output row / column
  const int ox0 = tile_x * G::kTileW + tx * kOutW;
  const int iy0 = tile_y * G::kTileH * kStrideH - a.pad_h;  // input coordinates of the tile's shared origin
  const int ix0 = tile_x * G::kTileW * kStrideW - a.pad_w;
  const long long plane = static_cast<long long>(a.h) * a.w;

  for (int n = blockIdx.z; n < a.n; n += gridDim.z) {
    const T* x_n = a.x + static_cast<long long>(n) * kC * plane;

    // One load unit of the input tile: kLoad elements of row `row` of stage channel `c`, starting
    // kLoad-aligned (m elements before the tile's first column); zeros outside the input (the padding).
    auto unit_of = [&](int idx, int& c, int& row, int& u) {
      c = idx / (G::kInH * G::kUnits);
      const int rem = idx - c * (G::kInH * G::kUnits);
      row = rem / G::kUnits;
      u = rem - row * G::kUnits;
    };
    auto misalignment = [&](int c0, int c, int row) {
      if (kLoad == 1) return 0;
      const int gy = min(max(iy0 + row, 0), a.h - 1);  // rows outside hold zeros: any m is right for them
      const T* rowp = x_n + (c0 + c) * plane + static_cast<long long>(gy) * a.w;
      return static_cast<int>((reinterpret_cast<unsigned long long>(rowp + ix0) >> kElemShift) & (kLoad - 1));
    };
    auto load_unit = [&](int idx, int c0) {
      Pack<T, kLoad> v;
#pragma unroll
      for (int e = 0; e < kLoad; ++e) v.v[e] = from_float<T>(0.f);
      if (G::kInItems % G::kThreads == 0 || idx < G::kInItems) {
        int c, row, u;
        unit_of(idx, c, row, u);
        const int gy = iy0 + row;
        if (gy >= 0 && gy < a.h) {
          const T* rowp = x_n + (c0 + c) * plane + static_cast<long long>(gy) * a.w;
          const int gx = ix0 - misalignment(c0, c, row) + u * kLoad;
          if (kLoad > 1 && gx >= 0 && gx + kLoad <= a.w) {
            v = *reinterpret_cast<const Pack<T, kLoad>*>(rowp + gx);
          } else {
#pragma unroll
            for (int e = 0; e < kLoad; ++e)
              if (gx + e >= 0 && gx + e < a.w) v.v[e] = rowp[gx + e];
          }
        }
      }
      return v;
    };
    auto store_unit = [&](float* in, int idx, int c0, const Pack<T, kLoad>& v) {
      if (G::kInItems % G::kThreads == 0 || idx < G::kInItems) {
        int c, row, u;
        unit_of(idx, c, row, u);
        const int m = misalignment(c0, c, row);
        const int col0 = u * kLoad - m;
        float* dst = in + (c * G::kInH + row) * G::kPitch;
        bool stored = false;
        if constexpr (kLoad >= 4) {
          if (m == 0 && col0 + kLoad <= G::kPitch) {  // aligned: 16-byte shared stores
#pragma unroll
            for (int e = 0; e < kLoad; e += 4)
              *reinterpret_cast<float4*>(dst + col0 + e) = make_float4(
                  to_float(v.v[e]), to_float(v.v[e + 1]), to_float(v.v[e + 2]), to_float(v.v[e + 3]));
            stored = true;
          }
        }
        if (!stored) {
#pragma unroll
          for (int e = 0; e < kLoad; ++e)
            if (col0 + e >= 0 && col0 + e < G::kInW) dst[col0 + e] = to_float(v.v[e]);
        }
      }
    };
    // One filter tap of the stage: w[k0 + k][c0 + c][r][s] -> shared [c][r][s][k] (zero beyond K).
    auto load_tap = [&](int idx, int c0) {
      T v = from_float<T>(0.f);
      if (G::kWStage % G::kThreads == 0 || idx < G::kWStage) {
        const int k = idx / (kCStage * G::kRS);
        const int crs = idx - k * (kCStage * G::kRS);  // (c, r, s) of the stage, contiguous in w
        if (kK % kKBlock == 0 || k0 + k < kK)
          v = a.wt[static_cast<long long>(k0 + k) * kC * G::kRS + c0 * G::kRS + crs];
      }
      return v;
    };
    auto store_tap = [&](float* wt, int idx, T v) {
      if (G::kWStage % G::kThreads == 0 || idx < G::kWStage) {
        const int k = idx / (kCStage * G::kRS);
        wt[(idx - k * (kCStage * G::kRS)) * kKBlock + k] = to_float(v);
      }
    };

    // Double buffering holds the next stage in registers while this one is computed.
    Pack<T, kLoad> in_reg[kDoubleBuffer ? G::kInPerThread : 1];
    T w_reg[kDoubleBuffer ? G::kWPerThread : 1];
    auto prefetch_stage = [&](int c0) {
#pragma unroll
      for (int it = 0; it < G::kInPerThread; ++it) in_reg[it] = load_unit(tid + it * G::kThreads, c0);
#pragma unroll
      for (int it = 0; it < G::kWPerThread; ++it) w_reg[it] = load_tap(tid + it * G::kThreads, c0);
    };
    auto commit_stage = [&](int buf, int c0) {
#pragma unroll
      for (int it = 0; it < G::kInPerThread; ++it)
        store_unit(s_in + buf * G::kInStage, tid + it * G::kThreads, c0, in_reg[it]);
#pragma unroll
      for (int it = 0; it < G::kWPerThread; ++it)
        store_tap(s_w + buf * G::kWStage, tid + it * G::kThreads, w_reg[it]);
    };
    // Single buffer: global -> shared through a few registers at a time.
    auto copy_stage = [&](int c0) {
#pragma unroll 4
      for (int it = 0; it < G::kInPerThread; ++it) {
        const int idx = tid + it * G::kThreads;
        store_unit(s_in, idx, c0, load_unit(idx, c0));
      }
#pragma unroll 4
      for (int it = 0; it < G::kWPerThread; ++it) {
        const int idx = tid + it * G::kThreads;
        store_tap(s_w, idx, load_tap(idx, c0));
      }
    };

    float acc[kOutH][kOutW][kKBlock];
#pragma unroll
    for (int i = 0; i < kOutH; ++i)
#pragma unroll
      for (int j = 0; j < kOutW; ++j)
#pragma unroll
        for (int k = 0; k < kKBlock; ++k) acc[i][j][k] = 0.f;

    if constexpr (kDoubleBuffer) {
      prefetch_stage(0);
      commit_stage(0, 0);
    } else {
      copy_stage(0);
    }
    __syncthreads();
#pragma unroll 1
    for (int st = 0; st < kStages; ++st) {
      const int buf = kDoubleBuffer ? (st & 1) : 0;
      if constexpr (kDoubleBuffer) {
        if (st + 1 < kStages) prefetch_stage((st + 1) * kCStage);
      }
      const float* in_base =
          s_in + buf * G::kInStage + ty * kOutH * kStrideH * G::kPitch + tx * kOutW * kStrideW;
      const float* w_base = s_w + buf * G::kWStage;
#pragma unroll 1
      for (int c = 0; c < kCStage; ++c) {
        const float* in_c = in_base + c * G::kInH * G::kPitch;
        const float* w_c = w_base + c * G::kRS * kKBlock;
#pragma unroll
        for (int row = 0; row < G::kRows; ++row) {
          bool used = false;
#pragma unroll
          for (int i = 0; i < kOutH; ++i)
#pragma unroll
            for (int r = 0; r < kR; ++r) used |= i * kStrideH + r * kDilH == row;
          if (!used) continue;  // a compile-time constant after unrolling
          float v[G::kSpanRead];
          load_shared_vec<G::kReadVec>(v, in_c + row * G::kPitch);
#pragma unroll
          for (int i = 0; i < kOutH; ++i)
#pragma unroll
            for (int r = 0; r < kR; ++r) {
              if (i * kStrideH + r * kDilH != row) continue;
#pragma unroll
              for (int s = 0; s < kS; ++s) {
                float wk[kKBlock];
                load_shared_vec<G::kWVec>(wk, w_c + (r * kS + s) * kKBlock);
#pragma unroll
                for (int k = 0; k < kKBlock; ++k)
#pragma unroll
                  for (int j = 0; j < kOutW; ++j)
                    acc[i][j][k] = fmaf(v[j * kStrideW + s * kDilW], wk[k], acc[i][j][k]);
              }
            }
        }
      }
      if (st + 1 < kStages) {
        if constexpr (kDoubleBuffer) {
          commit_stage(buf ^ 1,
                       (st + 1) * kCStage);  // the other buffer: last read before the previous barrier
          __syncthreads();
        } else {
          __syncthreads();  // every thread is done reading the buffer
          copy_stage((st + 1) * kCStage);
          __syncthreads();
        }
      }
    }

    // Epilogue: bias, conversion, the call's epilogue, vector stores where the row address allows.
    constexpr int kStoreVec = kOutW * sizeof(T) <= 16 ? kOutW : 16 / sizeof(T);
#pragma unroll
    for (int i = 0; i < kOutH; ++i) {
      const int oy = oy0 + i;
      if (oy >= a.p) continue;
#pragma unroll
      for (int k = 0; k < kKBlock; ++k) {
        const int kk = k0 + k;
        if (kK % kKBlock != 0 && kk >= kK) continue;
        const float b = kBias ? to_float(a.bias[kk]) : 0.f;
        const long long row = ((static_cast<long long>(n) * kK + kk) * a.p + oy) * a.q;
        T* yrow = a.y + row;
        const T* rrow = a.res + row;
        const bool aligned =
            (reinterpret_cast<unsigned long long>(yrow + ox0) & (kStoreVec * sizeof(T) - 1)) == 0;
        if (kStoreVec > 1 && aligned && ox0 + kOutW <= a.q) {
          const bool r_vector =
              (reinterpret_cast<unsigned long long>(rrow + ox0) & (kStoreVec * sizeof(T) - 1)) == 0;
#pragma unroll
          for (int j = 0; j < kOutW; j += kStoreVec) {
            Pack<T, kStoreVec> out;
#pragma unroll
            for (int e = 0; e < kStoreVec; ++e) out.v[e] = from_float<T>(acc[i][j + e][k] + b);
            apply_epilogue_pack<Epi>(out, rrow + ox0 + j, r_vector);
            *reinterpret_cast<Pack<T, kStoreVec>*>(yrow + ox0 + j) = out;
          }
        } else {
#pragma unroll
          for (int j = 0; j < kOutW; ++j)
            if (ox0 + j < a.q)
              yrow[ox0 + j] = apply_epilogue<Epi>(from_float<T>(acc[i][j][k] + b), rrow + ox0 + j);
        }
      }
    }
    if (n + gridDim.z < a.n) __syncthreads();  // the next image refills the buffers
  }
}

}  // namespace conv
}  // namespace jitune

#include "conv2d/igemm.cuh"  // algo 1: the implicit-GEMM kernel on tensor cores
#include "conv2d/tcd.cuh"    // algo 2: the direct kernel on tensor cores
#include "conv2d/winograd.cuh"  // algo 3: Winograd F(2x2, 3x3) in float32
