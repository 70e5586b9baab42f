#!/usr/bin/env python3
"""Issue 21's one-element mul (0.92x Inductor): what sets the device time of a kernel that moves one element?
One process, the same timers as bench/python/vs_inductor.py (peer_torch.timed with the host hidden: 100 calls
between events after a spin; bench_ops.graph_us: 100 calls in a CUDA graph), over
  - jitune.torch.elementwise("z = x * y") and Inductor's x * y (max-autotune-no-cudagraphs) on one float32 element,
  - hand-written one-element kernels (CuPy RawModule, NVRTC) launched into the same stream: threads per block 32 to
    1024, the parameters as 4 scalars (Triton's size) or 7 (jitune's Params: 56 bytes), an empty kernel, and jitune's
    own body (a grid-stride vector loop that runs no iteration, then the scalar tail).
A measurement, not a test: it prints a table and writes JSON; nothing in the library depends on it.
usage: python3 bench/experiments/launch_floor.py --json out.json [--rounds 3]
"""
import argparse
import json
import os
import statistics
import sys

import cupy as cp
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import bench_ops  # noqa: E402
import peer_torch  # noqa: E402

import jitune.torch as jt  # noqa: E402

SOURCE = r"""
extern "C" __global__ void empty() {}
extern "C" __global__ void mul4(const float* a, const float* b, float* c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * b[i];
}
// jitune's Params' 56 bytes (out, two inputs, then n, head, packs, shifts), as seven parameters: CuPy passes each
// argument on its own, and the bytes a launch carries are the same.
#define PARAMS float* out, const float* in0, const float* in1, long long n, long long head, long long packs, \
               long long shifts
extern "C" __global__ void mul_params(PARAMS) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in0[i] * in1[i];
}
// jitune's body: the vector loop (no pack here), then the grid-stride scalar loop over what is left.
extern "C" __global__ void mul_body(PARAMS) {
  struct { float* out; const float* in[2]; long long n, head, packs, shifts; } p = {out, {in0, in1}, n, head, packs,
                                                                                     shifts};
  const int tile = blockDim.x;
  for (int base = blockIdx.x * tile + threadIdx.x; base < (int)p.packs; base += gridDim.x * tile) {
    const float4 x = reinterpret_cast<const float4*>(p.in[0] + p.head)[base];
    const float4 y = reinterpret_cast<const float4*>(p.in[1] + p.head)[base];
    reinterpret_cast<float4*>(p.out + p.head)[base] = make_float4(x.x * y.x, x.y * y.y, x.z * y.z, x.w * y.w);
  }
  const int tail = (int)(p.head + p.packs * 4);
  const int rest = (int)(p.head + (p.n - tail));
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rest; r += gridDim.x * blockDim.x) {
    const int e = r < p.head ? r : tail + (r - (int)p.head);
    p.out[e] = p.in[0][e] * p.in[1][e];
  }
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    mod = cp.RawModule(code=SOURCE, options=("-std=c++17",))
    x, y = (torch.rand(1, device="cuda") + 0.5 for _ in range(2))
    z = torch.empty(1, device="cuda")
    want = x * y
    p = [z.data_ptr(), x.data_ptr(), y.data_ptr()]

    def raw(name, block, params):
        kern = mod.get_function(name)

        def run():
            with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                kern((1,), (block,), params)
        return run

    i64 = lambda v: cp.int64(v)  # noqa: E731
    sides = {"jitune.torch.elementwise": lambda: jt.elementwise("z = x * y", x, y)}
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: a * b, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    assert torch.equal(compiled(x, y), want)
    assert torch.equal(jt.elementwise("z = x * y", x, y), want)
    sides["inductor"] = lambda: compiled(x, y)
    sides["empty, 32 threads"] = raw("empty", 32, ())
    for block in (32, 64, 128, 256, 1024):
        sides[f"mul4, {block} threads"] = raw("mul4", block, (cp.uint64(p[1]), cp.uint64(p[2]), cp.uint64(p[0]),
                                                              cp.int32(1)))
    params = (cp.uint64(p[0]), cp.uint64(p[1]), cp.uint64(p[2]), i64(1), i64(1), i64(0), i64(0))
    for block in (32, 128, 256):
        sides[f"mul_params, {block} threads"] = raw("mul_params", block, params)
        sides[f"mul_body, {block} threads"] = raw("mul_body", block, params)
    for name, run in sides.items():
        if name.startswith("mul"):
            z.fill_(0)
            run()
            torch.cuda.synchronize()
            assert torch.equal(z, want), name
    hidden = {k: [] for k in sides}
    graph = {k: [] for k in sides}
    for _ in range(args.rounds):
        for name, run in sides.items():
            hidden[name].append(peer_torch.timed(run, True, hide_host=True)[0])
            graph[name].append(bench_ops.graph_us(run, True))
    rows = []
    print(f"{'side':32s} {'hidden µs':>10s} {'graph µs':>10s}")
    for name in sides:
        row = {"side": name, "hidden_us": statistics.median(hidden[name]), "graph_us": statistics.median(graph[name])}
        rows.append(row)
        print(f"{name:32s} {row['hidden_us']:10.3f} {row['graph_us']:10.3f}", flush=True)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
