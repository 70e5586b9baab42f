#!/usr/bin/env python3
"""Issue 21's transposes behind Inductor, measured in one process: what launch shape does a batched (0, 2, 1)
transpose need to move its bytes as fast as Inductor's Triton kernel? Hand-written shared-memory transposes (CuPy
RawModule, NVRTC) over tile shape, threads per block, blocks per SM and tile order, beside jitune's Python path,
eager PyTorch and Inductor (max-autotune-no-cudagraphs), timed by bench/peer_torch.timed with the host hidden, in
rounds that alternate the sides. Inductor's kernels are listed with their launch shape (grid, block, registers)
from a torch.profiler trace.

Cases: x.permute(0, 2, 1).contiguous() over (64, 1024, 1024) float16 and float32 (the suite's permute cases),
"chain": x.permute(0, 2, 1) * s + b over (64, 1024, 1024) float16 into a contiguous result (the variants fuse it;
jitune with out=), and "kept": the same chain in x's memory order, as PyTorch lays it out (no transpose), beside
streaming kernels over memory offsets that find each pack's bias row by division (Inductor's indexing).
--sector adds kernels without shared memory to the transposes (slow).

A measurement, not a test: it prints a table and writes JSON; nothing in the library depends on it.
usage: python3 bench/experiments/transpose_variants.py --json out.json [--rounds 3] [--only f16|f32|chain|kept]
"""
import argparse
import json
import os
import sys
import tempfile

import cupy as cp
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from peer.common import nonzero  # noqa: E402
from stream_variants import add_checked, measure, ptr  # noqa: E402  (same timing rounds, same pointer passing)

import jitune.torch as jt  # noqa: E402

# in [B][R][C] -> out [B][C][R]; R and C multiples of the tile. K_S element bytes; K_TR x K_TC tile (input rows x
# input columns); K_T threads; K_MINB blocks an SM in the launch bound; K_PAD shared-memory row padding (elements);
# K_ORDER 0: consecutive blocks walk along C (input rows), 1: along R (output rows); K_FUSE 1: y = x * s + b[r]
# (float16). Every load of a tile is issued before the first shared-memory store. K_SEC 1 builds the kernel without
# shared memory instead (sector_variant), K_SEC 2 the streaming kernel of the chain in x's memory order (flat_variant).
SOURCE = r"""
#include <cuda_fp16.h>
#if K_S == 2
typedef unsigned short E;
#else
typedef unsigned E;
#endif
// This block's tile: batch, tile row (returned: the bias of the fused chain starts there), and where it reads and
// writes. K_ORDER 0: consecutive blocks walk along C, 1: along R.
template <int TR, int TC>
__device__ __forceinline__ void locate(const E* in, E* out, int R, int C, int tiles_r, int tiles_c, int& tr,
                                       const E*& src, E*& dst) {
  int t = blockIdx.x;
  const int per_plane = tiles_r * tiles_c;
  const int b = t / per_plane;
  t -= b * per_plane;
#if K_ORDER == 0
  const int tc = t % tiles_c;
  tr = t / tiles_c;
#else
  const int tc = t / tiles_r;
  tr = t % tiles_r;
#endif
  const long long plane = (long long)R * C;
  src = in + b * plane + (long long)tr * TR * C + tc * TC;
  dst = out + b * plane + (long long)tc * TC * R + tr * TR;
}
#if K_SEC == 0
constexpr int V = 16 / K_S;
// K_EL: 0 a plain load; 1 ld.global.L1::evict_last (Triton's eviction_policy='evict_last'); 2 an L2 evict_last
// policy (createpolicy).
__device__ __forceinline__ uint4 load16(const void* p) {
  uint4 v;
#if K_EL == 1
  asm volatile("ld.global.L1::evict_last.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#elif K_EL == 2
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
#else
  v = *reinterpret_cast<const uint4*>(p);
#endif
  return v;
}
extern "C" __global__ void __launch_bounds__(K_T, K_MINB) tr(const E* __restrict__ in, E* __restrict__ out, int R,
                                                           int C, int tiles_r, int tiles_c, const __half* s,
                                                           const __half* bias) {
  __shared__ E tile[K_TR][K_TC + K_PAD];
  int tr;
  const E* src;
  E* dst;
  locate<K_TR, K_TC>(in, out, R, C, tiles_r, tiles_c, tr, src, dst);
  constexpr int LC = K_TC / V, RP = K_T / LC, NP = K_TR / RP;
  static_assert(NP >= 1 && K_T % LC == 0, "tile");
  const int lx = threadIdx.x % LC, ly = threadIdx.x / LC;
  uint4 v[NP];
#pragma unroll
  for (int p = 0; p < NP; ++p) v[p] = load16(src + (long long)(ly + p * RP) * C + lx * V);
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    const E* e = reinterpret_cast<const E*>(&v[p]);
#pragma unroll
    for (int j = 0; j < V; ++j) tile[ly + p * RP][lx * V + j] = e[j];
  }
  __syncthreads();
  constexpr int LR = K_TR / V, CP = K_T / LR, NQ = K_TC / CP;
  static_assert(NQ >= 1 && K_T % LR == 0, "tile");
  const int sx = threadIdx.x % LR, sy = threadIdx.x / LR;
#if K_FUSE
  const __half2 s2 = __half2half2(*s);
  uint4 bv = *reinterpret_cast<const uint4*>(bias + tr * K_TR + sx * V);
#endif
#pragma unroll
  for (int q = 0; q < NQ; ++q) {
    const int c = sy + q * CP;
    uint4 w;
    E* e = reinterpret_cast<E*>(&w);
#pragma unroll
    for (int j = 0; j < V; ++j) e[j] = tile[sx * V + j][c];
#if K_FUSE
    __half2* h = reinterpret_cast<__half2*>(&w);
    const __half2* hb = reinterpret_cast<const __half2*>(&bv);
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __hfma2(h[j], s2, hb[j]);
#endif
    *reinterpret_cast<uint4*>(dst + (long long)c * R + sx * V) = w;
  }
}
#elif K_SEC == 1
// Without shared memory (Triton's launch for the float16 chain): a thread reads K_V elements of one input column
// from K_V consecutive rows (one scalar load each) and writes them as one K_V-element vector of an output row.
// K_CL lanes walk along C, so each scalar load instruction reads whole 32-byte sectors of K_T / K_CL rows (float16:
// 16 lanes x 2 bytes); K_UC, K_UR: columns and row groups a thread moves (bytes in flight).
struct alignas(K_V * K_S) Pk { E e[K_V]; };
extern "C" __global__ void __launch_bounds__(K_T) sec(const E* __restrict__ in, E* __restrict__ out, int R, int C,
                                                    int tiles_r, int tiles_c, const __half* s, const __half* bias) {
  constexpr int RG = K_T / K_CL, TR = RG * K_V * K_UR, TC = K_CL * K_UC;
  int tr;
  const E* src;
  E* dst;
  locate<TR, TC>(in, out, R, C, tiles_r, tiles_c, tr, src, dst);
  const int cl = threadIdx.x % K_CL, rg = threadIdx.x / K_CL;
  Pk v[K_UR][K_UC];
#pragma unroll
  for (int ur = 0; ur < K_UR; ++ur)
#pragma unroll
    for (int uc = 0; uc < K_UC; ++uc)
#pragma unroll
      for (int k = 0; k < K_V; ++k)
        v[ur][uc].e[k] = src[(long long)(ur * RG * K_V + rg * K_V + k) * C + cl + uc * K_CL];
#if K_FUSE
  const __half2 s2 = __half2half2(*s);
#endif
#pragma unroll
  for (int ur = 0; ur < K_UR; ++ur) {
#if K_FUSE
    Pk bv = *reinterpret_cast<const Pk*>(bias + tr * TR + ur * RG * K_V + rg * K_V);
#endif
#pragma unroll
    for (int uc = 0; uc < K_UC; ++uc) {
      Pk w = v[ur][uc];
#if K_FUSE
      __half2* h = reinterpret_cast<__half2*>(&w);
      const __half2* hb = reinterpret_cast<const __half2*>(&bv);
#pragma unroll
      for (int j = 0; j < K_V / 2; ++j) h[j] = __hfma2(h[j], s2, hb[j]);
#endif
      *reinterpret_cast<Pk*>(dst + (long long)(cl + uc * K_CL) * R + ur * RG * K_V + rg * K_V) = w;
    }
  }
}
#endif
#if K_SEC == 2
// The chain in x's memory order (PyTorch's layout, no transpose): y[e] = x[e] * s + b[(e / C) % R] over
// memory offsets e, as Inductor's kernel indexes it. K_U packs of 8 halves a thread, K_T threads; K_GRID 0: one
// tile per block (Triton's launch), else a grid-stride grid. K_DIV 0: the row by division, 1: one bias value per
// K_T packs (K_T * 8 divides C).
extern "C" __global__ void __launch_bounds__(K_T) flat(const uint4* __restrict__ in, uint4* __restrict__ out,
                                                     unsigned packs, unsigned row_packs, unsigned rows,
                                                     const __half* s, const __half* bias) {
  const __half2 s2 = __half2half2(*s);
  for (unsigned base = blockIdx.x * (K_T * K_U) + threadIdx.x; base < packs; base += gridDim.x * (K_T * K_U)) {
    uint4 v[K_U];
    __half b[K_U];
#pragma unroll
    for (int u = 0; u < K_U; ++u) {
      const unsigned i = base + u * K_T;
      if (i < packs) {
        v[u] = in[i];
#if K_DIV == 0
        b[u] = bias[(i / row_packs) % rows];
#else
        b[u] = bias[((base - threadIdx.x + u * K_T) / row_packs) % rows];  // the block's row: one value
#endif
      }
    }
#pragma unroll
    for (int u = 0; u < K_U; ++u) {
      const unsigned i = base + u * K_T;
      if (i < packs) {
        __half2* h = reinterpret_cast<__half2*>(&v[u]);
        const __half2 b2 = __half2half2(b[u]);
#pragma unroll
        for (int j = 0; j < 4; ++j) h[j] = __hfma2(h[j], s2, b2);
        out[i] = v[u];
      }
    }
  }
}
#endif
"""

_MODULES = {}


def kernel(name="tr", **defs):
    key = (name,) + tuple(sorted(defs.items()))
    if key not in _MODULES:
        opts = tuple(f"-DK_{k}={v}" for k, v in sorted(defs.items())) + ("-std=c++17",)
        _MODULES[key] = cp.RawModule(code=SOURCE, options=opts).get_function(name)
    return _MODULES[key]


def variant(x, out, tr, tc, threads, minb, pad, order, el=0, fuse=None):
    B, R, C = x.shape
    fn = kernel(S=x.element_size(), TR=tr, TC=tc, T=threads, MINB=minb, PAD=pad, ORDER=order,
                FUSE=int(fuse is not None), SEC=0, EL=el)
    s, b = fuse if fuse is not None else (x, x)
    args = (ptr(x), ptr(out), np.int32(R), np.int32(C), np.int32(R // tr), np.int32(C // tc), ptr(s), ptr(b))
    grid = B * (R // tr) * (C // tc)
    return lambda: fn((grid,), (threads,), args)


def sector_variant(x, out, v, cl, threads, uc, ur, order, fuse=None):
    B, R, C = x.shape
    fn = kernel("sec", S=x.element_size(), V=v, CL=cl, T=threads, UC=uc, UR=ur, ORDER=order,
                FUSE=int(fuse is not None), SEC=1)
    tr, tc = threads // cl * v * ur, cl * uc
    s, b = fuse if fuse is not None else (x, x)
    args = (ptr(x), ptr(out), np.int32(R), np.int32(C), np.int32(R // tr), np.int32(C // tc), ptr(s), ptr(b))
    grid = B * (R // tr) * (C // tc)
    return lambda: fn((grid,), (threads,), args)


SMS = torch.cuda.get_device_properties(0).multi_processor_count


def flat_variant(x, out, s, b, threads, u, grid_waves, div):
    """The chain in x's memory order: a streaming kernel over memory offsets (x and the result share strides)."""
    B, R, C = x.shape
    packs = x.numel() // 8
    fn = kernel("flat", SEC=2, S=2, T=threads, U=u, GRID=grid_waves, DIV=div)
    tiles = -(-packs // (threads * u))
    grid = tiles if grid_waves == 0 else min(tiles, grid_waves * SMS * (2048 // threads))
    args = (ptr(x), ptr(out), np.uint32(packs), np.uint32(C // 8), np.uint32(R), ptr(s), ptr(b))
    return lambda: fn((grid,), (threads,), args)


FLAT = [(128, 1, 0, 0), (128, 1, 0, 1), (256, 1, 0, 0), (128, 2, 0, 0), (128, 4, 0, 0), (256, 2, 0, 0),
        (128, 1, 32, 0), (256, 4, 8, 0), (512, 1, 0, 0), (1024, 1, 0, 0), (128, 2, 0, 1)]  # (threads, u, waves, div)


def kept_part(rounds):
    """x.permute(0, 2, 1) * s + b in x's memory order, as PyTorch lays it out: eager, Inductor, jitune's default
    (the rows kernel) and streaming variants over memory offsets."""
    x, s, b = nonzero((64, 1024, 1024), torch.float16), nonzero((), torch.float16), nonzero((1024,), torch.float16)
    fn = lambda a, s_, b_: a.permute(0, 2, 1) * s_ + b_
    want = fn(x.float(), s.float(), b.float()).half()
    good = lambda got: got.stride() == want.stride() and torch.allclose(got.float(), want.float(), rtol=4e-3,
                                                                        atol=4e-3)
    compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    mine = lambda: jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b)
    assert good(compiled(x, s, b)) and good(mine())
    sides = {"eager": lambda: fn(x, s, b), "inductor": lambda: compiled(x, s, b), "jitune (rows kernel)": mine}
    out = torch.empty_like(x)
    for shape in FLAT:
        name = "flat threads={},u={},waves={},div={}".format(*shape)
        run = flat_variant(x, out, s, b, *shape)
        out.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        assert good(out.permute(0, 2, 1)), name
        sides[name] = run
    times = measure(sides, False, rounds)
    rows = []
    for k, us in sorted(times.items(), key=lambda kv: kv[1]):
        rows.append({"case": "kept", "side": k, "us": us, "gbs": 4 * x.numel() / us / 1e3})
        print(f"kept   {k:50s} {us:8.2f} us {rows[-1]['gbs']:7.1f} GB/s", flush=True)
    return rows


def inductor_launches(fn, args):
    """Kernel name, grid, block, registers and shared memory of every kernel one call of fn runs (profiler trace)."""
    from torch.profiler import ProfilerActivity, profile
    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    out = []
    for e in events:
        if e.get("cat") == "kernel":
            a = e.get("args", {})
            out.append({"name": e["name"], "grid": a.get("grid"), "block": a.get("block"),
                        "registers": a.get("registers per thread"), "shared": a.get("shared memory"),
                        "dur_us": e.get("dur")})
    return out


def inductor_code(fn, args):
    from torch._inductor.utils import run_and_get_code
    _, codes = run_and_get_code(fn, *args)
    keep = []
    for code in codes:
        lines = code.splitlines()
        for i, line in enumerate(lines):
            if "@triton.jit" in line or "triton_heuristics" in line or "def triton_" in line:
                keep += lines[max(0, i - 1): i + 60]
                keep.append("...")
                break
    return "\n".join(keep)


SHAPES = {  # (tr, tc, threads, minb, pad, order, el); Inductor's launches: float16 32 x 64, 256 threads, float32
    # 64 x 64, 512 threads, consecutive blocks along R (order 1), loads evict_last
    2: [(64, 64, 128, 1, 2, 0, 0), (32, 64, 256, 1, 2, 1, 0), (32, 64, 256, 1, 2, 0, 0), (32, 64, 256, 1, 2, 1, 1),
        (32, 64, 256, 1, 2, 1, 2), (64, 64, 512, 1, 2, 1, 0), (64, 32, 256, 1, 2, 1, 0), (64, 64, 128, 1, 2, 1, 1),
        (32, 64, 128, 1, 2, 1, 0), (32, 64, 256, 1, 4, 1, 0)],
    4: [(32, 32, 128, 1, 1, 0, 0), (64, 64, 512, 1, 1, 1, 0), (64, 64, 512, 1, 1, 0, 0), (64, 64, 512, 1, 1, 1, 1),
        (64, 64, 512, 1, 1, 1, 2), (32, 64, 256, 1, 1, 1, 0), (32, 32, 128, 1, 1, 1, 0), (32, 32, 256, 1, 1, 1, 0),
        (64, 64, 256, 1, 1, 1, 0)],
}
SECTOR = {  # (v, cl, threads, uc, ur, order)
    2: [(8, 16, 128, 1, 1, 0), (8, 16, 128, 1, 1, 1), (8, 16, 64, 1, 1, 0), (8, 16, 256, 1, 1, 0),
        (8, 16, 512, 1, 1, 0), (8, 32, 128, 1, 1, 0), (8, 32, 256, 1, 1, 0), (8, 64, 128, 1, 1, 0),
        (8, 16, 128, 2, 1, 0), (8, 16, 128, 1, 2, 0), (8, 16, 256, 2, 1, 0), (4, 16, 128, 1, 1, 0),
        (4, 32, 128, 1, 1, 0), (8, 16, 128, 4, 1, 0)],
    4: [(4, 8, 128, 1, 1, 0), (4, 8, 128, 1, 1, 1), (4, 8, 64, 1, 1, 0), (4, 8, 256, 1, 1, 0),
        (4, 16, 128, 1, 1, 0), (4, 16, 256, 1, 1, 0), (4, 32, 256, 1, 1, 0), (4, 8, 128, 2, 1, 0),
        (4, 8, 128, 1, 2, 0), (2, 8, 128, 1, 1, 0), (2, 16, 128, 1, 1, 0), (4, 8, 512, 1, 1, 0)],
}


def part(kind, rounds, sector):
    dtype = torch.float32 if kind == "f32" else torch.float16
    x = nonzero((64, 1024, 1024), dtype)
    out = torch.empty_like(x)
    fuse = None
    if kind == "chain":
        s, b = nonzero((), dtype), nonzero((1024,), dtype)
        fuse = (s, b)
        fn = lambda a, s_, b_: a.permute(0, 2, 1) * s_ + b_
        args = (x, s, b)
        want = fn(x.float(), s.float(), b.float()).to(dtype)
        good = lambda got: torch.allclose(got.float(), want.float(), rtol=4e-3, atol=4e-3)
        mine = lambda: jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b, out=torch.empty_like(x))
    else:
        fn = lambda a: a.permute(0, 2, 1).contiguous()
        args = (x,)
        want = fn(x)
        good = lambda got: torch.equal(got, want)
        mine = lambda: jt.permute(x, (0, 2, 1))
    compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    assert good(compiled(*args)) and good(mine())
    if kind == "chain":  # Inductor keeps x's memory order (PyTorch's rule): its kernel does not transpose
        compiled = torch.compile(lambda a, s_, b_: (a.permute(0, 2, 1) * s_ + b_).contiguous(),
                                 mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
        assert compiled(*args).is_contiguous()
    print(f"== {kind}: Inductor's kernels", inductor_launches(compiled, args), flush=True)
    print(inductor_code(compiled, args), flush=True)
    sides = {"eager": lambda: fn(*args), "inductor": lambda: compiled(*args), "jitune": mine}
    if kind == "chain":
        keep = torch.compile(fn, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
        assert good(keep(*args))
        sides["inductor, x's memory order (no transpose)"] = lambda: keep(*args)
    for shape in SHAPES[x.element_size()]:
        add_checked(sides, "tr={},tc={},threads={},minb={},pad={},order={},el={}".format(*shape),
                    variant(x, out, *shape, fuse=fuse), out, good)
    for shape in SECTOR[x.element_size()] if sector else ():
        add_checked(sides, "sector v={},cl={},threads={},uc={},ur={},order={}".format(*shape),
                    sector_variant(x, out, *shape, fuse=fuse), out, good)
    times = measure(sides, False, rounds)
    nbytes = 2 * x.numel() * x.element_size()
    rows = []
    for k, us in sorted(times.items(), key=lambda kv: kv[1]):
        rows.append({"case": kind, "side": k, "us": us, "gbs": nbytes / us / 1e3})
        print(f"{kind:6s} {k:50s} {us:8.2f} us {rows[-1]['gbs']:7.1f} GB/s", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=("f16", "f32", "chain", "kept"), action="append")
    ap.add_argument("--sector", action="store_true", help="also the kernels without shared memory (slow: 1.4-6x)")
    args = ap.parse_args()
    rows = []
    for kind in args.only or ("f16", "f32", "chain", "kept"):
        rows += kept_part(args.rounds) if kind == "kept" else part(kind, args.rounds, args.sector)
        torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
