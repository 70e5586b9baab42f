// Implicit-GEMM convolution on tensor cores (conv2d algo 1), NCHW or channels last (NHWC): float16 / bfloat16
// storage, float accumulation, mma.sync m16n8k16 (sm_80+), PyTorch conv2d semantics (stride, zero padding,
// dilation, bias, fused epilogue). float32 storage runs the same kernel on TF32 tensor cores (m16n8k8, wgmma k8)
// where a problem opts in (precision tf32): the operands' float bits are handed to the MMA as they are, which
// reads their sign, exponent and top 10 mantissa bits (each input truncated toward zero to TF32), products summed
// in float. Everything is laid out in 16-byte chunks (8 halves or 4 floats, kV elements) and 32-byte MMA steps
// (16 halves or 8 floats along the reduction), so the staging, the swizzle and the fragments are the same bytes
// for both widths; float32 does not take the pixel-run A operand (wgmma reads TF32 K-major only).
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
//  - 2 to 8, cp.async: kStages shared buffers written by the copy engine without passing through registers,
//    kStages - 1 slices in flight while one is multiplied. Channels last with C a multiple of 8 and 16-byte
//    aligned x and w (the host's variant falls back to 0 for other pointers): an 8-channel tap is one 16-byte
//    copy, zero-filled outside the input.
// Two ways to multiply (kMma):
//  - 0, mma.sync m16n8k16 (sm_80+): each warp a (kTileM / kWarpsM) x (kTileN / kWarpsN) warp tile, fragments
//    read by ldmatrix from rows padded by 8 halves.
//  - 1, wgmma (sm_90a): each warpgroup (4 warps) a 64 x (kTileN / kWarpsN) tile issued as m64n128k16 steps
//    (m64n64k16 where its channels are not a multiple of 128) that read both operands from shared memory through
//    matrix descriptors. A stage is kTileK = 64 halves (128 bytes) a row, stored in the 128-byte swizzle
//    (16-byte chunk j of row r at chunk j ^ (r % 8); buffers 1024-byte aligned). The warpgroup's products run
//    asynchronously: one stage's group is still in flight while the next is issued, and the copies run
//    kStages - 2 stages ahead.
// Where the output tiles are too few to fill the GPU, kSplitK blocks share a tile's reduction (split-K): each
// writes its float partial tile to a workspace and the last to arrive sums them in a fixed order.
// Weights are read as 16-byte vectors where C * R * S is a multiple of 8 and the pointer is aligned, element by
// element elsewhere. The epilogue adds the bias in float, converts, stages the tile in shared memory ([k][m] for
// NCHW, [m][k] for NHWC) and writes runs of consecutive outputs as 16-byte stores where the run length is a
// multiple of 8 and y is aligned, coalesced element stores elsewhere; a call's epilogue (conv2d.cuh's
// apply_epilogue) runs on each run as it is stored, its residual read at the run's own address.
#pragma once

#include "common/grid_barrier.cuh"
#include "common/types.cuh"

namespace jitune {
namespace conv {

/// Shared-memory layout of conv2d_igemm for elements of kElem bytes (2, or 4 for TF32), mirrored by the host's
/// igemm_geometry in igemm.cpp. Sizes are in elements unless named bytes; kV elements make a 16-byte chunk.
template <int kTileM, int kTileN, int kTileK, int kStages, int kMma = 0, int kElem = 2>
struct IgemmGeometry {
  static constexpr int kV = 16 / kElem;
  static constexpr int kPitch = kMma ? kTileK : kTileK + kV;  // per staged row: 16 bytes of padding (wgmma: swizzled)
  static constexpr int kStage = (kTileM + kTileN) * kPitch;   // per buffer (A then B)
  static constexpr int kBuffers = kStages > 0 ? kStages : 2;
  static constexpr int kOutPitch = kTileM + 8;   // NCHW: per staged output channel ([k][m])
  static constexpr int kOutPitchNhwc = kTileN + 8;  // NHWC: per staged output pixel ([m][k])
  static constexpr int kMainBytes = kBuffers * kStage * kElem;
  static constexpr int kOutBytes =
      (kTileN * kOutPitch > kTileM * kOutPitchNhwc ? kTileN * kOutPitch : kTileM * kOutPitchNhwc) * kElem;
  static constexpr int kTableBytes = kStages > 0 ? 0 : 2 * kTileK * 16;  // two stages' reduction tables
  static constexpr int kAlignSlack = kMma ? 1024 : 0;  // wgmma's swizzled buffers start 1024-byte aligned
  static constexpr int kBytes = (kMainBytes > kOutBytes ? kMainBytes : kOutBytes) + kTableBytes + kAlignSlack;
  /// Elements from a staged matrix's start to the 16-byte chunk at (row, col): padded rows for mma.sync, the
  /// 128-byte swizzle for wgmma (chunk col / kV of row r stored at chunk (col / kV) ^ (r % 8)).
  __device__ static __forceinline__ int at(int row, int col) {
    if constexpr (kMma != 0) return row * kTileK + (((col / kV) ^ (row & 7)) * kV);
    else return row * kPitch + col;
  }
  /// wgmma's pixel-major (MN-major) A stage of an NCHW 1x1 convolution: per 64-pixel block (one warpgroup's rows)
  /// kTileK rows of 64 pixels, one reduction element (channel) a row, 128 bytes in the 128-byte swizzle (chunk
  /// pixel / 8 of row kk at chunk (pixel / 8) ^ (kk % 8)). Halves from the stage's start to (pixel m, channel kk).
  __device__ static __forceinline__ int at_mn(int m, int kk) {
    return (m >> 6) * 64 * kTileK + kk * 64 + ((((m & 63) >> 3) ^ (kk & 7)) << 3) + (m & 7);
  }
};

/// The tensor-core MMA of a storage type: kType names its wgmma input type (0 f16, 1 bf16, 2 tf32); mma is one
/// mma.sync step of 32 bytes of reduction (m16n8k16 for 16-bit inputs, m16n8k8 TF32 for float), whose fragments
/// are the same registers of the same bytes either way.
template <class T>
struct MmaType;
template <>
struct MmaType<__half> {
  static constexpr int kType = 0;
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
  static constexpr int kType = 1;
  __device__ static __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct MmaType<float> {
  static constexpr int kType = 2;
  __device__ static __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// wgmma (sm_90a): warpgroup-wide asynchronous MMA with both operands in shared memory. Compiled only for the
// arch-specific target (the host refuses kMma 1 elsewhere); other targets get an empty body never launched.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define JITUNE_WGMMA 1
#else
#define JITUNE_WGMMA 0
#endif

/// Matrix descriptor of a K-major operand in the 128-byte swizzle: start address, leading byte offset 16
/// (unused by this swizzle), 1024 bytes between 8-row groups, swizzle mode 1 (128 bytes).
__device__ __forceinline__ unsigned long long wgmma_descriptor(const void* shared) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  return static_cast<unsigned long long>((address & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
/// Matrix descriptor of an MN-major operand in the 128-byte swizzle (IgemmGeometry::at_mn): rows of 64 pixels,
/// 1024 bytes between groups of 8 reduction rows (the stride byte offset), `block_bytes` between 64-pixel blocks
/// (the leading byte offset; one m64 step reads a single block), swizzle mode 1.
__device__ __forceinline__ unsigned long long wgmma_descriptor_mn(const void* shared, unsigned block_bytes) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  return static_cast<unsigned long long>((address & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>((block_bytes & 0x3FFFF) >> 4) << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() {
#if JITUNE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if JITUNE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/// Waits until at most kPending of this warpgroup's committed wgmma groups are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if JITUNE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
/// Orders this thread's generic-proxy writes to shared memory (st.shared, cp.async) before reads by the async
/// proxy (wgmma's operand fetch); a barrier then publishes them to the warpgroup.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if JITUNE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
/// Keeps the compiler from moving accumulator accesses across wgmma issue / wait points.
__device__ __forceinline__ void wgmma_pin(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

#define JITUNE_WGMMA_D32                                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define JITUNE_WGMMA_OUT32(d)                                                                                   \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),       \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),  \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),  \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),  \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])

#define JITUNE_WGMMA_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define JITUNE_WGMMA_OUT64(d)                                                                                 \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),                    \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),                \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),                \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),                \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),                \
      "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),                \
      "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),              \
      "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),          \
      "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),          \
      "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),          \
      "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])

/// One wgmma step: `shape` m64nNk16, `type` f16 or bf16, N / 2 float outputs (JITUNE_WGMMA_D32 / D64 with
/// OUT32 / OUT64), then the descriptors', the scale-d predicate's and A's transpose flag's operand numbers.
#define JITUNE_WGMMA_STEP(shape, type, dregs, outs, a_idx, b_idx, p_idx, t_idx)                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #p_idx ", 0;\n"                                       \
               "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " " dregs ", %" #a_idx ", %" #b_idx \
               ", p, 1, 1, %" #t_idx ", 0;\n}\n"                                                           \
               : outs                                                                                       \
               : "l"(a), "l"(b), "r"(1), "n"(kTransA))
/// A TF32 wgmma step (m64nNk8): both operands K-major, so no transpose operand.
#define JITUNE_WGMMA_STEP_TF32(shape, dregs, outs, a_idx, b_idx, p_idx)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #p_idx ", 0;\n"                                          \
               "wgmma.mma_async.sync.aligned." shape ".f32.tf32.tf32 " dregs ", %" #a_idx ", %" #b_idx         \
               ", p, 1, 1;\n}\n"                                                                               \
               : outs                                                                                         \
               : "l"(a), "l"(b), "r"(1))

/// d (64 x kN of the warpgroup: this thread's kN / 8 n8 groups of 4 floats, the mma.sync C layout per n8 group)
/// += A (64 x 32 bytes of reduction: 16 halves or 8 TF32; K-major, or pixel-major where kTransA is 1) * B (32
/// bytes x kN, K-major), both by descriptor; kType is MmaType's (0 f16, 1 bf16, 2 tf32, which is K-major only).
/// kN 128 reads A once for twice the channels of kN 64.
template <int kType, int kN, int kTransA = 0>
__device__ __forceinline__ void wgmma_step(float (*d)[4], unsigned long long a, unsigned long long b) {
  static_assert(kN == 64 || kN == 128, "m64n64 or m64n128");
  static_assert(kTransA == 0 || kTransA == 1, "A K-major (0) or MN-major (1)");
  static_assert(kType != 2 || kTransA == 0, "wgmma reads TF32 operands K-major only");
#if JITUNE_WGMMA
  constexpr bool kBf16 = kType == 1;
  if constexpr (kN == 128 && kType == 2)
    JITUNE_WGMMA_STEP_TF32("m64n128k8", JITUNE_WGMMA_D64, JITUNE_WGMMA_OUT64(d), 64, 65, 66);
  else if constexpr (kType == 2)
    JITUNE_WGMMA_STEP_TF32("m64n64k8", JITUNE_WGMMA_D32, JITUNE_WGMMA_OUT32(d), 32, 33, 34);
  else if constexpr (kN == 128 && kBf16)
    JITUNE_WGMMA_STEP("m64n128k16", "bf16", JITUNE_WGMMA_D64, JITUNE_WGMMA_OUT64(d), 64, 65, 66, 67);
  else if constexpr (kN == 128)
    JITUNE_WGMMA_STEP("m64n128k16", "f16", JITUNE_WGMMA_D64, JITUNE_WGMMA_OUT64(d), 64, 65, 66, 67);
  else if constexpr (kBf16)
    JITUNE_WGMMA_STEP("m64n64k16", "bf16", JITUNE_WGMMA_D32, JITUNE_WGMMA_OUT32(d), 32, 33, 34, 35);
  else
    JITUNE_WGMMA_STEP("m64n64k16", "f16", JITUNE_WGMMA_D32, JITUNE_WGMMA_OUT32(d), 32, 33, 34, 35);
#else
  (void)d, (void)a, (void)b;
#endif
}

/// Bytes of split-K arrival counters at the start of conv2d_igemm's workspace (one per output tile; the host's
/// prep mirrors it).
__host__ __device__ constexpr unsigned igemm_counter_bytes(unsigned tiles) {
  return (tiles * 4u + 255u) / 256u * 256u;
}

/// Eight 16-bit values packed in order into 16 bytes: the low halves (sel 0x5410) or the high halves (0x7632) of
/// the words a .. h.
__device__ __forceinline__ uint4 pack_halves(unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned f,
                                             unsigned g, unsigned h, unsigned sel = 0x5410u) {
  return make_uint4(__byte_perm(a, b, sel), __byte_perm(c, d, sel), __byte_perm(e, f, sel), __byte_perm(g, h, sel));
}
__device__ __forceinline__ uint4 pack_halves(const unsigned (&h)[8]) {
  return pack_halves(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
}
/// The unsigned type of an element's raw bits (2 or 4 bytes).
template <int kBytes>
struct RawBits;
template <>
struct RawBits<2> {
  using type = unsigned short;
};
template <>
struct RawBits<4> {
  using type = unsigned;
};
/// One element's raw bits through the read-only cache: a 16-bit value zero-extended, or a float's 32 bits.
template <class T>
__device__ __forceinline__ unsigned load_bits(const T* p) {
  if constexpr (sizeof(T) == 2) return __ldg(reinterpret_cast<const unsigned short*>(p));
  else return __ldg(reinterpret_cast<const unsigned*>(p));
}
/// The 16-byte chunk of 16 / sizeof(T) elements' raw bits (load_bits) in order.
template <class T>
__device__ __forceinline__ uint4 pack_chunk(const unsigned (&h)[16 / sizeof(T)]) {
  if constexpr (sizeof(T) == 2) return pack_halves(h);
  else return make_uint4(h[0], h[1], h[2], h[3]);
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
/// kBytes (4 or 8) global -> shared through the copy engine, cached in L1, zero-filled where `full` is false.
template <int kBytes>
__device__ __forceinline__ void cp_async_small(void* shared, const void* global, bool full) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(address), "l"(global), "n"(kBytes),
               "r"(full ? kBytes : 0));
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

// One output tile of conv2d_igemm (below): tile (tile_m, tile_n) of tiles_m x (tiles_mn / tiles_m), split `split`
// of its reduction. kLoadNhwc: the layout x and w are read in (1: channels last, x {N,H,W,C}, w {K,R,S,C}; 0:
// x {N,C,H,W}, w {K,C,R,S}); kStoreNhwc: the layout y is written in (1: {N,P,Q,K}; 0: {N,K,P,Q}). workspace: the
// split-K counters and partial tiles. The other parameters are conv2d_igemm's.
template <class T, int kLoadNhwc, int kStoreNhwc, int kC, int kK, int kR, int kS, int kStrideH, int kStrideW,
          int kDilH, int kDilW, int kTileM, int kTileN, int kTileK, int kWarpsM, int kWarpsN, int kMma, int kStages,
          int kSplitK, int kBias, int kPersist, class Epi>
__device__ __forceinline__ void igemm_tile(Args<T> a, void* workspace, T* const smem, int tile_m, int tile_n,
                                           int split, int tiles_m, int tiles_mn) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4,
                "tensor-core implicit GEMM takes float16 / bfloat16, or float32 on TF32 tensor cores");
  constexpr int kV = 16 / sizeof(T);  // elements per 16-byte chunk (8 halves, 4 floats)
  constexpr int kKStep = 2 * kV;      // reduction elements per MMA step (32 bytes: k16 halves, k8 TF32)
  // The cp.async stages: channels last (kV-channel taps of 16 bytes), or an NCHW 1x1 convolution of stride 1 on
  // wgmma (kMnA: runs of consecutive pixels of one channel, the A operand pixel-major; no padding, by rule).
  constexpr bool kMnA = kStages > 0 && !kLoadNhwc;
  static_assert(kStages == 0 || kStages >= 2, "cp.async pipelines take 2 or more stages");
  static_assert(!kPersist || (kMnA && kSplitK == 1), "persistent blocks: an NCHW 1x1 read as pixel runs, no split-K");
  static_assert(kStages == 0 || kC % kV == 0, "cp.async stages copy 16 bytes of a filter row at a time");
  static_assert(!kMnA || (kMma == 1 && kR == 1 && kS == 1 && kStrideH == 1 && kStrideW == 1 && sizeof(T) == 2),
                "NCHW through cp.async: a 1x1 convolution of stride 1 on wgmma (pixel runs of one channel; 16-bit "
                "inputs, as wgmma reads TF32 K-major only)");
  static_assert(kMma == 0 || (kTileK * sizeof(T) == 128 && kTileM == 64 * kWarpsM && (kTileN / kWarpsN) % 64 == 0 &&
                              (kStages == 0 || kStages >= 3)),
                "wgmma: 64-pixel warpgroup tiles, channels in 64s, 128-byte rows (tile_k 64 halves or 32 floats), "
                "0 or 3+ stages");
  using G = IgemmGeometry<kTileM, kTileN, kTileK, kStages, kMma, sizeof(T)>;
  // Warps along the pixels: a wgmma warpgroup's four warps hold 16 rows each of its 64 (the C layout of
  // m64nNk16 is mma.sync's per warp), so the epilogue and split-K see kWM x kWarpsN warps of 16-row tiles.
  constexpr int kWM = kMma ? 4 * kWarpsM : kWarpsM;
  constexpr int kThreads = 32 * kWM * kWarpsN;
  constexpr int kWarpM = kTileM / kWM, kWarpN = kTileN / kWarpsN;
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "warp tiles are multiples of 16 x 16");
  static_assert(kTileK % 16 == 0, "tile_k is a multiple of 16");
  constexpr int kMI = kWarpM / 16, kNI = kWarpN / 8;
  constexpr int kRS = kR * kS, kCRS = kC * kRS;
  constexpr int kKTiles = (kCRS + kTileK - 1) / kTileK;
  constexpr int kChunksPerRow = kTileK / kV;  // 16-byte chunks of a staged row
  constexpr int kAChunks = kTileM * kChunksPerRow, kBChunks = kTileN * kChunksPerRow;
  constexpr int kAPer = (kAChunks + kThreads - 1) / kThreads, kBPer = (kBChunks + kThreads - 1) / kThreads;
  constexpr bool kWeightVectors = kCRS % kV == 0;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp % kWM, warp_n = warp / kWM;
  const int pq = a.p * a.q;
  const int m_total = a.n * pq;
  // The output tile's first pixel and channel (persistent blocks: of the tile being stored, set per tile).
  int m0 = tile_m * kTileM, k0 = tile_n * kTileN;
  const long long plane = static_cast<long long>(a.h) * a.w;

  // A chunk idx's staged row (output pixel) and first column. Channels last stores a pixel's taps as consecutive
  // 16-byte chunks, so a warp's chunks run along rows (whole 128-byte lines; a warp down a column read 32 lines
  // for half a sector each and saturated the L1 on the H100); NCHW's pixels are consecutive within a channel, so
  // a warp's chunks run down a column.
  auto a_row = [](int idx) { return kLoadNhwc ? idx / kChunksPerRow : idx % kTileM; };
  auto a_col = [](int idx) { return (kLoadNhwc ? idx % kChunksPerRow : idx / kTileM) * kV; };
  // The pixels this thread gathers: chunk i covers row a_row(tid + i * kThreads) of the A tile. Rows past
  // the output get a top row no filter tap reaches (the host keeps H, W and padding below 2^29).
  // base: the byte address of the pixel's tap (0, 0) of channel 0, possibly outside x (padding), only ever
  // offset to taps inside it; one IMAD.WIDE per gathered element.
  unsigned long long base[kAPer];
  int iy_base[kAPer], ix_base[kAPer];
#pragma unroll
  for (int i = 0; i < kAPer; ++i) {
    const int m = m0 + a_row(tid + i * kThreads);
    const bool valid = (kAChunks % kThreads == 0 || tid + i * kThreads < kAChunks) && m < m_total;
    const int img = valid ? m / pq : 0, rem = valid ? m - img * pq : 0;
    const int oy = rem / a.q, ox = rem - oy * a.q;
    iy_base[i] = valid ? oy * kStrideH - a.pad_h : -(1 << 30);
    ix_base[i] = ox * kStrideW - a.pad_w;
    // Element offset of the tap (0, 0) of channel 0: NCHW img*C*H*W + iy*W + ix, NHWC (img*H*W + iy*W + ix)*C.
    const long long rel = valid ? static_cast<long long>(iy_base[i]) * a.w + ix_base[i] : 0;
    const long long offset = kLoadNhwc ? (static_cast<long long>(img) * plane + rel) * kC
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
      const int c = kLoadNhwc ? kk % kC : kk / kRS, rs = kLoadNhwc ? kk / kC : kk - c * kRS, r = rs / kS, s = rs - r * kS;
      const int dy = r * kDilH, dx = s * kDilW;
      const int offset = kLoadNhwc ? (dy * a.w + dx) * kC + c : c * static_cast<int>(plane) + dy * a.w + dx;
      table[(kt & 1) * kTileK + j] = kk < kCRS ? make_int4(offset, dy, dx, 0) : make_int4(0, -(1 << 30), 0, 0);
    }
  };

  using Chunk = Pack<T, kV>;
  uint4 a_reg[kAPer], b_reg[kBPer];  // a chunk each
  auto load_tile = [&](int kt) {
    const int4* const tab = table + (kt & 1) * kTileK;
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int col = a_col(tid + i * kThreads);
      if (kAChunks % kThreads != 0 && tid + i * kThreads >= kAChunks) continue;  // no chunk (nor table entry)
      if (kLoadNhwc && kC % kV == 0 && input_aligned) {  // kV channels of one tap: one 16-byte load
        const int4 t = tab[col];
        const int iy = iy_base[i] + t.y, ix = ix_base[i] + t.z;
        a_reg[i] = static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) && static_cast<unsigned>(ix) < static_cast<unsigned>(a.w)
                       ? __ldg(reinterpret_cast<const uint4*>(base[i] + static_cast<long long>(t.x) * sizeof(T)))
                       : make_uint4(0, 0, 0, 0);
        continue;
      }
      unsigned h[kV];  // raw elements, zero outside the input
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        const int4 t = tab[col + e];
        const int iy = iy_base[i] + t.y, ix = ix_base[i] + t.z;
        h[e] = 0;
        if (static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) && static_cast<unsigned>(ix) < static_cast<unsigned>(a.w))
          h[e] = load_bits(reinterpret_cast<const T*>(base[i] + static_cast<long long>(t.x) * sizeof(T)));
      }
      a_reg[i] = pack_chunk<T>(h);
    }
#pragma unroll
    for (int i = 0; i < kBPer; ++i) {
      const int idx = tid + i * kThreads;
      const int row = idx / kChunksPerRow, kk0 = kt * kTileK + (idx - row * kChunksPerRow) * kV;
      const int k = k0 + row;
      const bool live = (kBChunks % kThreads == 0 || idx < kBChunks) && (kK % kTileN == 0 || k < kK);
      const T* src = a.wt + static_cast<long long>(k) * kCRS + kk0;
      if (kWeightVectors && weights_aligned) {
        b_reg[i] = live && (kCRS % kTileK == 0 || kk0 < kCRS) ? __ldg(reinterpret_cast<const uint4*>(src))
                                                              : make_uint4(0, 0, 0, 0);
      } else {
        unsigned h[kV];
#pragma unroll
        for (int e = 0; e < kV; ++e) h[e] = live && kk0 + e < kCRS ? load_bits(src + e) : 0u;
        b_reg[i] = pack_chunk<T>(h);
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
        *reinterpret_cast<uint4*>(s_a + G::at(a_row(idx), a_col(idx))) = a_reg[i];
    }
#pragma unroll
    for (int i = 0; i < kBPer; ++i) {
      const int idx = tid + i * kThreads;
      if (kBChunks % kThreads == 0 || idx < kBChunks) {
        const int row = idx / kChunksPerRow;
        *reinterpret_cast<uint4*>(s_b + G::at(row, (idx - row * kChunksPerRow) * kV)) = b_reg[i];
      }
    }
  };

  float acc[kMI][kNI][4];
  auto zero_accumulators = [&] {
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < kNI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  };
  zero_accumulators();

  // One stage's products: per 16-wide step, the warp's A and B fragments by ldmatrix, then its MMAs.
  auto multiply = [&](int buf) {
    const T* const s_a = smem + buf * G::kStage;
    const T* const s_b = s_a + kTileM * G::kPitch;
    if constexpr (kMma != 0) {
      // The warpgroup's 64 rows of A and kWarpN rows of B, kKStep reduction elements (32 bytes) per step; this
      // thread's accumulators of channel step j are acc[0][kStepN / 8 * j ..] (kStepN / 8 n8 groups).
      const int group = warp / 4;
      const T* const wa = s_a + (group % kWarpsM) * 64 * kTileK;  // both A layouts: 64 x kTileK a block
      const T* const wb = s_b + (group / kWarpsM) * kWarpN * kTileK;
      // Channels in 128s where the warpgroup's tile allows (A read once per 128), else in 64s.
      constexpr int kStepN = kWarpN % 128 == 0 ? 128 : 64;
#pragma unroll
      for (int ks = 0; ks < kTileK; ks += kKStep)
#pragma unroll
        for (int j = 0; j < kWarpN / kStepN; ++j) {
          // K-major A: kKStep reduction elements along its rows; pixel-major: 16 rows of 64 pixels further.
          const unsigned long long da = kMnA ? wgmma_descriptor_mn(wa + ks * 64, 64 * kTileK * 2)
                                             : wgmma_descriptor(wa + ks);
          const unsigned long long db = wgmma_descriptor(wb + j * kStepN * kTileK + ks);
          wgmma_step<MmaType<T>::kType, kStepN, kMnA ? 1 : 0>(&acc[0][kStepN / 8 * j], da, db);
        }
    } else {
#pragma unroll
      // Per 32-byte step the fragments are the same bytes for k16 halves and k8 TF32: ldmatrix's 8x8 b16
      // matrices are 8 rows x 16 bytes, i.e. 8 x 4 floats, which is where m16n8k8's a0..a3 / b0, b1 sit.
      for (int ks = 0; ks < kTileK; ks += kKStep) {
        unsigned af[kMI][4], bf[kNI / 2][4];
#pragma unroll
        for (int i = 0; i < kMI; ++i)
          ldmatrix_x4(af[i], s_a + (warp_m * kWarpM + i * 16 + lane % 16) * G::kPitch + ks + (lane / 16) * kV);
#pragma unroll
        for (int j = 0; j < kNI / 2; ++j)
          ldmatrix_x4(bf[j], s_b + (warp_n * kWarpN + j * 16 + (lane / 16) * 8 + lane % 8) * G::kPitch + ks +
                                 ((lane / 8) % 2) * kV);
#pragma unroll
        for (int i = 0; i < kMI; ++i)
#pragma unroll
          for (int j = 0; j < kNI; ++j)
            MmaType<T>::mma(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
      }
    }
  };
  // wgmma: the accumulators stay in place while a group is in flight.
  auto pin_accumulators = [&] {
    if constexpr (kMma != 0) {
#pragma unroll
      for (int j = 0; j < kNI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) wgmma_pin(acc[0][j][e]);
    }
  };

  // The epilogue, given where the tile is staged (s_out: the stage buffers after the main loop's last barrier,
  // or a persistent block's own region past them).
  auto epilogue = [&](T* const s_out) {
    // Accumulators (+ bias) -> shared as T, [k][m] for NCHW, [m][k] for NHWC, then stored in 16-byte chunks of
    // kV elements: runs of consecutive outputs of y, a pixel's channels (NHWC) or a channel's pixels (NCHW, pq a
    // multiple of kV). chunk_at gives chunk idx's offset in y, -1 outside it.
    constexpr int kColChunks = kTileN / kV, kRowChunks = kTileM / kV, kStoreChunks = kTileM * kTileN / kV;
    constexpr int kPer = (kStoreChunks + kThreads - 1) / kThreads;  // chunks per thread
    auto chunk_at = [&](int idx) -> long long {
      if constexpr (kStoreNhwc != 0) {
        const int row = idx / kColChunks, k = k0 + (idx - row * kColChunks) * kV, m = m0 + row;
        if (m >= m_total || (kK % kTileN != 0 && k >= kK)) return -1;
        return static_cast<long long>(m) * kK + k;
      } else {
        const int col = idx / kRowChunks, k = k0 + col, m = m0 + (idx - col * kRowChunks) * kV;
        if ((kK % kTileN != 0 && k >= kK) || m >= m_total) return -1;
        const int img = m / pq;
        return (static_cast<long long>(img) * kK + k) * pq + (m - img * pq);
      }
    };
    const bool vectors =
        (kStoreNhwc ? kK % kV == 0 : pq % kV == 0) && (reinterpret_cast<unsigned long long>(a.y) & 15) == 0;
    const bool r_vectors = (reinterpret_cast<unsigned long long>(a.res) & 15) == 0;
    // An epilogue's residual chunks are loaded before the tile is staged, so their latency overlaps it (up to 8
    // chunks, 32 registers, a thread; beyond that each is read as it is stored).
    constexpr bool kPrefetch = Epi::kResidual && kPer <= 8;
    constexpr int kStoreUnroll = kPer <= 8 ? kPer : 4;
    Chunk residual[kPrefetch ? kPer : 1];
    if constexpr (kPrefetch) {
      if (vectors && r_vectors) {
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          const int idx = tid + i * kThreads;
          const long long at = kStoreChunks % kThreads == 0 || idx < kStoreChunks ? chunk_at(idx) : -1;
          if (at >= 0) residual[i] = *reinterpret_cast<const Chunk*>(a.res + at);
        }
      }
    }
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
          if (kStoreNhwc) {
            s_out[row * G::kOutPitchNhwc + col] = from_float<T>(acc[i][j][e] + b);
            s_out[(row + 8) * G::kOutPitchNhwc + col] = from_float<T>(acc[i][j][e + 2] + b);
          } else {
            s_out[col * G::kOutPitch + row] = from_float<T>(acc[i][j][e] + b);
            s_out[col * G::kOutPitch + row + 8] = from_float<T>(acc[i][j][e + 2] + b);
          }
        }
      }
    __syncthreads();
    // The staged chunk idx: kV consecutive elements of s_out.
    auto staged = [&](int idx) -> const T* {
      if constexpr (kStoreNhwc != 0) {
        const int row = idx / kColChunks;
        return s_out + row * G::kOutPitchNhwc + (idx - row * kColChunks) * kV;
      } else {
        const int col = idx / kRowChunks;
        return s_out + col * G::kOutPitch + (idx - col * kRowChunks) * kV;
      }
    };
    if (vectors) {
#pragma unroll kStoreUnroll
      for (int i = 0; i < kPer; ++i) {
        const int idx = tid + i * kThreads;
        if (kStoreChunks % kThreads != 0 && idx >= kStoreChunks) break;
        const long long at = chunk_at(idx);
        if (at < 0) continue;
        Chunk v = *reinterpret_cast<const Chunk*>(staged(idx));
        if constexpr (kPrefetch) {
          apply_epilogue_pack<Epi>(v, r_vectors ? reinterpret_cast<const T*>(&residual[i]) : a.res + at, r_vectors);
        } else {
          apply_epilogue_pack<Epi>(v, a.res + at, r_vectors);
        }
        *reinterpret_cast<Chunk*>(a.y + at) = v;
      }
    } else if constexpr (kStoreNhwc != 0) {
      // K not a multiple of kV or y misaligned: a chunk's channels one by one.
#pragma unroll 4
      for (int idx = tid; idx < kStoreChunks; idx += kThreads) {
        const int row = idx / kColChunks, k = k0 + (idx - row * kColChunks) * kV, m = m0 + row;
        if (m >= m_total || (kK % kTileN != 0 && k >= kK)) continue;
        const long long at = static_cast<long long>(m) * kK + k;
        const T* src = staged(idx);
#pragma unroll
        for (int e = 0; e < kV; ++e)
          if (kK % kV == 0 || k + e < kK) a.y[at + e] = apply_epilogue<Epi>(src[e], a.res + at + e);
      }
    } else {
      // Pixels per image not a multiple of kV or y misaligned: element by element, coalesced along the pixels.
#pragma unroll 4
      for (int idx = tid; idx < kTileN * kTileM; idx += kThreads) {
        const int col = idx / kTileM, mm = idx - col * kTileM;
        const int k = k0 + col, m = m0 + mm;
        if ((kK % kTileN != 0 && k >= kK) || m >= m_total) continue;
        const int img = m / pq;
        const long long at = (static_cast<long long>(img) * kK + k) * pq + (m - img * pq);
        a.y[at] = apply_epilogue<Epi>(s_out[col * G::kOutPitch + mm], a.res + at);
      }
    }
  };

  // This block's slices of the reduction: split `split` of kSplitK takes kPerSplit of the kKTiles stages.
  constexpr int kPerSplit = (kKTiles + kSplitK - 1) / kSplitK;
  const int kt0 = split * kPerSplit;
  const int count = kKTiles - kt0 < kPerSplit ? kKTiles - kt0 : kPerSplit;
  if constexpr (kStages > 0) {
    // Stage kt's copies into buffer `buf`: each A chunk is the kV channels (c .. c + kV - 1) of tap (r, s) of one
    // pixel (kk = (r * S + s) * C + c), each B chunk kV consecutive weights of one filter row.
    // A thread's chunks all sit in one column of the stage (kThreads is a multiple of the chunks per row), kRowStep
    // rows apart: the tap, channel and reduction bounds are worked out once a stage, the shared offsets and the
    // weights' addresses are this thread's first plus constants.
    static_assert(kThreads % kChunksPerRow == 0, "a thread's chunks share a column");
    constexpr int kRowStep = kThreads / kChunksPerRow;
    const int my_row = tid / kChunksPerRow, my_col = (tid % kChunksPerRow) * kV;
    // kMnA: a thread copies the 8-pixel run mn_chunk * 8 of the A tile for channels mn_row + i * kMnStep of the
    // stage. The run is one 16-byte copy where every image's pixels come in 8s (H * W a multiple of 8), else 8- or
    // 4-byte pieces (H * W a multiple of 4 or 2, by rule), each inside one image; mn_base[p] is piece p's address
    // of channel 0 (x itself past the output: zero-filled).
    constexpr int kMnChunks = kTileM / 8;
    static_assert(!kMnA || kThreads % kMnChunks == 0, "a thread's A runs share their pixels");
    constexpr int kMnStep = kMnA ? kThreads / kMnChunks : 1;
    const int mn_chunk = tid % kMnChunks, mn_row = tid / kMnChunks;
    const int hw = a.h * a.w;
    const int mn_piece = hw % 8 == 0 ? 8 : hw % 4 == 0 ? 4 : 2;  // pixels a copy
    unsigned long long mn_base[kMnA ? 4 : 1];
    bool mn_live[kMnA ? 4 : 1];
    auto mn_bases = [&](int tile_m0) {  // the pieces of the tile starting at pixel tile_m0
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int m = tile_m0 + mn_chunk * 8 + q * mn_piece;
        mn_live[q] = q * mn_piece < 8 && m < m_total;
        const int img = mn_live[q] ? m / hw : 0, pix = mn_live[q] ? m - img * hw : 0;
        mn_base[q] = reinterpret_cast<unsigned long long>(a.x) +
                     static_cast<unsigned long long>((static_cast<long long>(img) * kC * hw + pix) * 2);
      }
    };
    if constexpr (kMnA && !kPersist) mn_bases(m0);
    // Stage kt of the output tile at (tile_m0, tile_k0) into buffer buf (a persistent block's next tile may be
    // copied while this one is stored).
    auto copy_stage = [&](int kt, int buf, int tile_m0, int tile_k0) {
      T* const s_a = smem + buf * G::kStage;
      T* const s_b = s_a + kTileM * G::kPitch;
      if constexpr (kMnA) {
        if constexpr (kPersist) mn_bases(tile_m0);
#pragma unroll
        for (int i = 0; i < kAPer; ++i) {
          const int row = mn_row + i * kMnStep;  // the stage's reduction row: channel kt * kTileK + row
          if (kAChunks % kThreads != 0 && row >= kTileK) continue;
          const int c = kt * kTileK + row;
          const bool in_c = kC % kTileK == 0 || c < kC;
          const long long offset = static_cast<long long>(c) * hw * 2;
          T* const dst = s_a + G::at_mn(mn_chunk * 8, row);
          if (mn_piece == 8) {
            cp_async_16<true>(dst, in_c && mn_live[0] ? reinterpret_cast<const void*>(mn_base[0] + offset) : a.x,
                              in_c && mn_live[0]);
          } else if (mn_piece == 4) {
#pragma unroll
            for (int q = 0; q < 2; ++q)
              cp_async_small<8>(dst + 4 * q,
                                in_c && mn_live[q] ? reinterpret_cast<const void*>(mn_base[q] + offset) : a.x,
                                in_c && mn_live[q]);
          } else {
#pragma unroll
            for (int q = 0; q < 4; ++q)
              cp_async_small<4>(dst + 2 * q,
                                in_c && mn_live[q] ? reinterpret_cast<const void*>(mn_base[q] + offset) : a.x,
                                in_c && mn_live[q]);
          }
        }
      }
      const int kk = kt * kTileK + my_col;
      const int c = kk % kC, rs = kk / kC, r = rs / kS, dy = r * kDilH, dx = (rs - r * kS) * kDilW;
      const bool in_reduction = kCRS % kTileK == 0 || kk < kCRS;
      const long long tap = static_cast<long long>((dy * a.w + dx) * kC + c) * sizeof(T);
#pragma unroll
      for (int i = 0; i < (kMnA ? 0 : kAPer); ++i) {
        if (kAChunks % kThreads != 0 && tid + i * kThreads >= kAChunks) continue;
        const int iy = iy_base[i] + dy, ix = ix_base[i] + dx;
        const bool inside = in_reduction && static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) &&
                            static_cast<unsigned>(ix) < static_cast<unsigned>(a.w);
        const void* src = inside ? reinterpret_cast<const void*>(base[i] + tap) : static_cast<const void*>(a.x);
        cp_async_16<true>(s_a + G::at(my_row + i * kRowStep, my_col), src, inside);
      }
#pragma unroll
      for (int i = 0; i < kBPer; ++i) {
        if (kBChunks % kThreads != 0 && tid + i * kThreads >= kBChunks) continue;
        const bool live = (kK % kTileN == 0 || tile_k0 + my_row + i * kRowStep < kK) && in_reduction;
        const T* const w_row = a.wt + static_cast<long long>(tile_k0 + my_row) * kCRS + my_col;
        const void* src = live ? static_cast<const void*>(w_row + static_cast<long long>(i) * kRowStep * kCRS +
                                                          kt * kTileK)
                               : static_cast<const void*>(a.wt);
        cp_async_16<false>(s_b + G::at(my_row + i * kRowStep, my_col), src, live);
      }
    };
    // Slices in flight ahead of the one multiplied: kStages - 1 for mma.sync (the buffer refilled was read by the
    // previous slice, before this iteration's barrier), kStages - 2 for wgmma (the previous slice's group may
    // still be reading its buffer, so the one refilled is two slices back).
    constexpr int kAhead = kMma ? kStages - 2 : kStages - 1;
    if constexpr (kPersist) {
      // Persistent blocks (one wave, gridDim.x blocks): this block's output tiles are blockIdx.x + i * gridDim.x,
      // channels fastest, and its slices run as one sequence across them, so the next tile's copies are in flight
      // while this one's products are staged and stored (its own region past the stage buffers).
      const int tiles_n = (kK + kTileN - 1) / kTileN;
      const int tiles = (m_total + kTileM - 1) / kTileM * tiles_n;
      const int mine = static_cast<int>(blockIdx.x) < tiles ? (tiles - 1 - static_cast<int>(blockIdx.x)) /
                                                                    static_cast<int>(gridDim.x) + 1
                                                              : 0;
      const int total = mine * kKTiles;
      // A tile of one slice waits for its products before it is stored, so the buffer it read is free by the next
      // iteration's barrier: kStages - 1 slices ahead there, kStages - 2 (as below) where a tile takes several.
      constexpr int kAheadP = kKTiles == 1 ? kStages - 1 : kAhead;
      auto copy_slice = [&](int sl, int buf) {
        const int tile = static_cast<int>(blockIdx.x) + sl / kKTiles * static_cast<int>(gridDim.x);
        copy_stage(sl % kKTiles, buf, tile / tiles_n * kTileM, tile % tiles_n * kTileN);
      };
#pragma unroll
      for (int st = 0; st < kAheadP; ++st) {
        if (st < total) copy_slice(st, st);
        cp_async_commit();
      }
      T* const s_out = smem + G::kBuffers * G::kStage;
      int read = 0, write = kAheadP;
#pragma unroll 1
      for (int sl = 0; sl < total; ++sl) {
        cp_async_wait<kAheadP - 1>();
        fence_proxy_async_shared();
        wgmma_wait<1>();
        __syncthreads();  // as below; also: the previous tile's stores have read s_out
        if (sl + kAheadP < total) copy_slice(sl + kAheadP, write);
        cp_async_commit();
        wgmma_fence();
        multiply(read);
        wgmma_commit();
        read = read + 1 == kStages ? 0 : read + 1;
        write = write + 1 == kStages ? 0 : write + 1;
        if (sl % kKTiles == kKTiles - 1) {  // the tile's last slice: store it, then start the next from zero
          wgmma_wait<0>();
          pin_accumulators();
          const int tile = static_cast<int>(blockIdx.x) + sl / kKTiles * static_cast<int>(gridDim.x);
          m0 = tile / tiles_n * kTileM;
          k0 = tile % tiles_n * kTileN;
          epilogue(s_out);
          zero_accumulators();
        }
      }
      cp_async_wait<0>();
      return;  // every tile stored
    } else {
      // Prologue: slices 0 .. kAhead - 1 in flight (a group per slice, empty past them, so the count of groups a
      // wait leaves pending always means the same slices).
#pragma unroll
      for (int st = 0; st < kAhead; ++st) {
        if (st < count) copy_stage(kt0 + st, st, m0, k0);
        cp_async_commit();
      }
      int read = 0, write = kAhead;
#pragma unroll 1
      for (int it = 0; it < count; ++it) {
        cp_async_wait<kAhead - 1>();  // slice it has landed (this thread's copies) ...
        if constexpr (kMma != 0) {
          fence_proxy_async_shared();  // ... visible to wgmma's operand reads,
          wgmma_wait<1>();             // and this warpgroup's slice it - 2 multiplied
        }
        __syncthreads();  // ... everyone's; buffer `write` (slice it - 1, wgmma: it - 2) is no longer read
        if (it + kAhead < count) copy_stage(kt0 + it + kAhead, write, m0, k0);
        cp_async_commit();
        if constexpr (kMma != 0) {
          wgmma_fence();
          multiply(read);
          wgmma_commit();
        } else {
          multiply(read);
        }
        read = read + 1 == kStages ? 0 : read + 1;
        write = write + 1 == kStages ? 0 : write + 1;
      }
      if constexpr (kMma != 0) {
        wgmma_wait<0>();
        pin_accumulators();
      }
      cp_async_wait<0>();
      __syncthreads();
    }
  } else if (count > 0) {
    // Tables by stage parity (kt & 1), shared buffers by this block's slice parity (it & 1).
    fill_table(kt0);
    if (count > 1) fill_table(kt0 + 1);
    __syncthreads();
    load_tile(kt0);
    store_tile(0);
    if constexpr (kMma != 0) fence_proxy_async_shared();  // the stores visible to wgmma's operand reads
    __syncthreads();
#pragma unroll 1
    for (int it = 0; it < count; ++it) {
      const int kt = kt0 + it;
      if (it + 1 < count) load_tile(kt + 1);
      // Stage kt + 2's table goes where stage kt's was (read by load_tile(kt), before the last barrier).
      if (it + 2 < count) fill_table(kt + 2);
      if constexpr (kMma != 0) wgmma_fence();
      multiply(it & 1);
      if constexpr (kMma != 0) wgmma_commit();
      if (it + 1 < count) store_tile((it + 1) & 1);  // the other buffer: last read before the previous barrier
      if constexpr (kMma != 0) {
        fence_proxy_async_shared();
        wgmma_wait<0>();  // this slice's products done before the barrier frees its buffer
        pin_accumulators();
      }
      __syncthreads();
    }
  }

  if constexpr (!kPersist) {  // persistent blocks stored their tiles above
    if constexpr (kSplitK > 1) {
      // Split reduction: every block stores its float partial tile (element e of every thread contiguous), then
      // counts itself in; the tile's last block to arrive sums the kSplitK partials in split order (the same
      // result whichever block is last), resets the counter for the next launch and runs the epilogue.
      constexpr int kAcc = kMI * kNI * 4;
      const int tile = tile_n * tiles_m + tile_m;
      unsigned* const counters = static_cast<unsigned*>(workspace);
      float* const partials = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) +
                                                       igemm_counter_bytes(tiles_mn));
      float* const mine = partials + (static_cast<long long>(tile) * kSplitK + split) * kAcc * kThreads;
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

    epilogue(smem);
  }
}

/// Bytes of the repacking kernel's workspace before its split-K part (the barrier counter), and the alignment of
/// its parts (the host's igemm_prep mirrors the layout).
constexpr long long kRepackHeaderBytes = 256;
__host__ __device__ constexpr long long igemm_align256(long long bytes) {
  return (bytes + 255) / 256 * 256;
}

// Tunables (host names in brackets): kTileM [tile_m] output pixels and kTileN [tile_n] output channels per
// block, kTileK [tile_k] reduction elements per stage, kWarpsM x kWarpsN [warps_m, warps_n] warps per block,
// kMinBlocks [min_blocks] blocks per SM the registers must allow (__launch_bounds__; 2 caps 256 threads at 128),
// kMma [mma] 0: mma.sync warps; 1: wgmma warpgroups (kWarpsM x kWarpsN of them, each 64 x kTileN / kWarpsN;
// kTileK 64),
// kStages [stages] 0: register-staged double buffer, 2..8: cp.async pipeline of that many shared buffers,
// kSplitK [split_k] blocks sharing one output tile's reduction (workspace: igemm_counter_bytes of zeroed arrival
// counters, one per tile, then a float partial tile per block).
// kPersist [persist] 1: one balanced wave of blocks (LaunchShape::balance_units), each taking output tiles
// blockIdx.x + i * gridDim.x with its cp.async pipeline running on into the next tile while it stores the last
// (an NCHW 1x1 read as pixel runs, split_k 1; the tile is staged past the stage buffers).
// kLayout: 0 NCHW (x {N,C,H,W}, w {K,C,R,S}, y {N,K,P,Q}), 1 channels last (x {N,H,W,C}, w {K,R,S,C}, y {N,P,Q,K}),
// 2 NCHW repacked [repack]: one cooperative launch (every block resident, LaunchShape::cooperative) that first
// copies x into the workspace as {N,H,W,C} and w as {K,R,S,C} (16-byte aligned, whatever x and w are), then, after a
// grid barrier, runs the channels-last cp.async pipeline over the copies with the NCHW epilogue, each block
// taking output tiles in turn; the last block to finish resets the barrier (LaunchPrep::rezeroed_by_kernel).
// Workspace: the barrier counter (kRepackHeaderBytes), the split-K part, the copy of x, the copy of w.
// Problem constants: kC, kK channels, kR x kS filter, strides, dilations; kBias adds bias[k]; Epi the call's
// epilogue (NoEpilogue without one).
template <class T, int kLayout, int kC, int kK, int kR, int kS, int kStrideH, int kStrideW, int kDilH, int kDilW,
          int kTileM, int kTileN, int kTileK, int kWarpsM, int kWarpsN, int kMinBlocks, int kMma, int kStages,
          int kSplitK, int kBias, int kPersist, class Epi = NoEpilogue>
__global__ void __launch_bounds__((kMma ? 128 : 32) * kWarpsM * kWarpsN, kMinBlocks)
    conv2d_igemm(Args<T> a, void* workspace) {
  extern __shared__ float4 shared_raw[];
  T* const smem = reinterpret_cast<T*>(
      kMma ? (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull
           : reinterpret_cast<unsigned long long>(shared_raw));
  if constexpr (kLayout != 2) {
    igemm_tile<T, kLayout, kLayout, kC, kK, kR, kS, kStrideH, kStrideW, kDilH, kDilW, kTileM, kTileN, kTileK,
               kWarpsM, kWarpsN, kMma, kStages, kSplitK, kBias, kPersist, Epi>(a, workspace, smem, blockIdx.x,
                                                                           blockIdx.y, blockIdx.z, gridDim.x,
                                                                           gridDim.x * gridDim.y);
  } else {
    constexpr int kV = 16 / sizeof(T);  // channels per 16-byte tap chunk (8 halves, 4 floats)
    static_assert(kC % kV == 0 && kStages > 0, "repacking feeds the cp.async pipeline 16-byte taps");
    constexpr int kThreads = (kMma ? 128 : 32) * kWarpsM * kWarpsN;
    constexpr int kRS = kR * kS;
    const int tid = threadIdx.x;
    const int hw = a.h * a.w;
    const int tiles_m = (a.n * a.p * a.q + kTileM - 1) / kTileM, tiles_n = (kK + kTileN - 1) / kTileN;
    const int tiles_mn = tiles_m * tiles_n;
    unsigned char* const bytes = static_cast<unsigned char*>(workspace);
    unsigned* const barrier = reinterpret_cast<unsigned*>(bytes);
    void* const split_ws = bytes + kRepackHeaderBytes;
    const long long split_bytes =
        kSplitK > 1 ? igemm_counter_bytes(tiles_mn) + static_cast<long long>(tiles_mn) * kSplitK * kTileM * kTileN * 4
                    : 0;
    T* const xs = reinterpret_cast<T*>(bytes + kRepackHeaderBytes + igemm_align256(split_bytes));
    T* const ws = xs + igemm_align256(static_cast<long long>(a.n) * hw * kC * sizeof(T)) / sizeof(T);

    // w {K,C,R,S} -> {K,R,S,C}: a thread per kV channels of one (k, r, s), gathered kRS apart, stored as one
    // 16-byte vector (a 1x1 filter's weights too: the copy is aligned wherever w is not).
    {
      constexpr int kChunks = kK * kRS * (kC / kV);
      for (int idx = blockIdx.x * kThreads + tid; idx < kChunks; idx += gridDim.x * kThreads) {
        const int cv = idx % (kC / kV), rest = idx / (kC / kV), rs = rest % kRS, k = rest / kRS;
        const T* src = a.wt + (static_cast<long long>(k) * kC + cv * kV) * kRS + rs;
        unsigned h[kV];
#pragma unroll
        for (int e = 0; e < kV; ++e) h[e] = load_bits(src + e * kRS);
        *reinterpret_cast<uint4*>(ws + (static_cast<long long>(k) * kRS + rs) * kC + cv * kV) = pack_chunk<T>(h);
      }
    }
    // x {N,C,H,W} -> {N,H,W,C}, through shared memory in tiles of 64 channels x kThreads pixels: each thread
    // reads kRuns runs of kV pixels of one channel (16-byte vectors where H * W is a multiple of kV and x is
    // aligned) and writes kRuns chunks of kV channels of one pixel as 16-byte vectors.
    {
      using Word = typename RawBits<sizeof(T)>::type;
      // Pixels per tile; elements per staged channel (an odd number of words: the column reads of the write
      // phase fall in distinct banks).
      constexpr int kTP = kThreads, kPitch = kTP + (sizeof(T) == 2 ? 2 : 1);
      constexpr int kRunsPerRow = kTP / kV, kRuns = 64 / kV;  // runs of a staged channel; runs per thread
      Word* const stage = reinterpret_cast<Word*>(smem);
      const int c_tiles = (kC + 63) / 64, p_tiles = (hw + kTP - 1) / kTP;
      const int x_tiles = a.n * c_tiles * p_tiles;
      const bool vectors = hw % kV == 0 && (reinterpret_cast<unsigned long long>(a.x) & 15) == 0;
      for (int t = blockIdx.x; t < x_tiles; t += gridDim.x) {
        const int pt = t % p_tiles, rest = t / p_tiles, ct = rest % c_tiles, img = rest / c_tiles;
        const int c0 = ct * 64, p0 = pt * kTP;
        const T* src = a.x + (static_cast<long long>(img) * kC + c0) * hw + p0;
        if (vectors) {  // all kRuns runs' loads in flight, then their stores
          uint4 v[kRuns];
#pragma unroll
          for (int i = 0; i < kRuns; ++i) {
            const int idx = tid + i * kThreads, row = idx / kRunsPerRow, j = (idx % kRunsPerRow) * kV;
            v[i] = c0 + row < kC && p0 + j < hw
                       ? __ldg(reinterpret_cast<const uint4*>(src + static_cast<long long>(row) * hw + j))
                       : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
          for (int i = 0; i < kRuns; ++i) {
            const int idx = tid + i * kThreads, row = idx / kRunsPerRow, j = (idx % kRunsPerRow) * kV;
            unsigned* dst = reinterpret_cast<unsigned*>(stage + row * kPitch + j);  // 4-byte aligned rows
            dst[0] = v[i].x, dst[1] = v[i].y, dst[2] = v[i].z, dst[3] = v[i].w;
          }
        } else {  // element by element (H * W not a multiple of kV, or x misaligned): small images
#pragma unroll 2
          for (int i = 0; i < kRuns; ++i) {
            const int idx = tid + i * kThreads, row = idx / kRunsPerRow, j = (idx % kRunsPerRow) * kV;
            const T* run = src + static_cast<long long>(row) * hw + j;
#pragma unroll
            for (int e = 0; e < kV; ++e)
              stage[row * kPitch + j + e] =
                  c0 + row < kC && p0 + j + e < hw ? static_cast<Word>(load_bits(run + e)) : Word{0};
          }
        }
        __syncthreads();
#pragma unroll 2
        for (int i = 0; i < kRuns; ++i) {
          const int idx = tid + i * kThreads, pixel = idx / kRuns, cv = idx % kRuns;
          if (p0 + pixel >= hw || c0 + cv * kV >= kC) continue;
          unsigned h[kV];
#pragma unroll
          for (int e = 0; e < kV; ++e) h[e] = stage[(cv * kV + e) * kPitch + pixel];
          *reinterpret_cast<uint4*>(xs + (static_cast<long long>(img) * hw + p0 + pixel) * kC + c0 + cv * kV) =
              pack_chunk<T>(h);
        }
        __syncthreads();
      }
    }
    grid_barrier(barrier, 1);

    Args<T> b = a;
    b.x = xs;
    b.wt = ws;
    for (int t = blockIdx.x; t < tiles_mn * kSplitK; t += gridDim.x) {
      igemm_tile<T, 1, 0, kC, kK, kR, kS, kStrideH, kStrideW, kDilH, kDilW, kTileM, kTileN, kTileK, kWarpsM,
                 kWarpsN, kMma, kStages, kSplitK, kBias, 0, Epi>(b, split_ws, smem, t % tiles_m,
                                                            (t / tiles_m) % tiles_n, t / tiles_mn, tiles_m, tiles_mn);
      __syncthreads();  // the tile's epilogue has read the shared memory the next tile's copies write
    }
    // Every block passed the barrier before counting itself out here: the last one resets it for the next launch.
    if (tid == 0 && atomicAdd(barrier, 1u) == 2 * gridDim.x - 1) atomicExch(barrier, 0u);
  }
}

}  // namespace conv
}  // namespace jitune
