// Experiment (issue 18): a 1x1 NCHW float16 convolution as a streaming GEMM, to learn whether a kernel built for the
// memory-bound shape (C = 64 -> K = 256 at 56x56: 12.8 MB read, 51.4 MB written) reaches cuDNN's rate, where conv2d
// algo 1 (the wgmma implicit GEMM) runs at 0.70x on the H200. Not part of the library: bench/experiments/
// conv1x1_stream.py compiles it with CuPy's NVRTC and times it beside torch's conv2d in one process.
//
// y[n][k][p] = sum_c w[k][c] x[n][c][p]. Persistent blocks take tiles of kBN pixels of one image in turn. A block keeps
// all of w in shared memory ([K][C], loaded once) and the tile's x ([C][kBN], double-buffered: the next tile's copy is
// in flight, by cp.async, while this one is multiplied and stored), multiplies on mma.sync m16n8k16 (f32
// accumulators; w is the row-major A by ldmatrix, x the B by ldmatrix.trans), kBM output channels at a time, and
// writes each warp's kWM x kWN outputs through its own shared-memory stage as 16-byte stores of consecutive pixels
// (four whole 128-byte lines a warp instruction), with the streaming hint where kStream is 1 (y is not read again).
// Limits of the experiment: HW % 8 == 0, C % 16 == 0, K % kBM == 0, w and the tile fit the shared memory.
typedef unsigned short half_bits;

__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  unsigned d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// One k16 step of a warp's kWM x kWN tile: w's rows from `wa` (the warp's first output channel at the step's first
// input channel, rows kWPitch apart), x's from `xb` (the step's first channel at the warp's first pixel, kXPitch apart).
template <int kWM, int kWN, int kWPitch, int kXPitch>
__device__ __forceinline__ void mma_step(float (&acc)[kWM / 16][kWN / 8][4], const half_bits* wa, const half_bits* xb,
                                         int lane) {
  unsigned a[kWM / 16][4], b[kWN / 8][2];
#pragma unroll
  for (int i = 0; i < kWM / 16; ++i) ldsm_x4(a[i], wa + (16 * i + lane % 16) * kWPitch + 8 * (lane / 16));
#pragma unroll
  for (int j = 0; j < kWN / 16; ++j) {
    unsigned r[4];
    ldsm_x4_t(r, xb + (lane % 16) * kXPitch + 16 * j + 8 * (lane / 16));
    b[2 * j][0] = r[0], b[2 * j][1] = r[1], b[2 * j + 1][0] = r[2], b[2 * j + 1][1] = r[3];
  }
#pragma unroll
  for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
    for (int j = 0; j < kWN / 8; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
          : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
}

// A warp's tile rounded into its stage s_s, then stored as 16-byte runs of pixels: row r at y0 + r * hw, pixels
// before `pixels` (the image's pixels left from the warp's first), with the streaming hint where kStream.
template <int kWM, int kWN, int kSPitch, int kStream>
__device__ __forceinline__ void store_tile(const float (&acc)[kWM / 16][kWN / 8][4], half_bits* s_s, half_bits* y0,
                                           int hw, int pixels, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
    for (int j = 0; j < kWN / 8; ++j) {
      *reinterpret_cast<unsigned*>(s_s + (16 * i + g) * kSPitch + 8 * j + 2 * t) = pack_half2(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<unsigned*>(s_s + (16 * i + g + 8) * kSPitch + 8 * j + 2 * t) =
          pack_half2(acc[i][j][2], acc[i][j][3]);
    }
  __syncwarp();
  constexpr int kChunks = kWN / 8, kRows = 32 / kChunks;
#pragma unroll
  for (int r0 = 0; r0 < kWM; r0 += kRows) {
    const int row = r0 + lane / kChunks, ch = lane % kChunks;
    const uint4 v = *reinterpret_cast<const uint4*>(s_s + row * kSPitch + 8 * ch);
    if (8 * ch < pixels) {
      uint4* const dst = reinterpret_cast<uint4*>(y0 + static_cast<long long>(row) * hw + 8 * ch);
      if (kStream)
        __stcs(dst, v);
      else
        *dst = v;
    }
  }
  __syncwarp();  // the stage is rewritten next
}

template <int kC, int kK, int kBM, int kBN, int kWM, int kWN, int kMinBlocks, int kStream>
__global__ void __launch_bounds__((kBM / kWM) * (kBN / kWN) * 32, kMinBlocks)
    conv1x1_stream(const half_bits* __restrict__ x, const half_bits* __restrict__ w, half_bits* __restrict__ y,
                   int n_img, int hw) {
  constexpr int kWarpsN = kBN / kWN, kWarps = (kBM / kWM) * kWarpsN, kThreads = kWarps * 32;
  constexpr int kWPitch = kC + 8, kXPitch = kBN + 8, kSPitch = kWN + 8;  // +16 bytes: ldmatrix rows on 8 banks
  static_assert(kC % 16 == 0 && kK % kBM == 0 && kWM % 16 == 0 && kWN % 16 == 0 && kWN <= 256, "tile shapes");
  extern __shared__ __align__(16) unsigned char smem[];
  half_bits* const s_w = reinterpret_cast<half_bits*>(smem);  // [kK][kWPitch]
  half_bits* const s_x = s_w + kK * kWPitch;                   // [2][kC][kXPitch]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  half_bits* const s_s = s_x + 2 * kC * kXPitch + warp * kWM * kSPitch;  // this warp's output stage
  const int per_image = (hw + kBN - 1) / kBN, tiles = n_img * per_image;

  for (int f = tid; f < kK * kC / 8; f += kThreads) {
    const int k = f / (kC / 8), c8 = f - k * (kC / 8);
    cp_async16(s_w + k * kWPitch + 8 * c8, w + static_cast<long long>(k) * kC + 8 * c8, 16);
  }
  auto load_x = [&](int tile, int buf) {
    const int n = tile / per_image, p0 = (tile - n * per_image) * kBN;
    for (int f = tid; f < kC * kBN / 8; f += kThreads) {
      const int c = f / (kBN / 8), ch = f - c * (kBN / 8), p = p0 + 8 * ch;
      const bool ok = p < hw;
      cp_async16(s_x + (buf * kC + c) * kXPitch + 8 * ch, x + (static_cast<long long>(n) * kC + c) * hw + (ok ? p : 0),
                 ok ? 16 : 0);
    }
  };
  int buf = 0;
  if (blockIdx.x < tiles) load_x(blockIdx.x, 0);
  asm volatile("cp.async.commit_group;\n");
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
    if (tile + gridDim.x < tiles) load_x(tile + gridDim.x, buf ^ 1);
    asm volatile("cp.async.commit_group;\n");
    asm volatile("cp.async.wait_group 1;\n");
    __syncthreads();
    const int n = tile / per_image, p0 = (tile - n * per_image) * kBN;
    const half_bits* const xs = s_x + buf * kC * kXPitch;
#pragma unroll 1
    for (int k0 = 0; k0 < kK; k0 += kBM) {
      float acc[kWM / 16][kWN / 8][4];
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
#pragma unroll
      for (int c0 = 0; c0 < kC; c0 += 16)
        mma_step<kWM, kWN, kWPitch, kXPitch>(acc, s_w + (k0 + wm * kWM) * kWPitch + c0, xs + c0 * kXPitch + wn * kWN,
                                             lane);
      store_tile<kWM, kWN, kSPitch, kStream>(acc, s_s,
                                             y + (static_cast<long long>(n) * kK + k0 + wm * kWM) * hw + p0 + wn * kWN,
                                             hw, hw - p0 - wn * kWN, lane);
    }
    __syncthreads();  // every warp has read this buffer before the next tile's copy is issued into it
  }
  asm volatile("cp.async.wait_group 0;\n");
}

// The read-bound shape (C = 256 -> K = 64 at 56x56: 51.4 MB read, 12.8 MB written): conv1x1_stream's ring unit is a
// whole tile of x (all C channels), so 256 channels hold one block an SM with two tiles in flight. Here the ring unit
// is kSlice channels of a tile: a block computes all kK outputs of kBN pixels, its accumulators kept over the tile's
// C / kSlice units, and kStages units in the ring (kStages - 1 copies in flight). y is staged and stored as above.
template <int kC, int kK, int kBN, int kWM, int kWN, int kSlice, int kStages, int kMinBlocks>
__global__ void __launch_bounds__((kK / kWM) * (kBN / kWN) * 32, kMinBlocks)
    conv1x1_slice(const half_bits* __restrict__ x, const half_bits* __restrict__ w, half_bits* __restrict__ y,
                  int n_img, int hw) {
  constexpr int kWarpsN = kBN / kWN, kWarps = (kK / kWM) * kWarpsN, kThreads = kWarps * 32;
  constexpr int kWPitch = kC + 8, kXPitch = kBN + 8, kSPitch = kWN + 8, kSlices = kC / kSlice;
  static_assert(kC % kSlice == 0 && kSlice % 16 == 0 && kK % kWM == 0 && kWM % 16 == 0 && kWN % 16 == 0, "shapes");
  extern __shared__ __align__(16) unsigned char smem[];
  half_bits* const s_w = reinterpret_cast<half_bits*>(smem);  // [kK][kWPitch]
  half_bits* const s_x = s_w + kK * kWPitch;                   // [kStages][kSlice][kXPitch]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  half_bits* const s_s = s_x + kStages * kSlice * kXPitch + warp * kWM * kSPitch;
  const int per_image = (hw + kBN - 1) / kBN, tiles = n_img * per_image;
  const int mine = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0, units = mine * kSlices;

  for (int f = tid; f < kK * kC / 8; f += kThreads) {
    const int k = f / (kC / 8), c8 = f - k * (kC / 8);
    cp_async16(s_w + k * kWPitch + 8 * c8, w + static_cast<long long>(k) * kC + 8 * c8, 16);
  }
  auto load_unit = [&](int u, int slot) {
    const int tile = blockIdx.x + (u / kSlices) * gridDim.x, c0 = (u % kSlices) * kSlice;
    const int n = tile / per_image, p0 = (tile - n * per_image) * kBN;
    for (int f = tid; f < kSlice * kBN / 8; f += kThreads) {
      const int c = f / (kBN / 8), ch = f - c * (kBN / 8), p = p0 + 8 * ch;
      const bool ok = p < hw;
      cp_async16(s_x + (slot * kSlice + c) * kXPitch + 8 * ch,
                 x + (static_cast<long long>(n) * kC + c0 + c) * hw + (ok ? p : 0), ok ? 16 : 0);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < units) load_unit(s, s);
    asm volatile("cp.async.commit_group;\n");
  }
  float acc[kWM / 16][kWN / 8][4];
  int slot = 0;
  for (int u = 0; u < units; ++u) {
    const int ahead = u + kStages - 1;
    if (ahead < units) load_unit(ahead, slot == 0 ? kStages - 1 : slot - 1);
    asm volatile("cp.async.commit_group;\n");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1));
    __syncthreads();
    const int slice = u % kSlices;
    if (slice == 0) {
#pragma unroll
      for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    }
    const half_bits* const xs = s_x + slot * kSlice * kXPitch;
#pragma unroll
    for (int c0 = 0; c0 < kSlice; c0 += 16)
      mma_step<kWM, kWN, kWPitch, kXPitch>(acc, s_w + wm * kWM * kWPitch + slice * kSlice + c0,
                                           xs + c0 * kXPitch + wn * kWN, lane);
    if (slice == kSlices - 1) {
      const int tile = blockIdx.x + (u / kSlices) * gridDim.x, n = tile / per_image, p0 = (tile - n * per_image) * kBN;
      store_tile<kWM, kWN, kSPitch, 1>(acc, s_s, y + (static_cast<long long>(n) * kK + wm * kWM) * hw + p0 + wn * kWN,
                                       hw, hw - p0 - wn * kWN, lane);
    }
    __syncthreads();  // every warp has read this slot before a later copy is issued into it
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }
  asm volatile("cp.async.wait_group 0;\n");
}
