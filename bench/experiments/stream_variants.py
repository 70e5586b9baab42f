#!/usr/bin/env python3
"""Issue 21's last large memory-bound gaps, measured in one process: where is the ceiling of a streaming kernel on
this GPU, and what does a kernel need to reach it? Hand-written variants (CuPy RawModule, NVRTC) beside jitune's
Python path, eager PyTorch and Inductor (max-autotune-no-cudagraphs), all timed by bench/peer_torch.timed with the
host hidden, in rounds that alternate the sides.

  mul:  z = x * y over 2^27 float16 / float32 (the suite's mul cases): grid-stride against one tile per block
        (Triton's launch), block size, packs per thread, cache operators on loads and stores.
  dot:  sum(x * y) over 2^24 float16 (the suite's dot case): blocks per SM, loads in flight, contiguous chunks
        against a grid-stride sweep, the final sum in the last block against a second kernel.
  dot_prep: what zeroing the dot's block counter before each call costs (memset, stream write, none).

A measurement, not a test: it prints a table and writes JSON; nothing in the library depends on it.
usage: python3 bench/experiments/stream_variants.py --json out.json [--rounds 3] [--only mul|dot|dot_prep]
"""
import argparse
import json
import os
import statistics
import sys

import cupy as cp
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import peer_torch  # noqa: E402
from peer.common import nonzero  # noqa: E402

import jitune.torch as jt  # noqa: E402

SOURCE = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ uint4 ld(const uint4* p) {
#if K_LOAD == 0
  return *p;
#elif K_LOAD == 1
  return __ldcs(p);
#elif K_LOAD == 2
  return __ldg(p);
#else
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
#endif
}
__device__ __forceinline__ void st(uint4* p, uint4 v) {
#if K_STORE == 0
  *p = v;
#elif K_STORE == 1
  __stcs(p, v);
#else
  __stcg(p, v);
#endif
}
__device__ __forceinline__ unsigned mul2(unsigned a, unsigned b) {
#if K_F16
  float2 fa = __half22float2(*reinterpret_cast<__half2*>(&a)), fb = __half22float2(*reinterpret_cast<__half2*>(&b));
  __half2 r = __floats2half2_rn(fa.x * fb.x, fa.y * fb.y);
  return *reinterpret_cast<unsigned*>(&r);
#else
  float r = __uint_as_float(a) * __uint_as_float(b);
  return __float_as_uint(r);
#endif
}
extern "C" __global__ void __launch_bounds__(K_BLOCK) mul(const uint4* __restrict__ x, const uint4* __restrict__ y,
                                                        uint4* __restrict__ z, long long packs) {
  const long long step = (long long)gridDim.x * K_BLOCK * K_U;
  for (long long base = (long long)blockIdx.x * K_BLOCK * K_U + threadIdx.x; base < packs; base += step) {
    uint4 a[K_U], b[K_U];
#pragma unroll
    for (int u = 0; u < K_U; ++u) {
      const long long i = base + (long long)u * K_BLOCK;
      if (i < packs) { a[u] = ld(x + i); b[u] = ld(y + i); }
    }
#pragma unroll
    for (int u = 0; u < K_U; ++u) {
      const long long i = base + (long long)u * K_BLOCK;
      if (i < packs) {
        uint4 r;
        r.x = mul2(a[u].x, b[u].x); r.y = mul2(a[u].y, b[u].y); r.z = mul2(a[u].z, b[u].z); r.w = mul2(a[u].w, b[u].w);
        st(z + i, r);
      }
    }
  }
}
__device__ __forceinline__ float dot2(unsigned a, unsigned b, float s) {
  float2 fa = __half22float2(*reinterpret_cast<__half2*>(&a)), fb = __half22float2(*reinterpret_cast<__half2*>(&b));
  return fmaf(fa.y, fb.y, fmaf(fa.x, fb.x, s));
}
__device__ float block_sum(float v) {
  __shared__ float w[32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) w[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < K_BLOCK / 32 ? w[threadIdx.x] : 0.f;
  if (threadIdx.x < 32) for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// K_ORDER 0: grid-stride; 1: one contiguous chunk per block. K_LAST 1: the last block sums the partials.
extern "C" __global__ void __launch_bounds__(K_BLOCK) dot(const uint4* __restrict__ x, const uint4* __restrict__ y,
                                                        long long packs, float* partial, unsigned* counter,
                                                        __half* out) {
  float s = 0.f;
  long long i, end, step;
#if K_ORDER == 0
  i = (long long)blockIdx.x * K_BLOCK + threadIdx.x; end = packs; step = (long long)gridDim.x * K_BLOCK;
#else
  const long long chunk = (packs + gridDim.x - 1) / gridDim.x;
  i = blockIdx.x * chunk + threadIdx.x; end = min(packs, (blockIdx.x + 1) * chunk); step = K_BLOCK;
#endif
  for (; i < end; i += step * K_U) {
    uint4 a[K_U], b[K_U];
#pragma unroll
    for (int u = 0; u < K_U; ++u) if (i + u * step < end) { a[u] = ld(x + i + u * step); b[u] = ld(y + i + u * step); }
#pragma unroll
    for (int u = 0; u < K_U; ++u) if (i + u * step < end) {
      s = dot2(a[u].x, b[u].x, s); s = dot2(a[u].y, b[u].y, s); s = dot2(a[u].z, b[u].z, s); s = dot2(a[u].w, b[u].w, s);
    }
  }
  s = block_sum(s);
  __shared__ int last;
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = s;
#if K_LAST
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
#endif
  }
#if K_LAST
  __syncthreads();
  if (!last) return;
  __threadfence();
  float t = 0.f;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += K_BLOCK) t += __ldcg(partial + b);
  t = block_sum(t);
  if (threadIdx.x == 0) { out[0] = __float2half(t); *counter = 0; }
#endif
}
extern "C" __global__ void finish(const float* partial, int count, __half* out) {
  float t = 0.f;
  for (int b = threadIdx.x; b < count; b += K_BLOCK) t += partial[b];
  t = block_sum(t);
  if (threadIdx.x == 0) out[0] = __float2half(t);
}
"""

_MODULES = {}


def kernel(name, **defs):
    key = (name, tuple(sorted(defs.items())))
    if key not in _MODULES:
        opts = tuple(f"-DK_{k}={v}" for k, v in sorted(defs.items())) + ("-std=c++17",)
        _MODULES[key] = cp.RawModule(code=SOURCE, options=opts).get_function(name)
    return _MODULES[key]


def ptr(t):
    return np.uint64(t.data_ptr())


SMS = torch.cuda.get_device_properties(0).multi_processor_count


def mul_variant(x, y, z, block, u, load, store, waves):
    """waves 0: one tile per block (Triton's launch); else a grid-stride grid of waves x resident blocks."""
    f16 = x.dtype == torch.float16
    packs = x.numel() * x.element_size() // 16
    fn = kernel("mul", BLOCK=block, U=u, LOAD=load, STORE=store, F16=int(f16))
    tiles = -(-packs // (block * u))
    grid = tiles if waves == 0 else min(tiles, waves * SMS * (2048 // block))
    args = (ptr(x), ptr(y), ptr(z), np.int64(packs))
    return lambda: fn((grid,), (block,), args)


def dot_variant(x, y, out, block, u, per_sm, order, last, load):
    packs = x.numel() * 2 // 16
    grid = SMS * per_sm
    partial = torch.zeros(grid, device="cuda")
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    fn = kernel("dot", BLOCK=block, U=u, ORDER=order, LAST=last, LOAD=load, STORE=0, F16=1)
    args = (ptr(x), ptr(y), np.int64(packs), ptr(partial), ptr(counter), ptr(out))
    if last:
        return lambda: fn((grid,), (block,), args), (partial, counter)
    fin = kernel("finish", BLOCK=1024, U=1, LOAD=0, STORE=0, F16=1, ORDER=0, LAST=0)
    fargs = (ptr(partial), np.int32(grid), ptr(out))

    def run():
        fn((grid,), (block,), args)
        fin((1,), (1024,), fargs)
    return run, (partial, counter)


def add_checked(sides, name, run, out, good):
    """Runs a hand-written variant once into `out` (filled with NaN first), asserts good(out), and adds it to the
    sides to time."""
    out.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    assert good(out), name
    sides[name] = run


def measure(sides, small, rounds):
    got = {k: [] for k in sides}
    for _ in range(rounds):
        for k, fn in sides.items():
            got[k].append(peer_torch.timed(fn, small, hide_host=True)[0])
    return {k: statistics.median(v) for k, v in got.items()}


def mul_part(rounds):
    rows = []
    for dtype in (torch.float16, torch.float32):
        rows += mul_dtype(dtype, rounds)
        torch.cuda.empty_cache()
    return rows


def mul_dtype(dtype, rounds):
    rows = []
    n = 1 << 27
    x, y = nonzero(n, dtype), nonzero(n, dtype)
    z = torch.empty_like(x)
    want = x * y
    compiled = torch.compile(lambda a, b: a * b, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    assert torch.equal(compiled(x, y), want)
    assert torch.equal(jt.elementwise("z = x * y", x, y), want)
    sides = {"eager torch.mul(out=)": lambda: torch.mul(x, y, out=z), "inductor": lambda: compiled(x, y),
             "jitune": lambda: jt.elementwise("z = x * y", x, y)}
    for block, u, load, store, waves in ((256, 1, 0, 0, 32), (256, 1, 0, 0, 0), (128, 1, 0, 0, 0),
                                         (512, 1, 0, 0, 0), (1024, 1, 0, 0, 0), (128, 2, 0, 0, 0),
                                         (256, 4, 0, 0, 0), (128, 1, 0, 1, 0), (128, 1, 1, 0, 0),
                                         (128, 1, 1, 1, 0), (128, 1, 2, 0, 0), (128, 1, 3, 0, 0),
                                         (256, 1, 0, 1, 32), (256, 2, 0, 0, 4), (1024, 4, 0, 0, 1),
                                         (128, 1, 0, 2, 0)):
        name = f"block={block},u={u},load={load},store={store},waves={waves}"
        run = mul_variant(x, y, z, block, u, load, store, waves)
        z.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        assert torch.equal(z, want), name
        sides[name] = run
    times = measure(sides, False, rounds)
    for k, us in times.items():
        rows.append({"part": "mul", "dtype": str(dtype), "side": k, "us": us,
                     "gbs": 3 * n * x.element_size() / us / 1e3})
        print(f"mul {str(dtype):14s} {k:45s} {us:8.2f} us {rows[-1]['gbs']:7.1f} GB/s", flush=True)
    return rows


def dot_part(rounds):
    rows = []
    n = 1 << 24
    x, y = nonzero(n, torch.float16), nonzero(n, torch.float16)
    want = torch.dot(x.double(), y.double()).item()
    out = torch.zeros((), device="cuda", dtype=torch.float16)
    compiled = torch.compile(torch.dot, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    close = lambda v: abs(float(v) - want) <= 2e-3 * abs(want) + 1.0
    assert close(compiled(x, y)) and close(jt.dot(x, y))
    sides = {"eager torch.dot": lambda: torch.dot(x, y, out=out), "inductor": lambda: compiled(x, y),
             "jitune": lambda: jt.dot(x, y)}
    keep = []
    for block, u, per_sm, order, last, load in ((1024, 1, 2, 0, 1, 0), (1024, 2, 2, 0, 1, 0), (512, 2, 4, 0, 1, 0),
                                                (512, 4, 4, 0, 1, 0), (256, 4, 8, 0, 1, 0), (256, 8, 8, 0, 1, 0),
                                                (512, 4, 4, 1, 1, 0), (256, 4, 8, 1, 1, 0), (512, 4, 4, 0, 0, 0),
                                                (512, 4, 4, 0, 1, 1), (512, 4, 4, 0, 1, 3), (1024, 4, 2, 0, 1, 0),
                                                (128, 8, 16, 0, 1, 0), (512, 8, 4, 0, 1, 0)):
        name = f"block={block},u={u},per_sm={per_sm},order={order},last={last},load={load}"
        run, state = dot_variant(x, y, out, block, u, per_sm, order, last, load)
        keep.append(state)
        out.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        assert close(out), (name, float(out), want)
        sides[name] = run
    times = measure(sides, True, rounds)
    for k, us in times.items():
        rows.append({"part": "dot", "dtype": "torch.float16", "side": k, "us": us, "gbs": 4 * n / us / 1e3})
        print(f"dot float16 {k:50s} {us:8.2f} us {rows[-1]['gbs']:7.1f} GB/s", flush=True)
    return rows


def dot_prep_part(rounds):
    """What zeroing the dot's block counter before each call costs: the kernel alone (its last block leaves the
    counter at zero), a 4-byte memset before it (what jitune's stream workspace does), a stream write of the value
    (cuStreamWriteValue32: no kernel), and two kernels (partials, then a one-block sum: no counter at all)."""
    import ctypes
    libcuda = ctypes.CDLL("libcuda.so.1")
    write = libcuda.cuStreamWriteValue32_v2
    write.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint)
    rows = []
    n = 1 << 24
    x, y = nonzero(n, torch.float16), nonzero(n, torch.float16)
    want = torch.dot(x.double(), y.double()).item()
    out = torch.zeros((), device="cuda", dtype=torch.float16)
    close = lambda v: abs(float(v) - want) <= 2e-3 * abs(want) + 1.0
    compiled = torch.compile(torch.dot, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    assert close(compiled(x, y)) and close(jt.dot(x, y))
    alone, (_, counter) = dot_variant(x, y, out, 1024, 2, 2, 0, 1, 0)
    two, _ = dot_variant(x, y, out, 1024, 2, 2, 0, 0, 0)
    cptr = counter.data_ptr()

    def memset_then():
        cp.cuda.runtime.memsetAsync(cptr, 0, 4, 0)
        alone()

    def write_then():
        assert write(None, cptr, 0, 0) == 0
        alone()
    sides = {"inductor": lambda: compiled(x, y), "jitune": lambda: jt.dot(x, y), "kernel alone": alone,
             "memset 4 B + kernel": memset_then, "cuStreamWriteValue32 + kernel": write_then,
             "two kernels (partials, sum)": two}
    for name, run in sides.items():
        run()
        torch.cuda.synchronize()
        if name not in ("inductor", "jitune"):
            assert close(out), name
    times = measure(sides, True, rounds)
    for k, us in times.items():
        rows.append({"part": "dot_prep", "dtype": "torch.float16", "side": k, "us": us, "gbs": 4 * n / us / 1e3})
        print(f"dot prep float16 {k:40s} {us:8.2f} us {rows[-1]['gbs']:7.1f} GB/s", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=("mul", "dot", "dot_prep"))
    args = ap.parse_args()
    rows = []
    if args.only != "dot":
        rows += mul_part(args.rounds)
    if args.only in (None, "dot"):
        rows += dot_part(args.rounds)
    if args.only in (None, "dot_prep"):
        rows += dot_prep_part(args.rounds)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
