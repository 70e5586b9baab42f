#!/usr/bin/env python3
"""Issue 21's float16 (0, 2, 1) transpose, 1.6% behind Inductor: does an XOR-swizzled shared-memory tile close it?
Nsight Compute (bench/RESULTS.md, 2026-11-27 ninth session) put 4.3 million shared-memory bank conflicts on jitune's
pair kernel (permute_tiled_pairs<8, 128, 2>: 32-bit words at tile[column][row pair] with rows padded to 65 words, 4
lanes a bank when stored, 2 when read, the reads 4 scalar loads) against Inductor's 86 thousand. This measures, in
one process, hand-written copies of that kernel (CuPy RawModule, NVRTC) with
  SWZ=0: the library's layout (padded rows, scalar reads), and
  SWZ=1: unpadded rows whose words sit at `row pair ^ f(column)`, f spreading a warp's 16 (tile 128) or 8 (tile 64)
         column groups over the banks: stores conflict-free, each thread's 4 output words one 16-byte read (the
         halves swapped back in registers where f moved them),
both persistent (a grid of resident blocks that prefetch their next tile into registers, as the library does) or one
tile a block, beside jitune.permute, eager PyTorch and Inductor (max-autotune-no-cudagraphs), host hidden, rounds that
alternate the sides. Every variant is checked against PyTorch's result first.
A measurement, not a test: it prints a table and writes JSON; nothing in the library depends on it.
usage: python3 bench/experiments/transpose_swizzle.py --json out.json [--rounds 3] [--shape 64,1024,1024]
"""
import argparse
import json
import os
import sys

import cupy as cp
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from peer.common import nonzero  # noqa: E402
from stream_variants import add_checked, measure, ptr  # noqa: E402

import jitune.torch as jt  # noqa: E402

# in [B][R][C] float16 -> out [B][C][R]; R and C multiples of K_T. A thread reads K_ROWS row pairs of 8 columns
# (16 bytes a row), packs each column's pair into a 32-bit word (two neighbouring outputs), and writes K_ROWS * 2
# output rows of 4 words (16 bytes). K_ONE 1: one tile a block; 0: blocks loop over tiles, prefetching the next.
SOURCE = r"""
#define LANES (K_T / 8)             // threads along a tile row (reads) or an output row (writes)
#define STEP (K_T / 2 / K_ROWS)     // row pairs (reads) / output rows (writes) one pass of the block covers
#define THREADS (LANES * STEP)
#define WORDS (K_T / 2)             // 32-bit words in a tile column (an output row of the tile)
#if K_SWZ
#define PITCH WORDS
#define SHIFT (LANES == 16 ? 1 : 2)  // log2 of the row pairs one warp stores at once (32 / LANES)
#else
#define PITCH (WORDS + 1)
#endif

// Where word w of tile column col lives in its row of shared memory.
__device__ __forceinline__ int swz(int col) {
#if K_SWZ
  return ((col >> 3) & (LANES - 1)) << SHIFT;
#else
  return 0;
#endif
}

__device__ __forceinline__ void locate(int t, int R, int C, long long& in_base, long long& out_base) {
  const int tiles_c = C / K_T, per_plane = (R / K_T) * tiles_c;
  const int b = t / per_plane, rest = t - b * per_plane;
  const int tr = rest / tiles_c, tc = rest - tr * tiles_c;
  in_base = (long long)b * R * C + (long long)tr * K_T * C + (long long)tc * K_T;   // in[b][tr*T][tc*T]
  out_base = (long long)b * R * C + (long long)tc * K_T * R + (long long)tr * K_T;  // out[b][tc*T][tr*T]
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
pairs(const unsigned short* __restrict__ in, unsigned short* __restrict__ out, int R, int C, int tiles) {
  __shared__ __align__(16) unsigned tile[K_T][PITCH];
  const int tx = threadIdx.x % LANES, ty = threadIdx.x / LANES;
  int t = blockIdx.x;
  if (t >= tiles) return;
  long long ib, ob;
  locate(t, R, C, ib, ob);
  uint4 lo[K_ROWS], hi[K_ROWS];
  #pragma unroll
  for (int k = 0; k < K_ROWS; ++k) {
    const long long at = ib + (long long)(2 * (ty + k * STEP)) * C + tx * 8;
    lo[k] = *reinterpret_cast<const uint4*>(in + at);
    hi[k] = *reinterpret_cast<const uint4*>(in + at + C);
  }
  while (true) {
    #pragma unroll
    for (int k = 0; k < K_ROWS; ++k) {
      const int rp = ty + k * STEP;
      const unsigned short* l = reinterpret_cast<const unsigned short*>(&lo[k]);
      const unsigned short* h = reinterpret_cast<const unsigned short*>(&hi[k]);
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = tx * 8 + j;
        tile[col][rp ^ swz(col)] = (unsigned)l[j] | ((unsigned)h[j] << 16);
      }
    }
    __syncthreads();
    const int next = K_ONE ? tiles : t + gridDim.x;
    const bool more = next < tiles;
    long long nib = ib, nob = ob;
    if (more) {
      locate(next, R, C, nib, nob);
      #pragma unroll
      for (int k = 0; k < K_ROWS; ++k) {
        const long long at = nib + (long long)(2 * (ty + k * STEP)) * C + tx * 8;
        lo[k] = *reinterpret_cast<const uint4*>(in + at);
        hi[k] = *reinterpret_cast<const uint4*>(in + at + C);
      }
    }
    #pragma unroll
    for (int m = 0; m < 2 * K_ROWS; ++m) {
      const int col = ty + m * STEP;
      uint4 w;
#if K_SWZ
      const int f = swz(col);
      w = *reinterpret_cast<const uint4*>(&tile[col][(tx * 4) ^ (f & ~3)]);
      if (f & 2) w = make_uint4(w.z, w.w, w.x, w.y);  // words 0,1 <-> 2,3 of the group
#else
      w = make_uint4(tile[col][tx * 4], tile[col][tx * 4 + 1], tile[col][tx * 4 + 2], tile[col][tx * 4 + 3]);
#endif
      *reinterpret_cast<uint4*>(out + ob + (long long)col * R + tx * 8) = w;
    }
    if (!more) break;
    __syncthreads();
    t = next;
    ib = nib;
    ob = nob;
  }
}
"""

_MODULES = {}
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def kernel(**defs):
    key = tuple(sorted(defs.items()))
    if key not in _MODULES:
        opts = tuple(f"-DK_{k}={v}" for k, v in sorted(defs.items())) + ("-std=c++17",)
        _MODULES[key] = cp.RawModule(code=SOURCE, options=opts).get_function("pairs")
    return _MODULES[key]


def variant(x, out, tile, rows, swz, one, per_sm):
    B, R, C = x.shape
    fn = kernel(T=tile, ROWS=rows, SWZ=swz, ONE=one)
    tiles = B * (R // tile) * (C // tile)
    threads = (tile // 8) * (tile // 2 // rows)
    grid = tiles if one else min(tiles, per_sm * SMS)
    args = (ptr(x), ptr(out), np.int32(R), np.int32(C), np.int32(tiles))

    def run():
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            fn((grid,), (threads,), args)
    return run


# (tile, row pairs a thread, swizzle, one tile a block, blocks an SM when persistent)
VARIANTS = [(128, 2, s, 0, 2) for s in (0, 1)] + [(128, 2, s, 1, 0) for s in (0, 1)] + \
           [(128, 1, s, 0, 2) for s in (0, 1)] + [(128, 4, s, 0, 4) for s in (0, 1)] + \
           [(64, 1, s, 0, 4) for s in (0, 1)] + [(64, 2, s, 0, 8) for s in (0, 1)] + [(64, 2, s, 1, 0) for s in (0, 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", default="64,1024,1024")
    args = ap.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    x = nonzero(shape, torch.float16)
    out = torch.empty_like(x)
    want = x.permute(0, 2, 1).contiguous()
    fn = lambda a: a.permute(0, 2, 1).contiguous()  # noqa: E731
    compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    assert torch.equal(compiled(x), want) and torch.equal(jt.permute(x, (0, 2, 1)), want)
    sides = {"eager": lambda: fn(x), "inductor": lambda: compiled(x), "jitune": lambda: jt.permute(x, (0, 2, 1))}
    for v in VARIANTS:
        tile, rows, swz, one, per_sm = v
        if shape[1] % tile or shape[2] % tile:
            continue
        name = f"tile={tile},rows={rows},{'swizzle' if swz else 'padded'},{'one tile' if one else f'{per_sm}/SM'}"
        add_checked(sides, name, variant(x, out, *v), out, lambda got: torch.equal(got, want))
    times = measure(sides, False, args.rounds)
    nbytes = 2 * x.numel() * x.element_size()
    rows = []
    for k, us in sorted(times.items(), key=lambda kv: kv[1]):
        rows.append({"side": k, "us": us, "gbs": nbytes / us / 1e3})
        print(f"{k:40s} {us:8.2f} us {rows[-1]['gbs']:7.1f} GB/s", flush=True)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "shape": shape, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
