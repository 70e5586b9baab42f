#!/usr/bin/env python3
"""The `add2` custom op of the seed article (shared/seeds/001_*: "a PyTorch CUDA extension, step by step"), three
ways, timed the correct way:

1. jitune: one line, `jt.elementwise("c = a + b", a, b)`; the kernel is generated, compiled by NVRTC on first use
   and tuned for this GPU (the shipped cache, or `jitune.tune`);
2. PyTorch's own `torch.add(a, b)`;
3. the article's hand-written extension: its add2_kernel and launch_add2, built with
   torch.utils.cpp_extension.load_inline (nvcc, about a minute the first time; skip with --no-extension).

Timing: CUDA kernels run asynchronously, so a host clock around a call measures only the launch. Each op is warmed
up first (compiling, loading and caching happen there), and its result is checked against a + b. Then two figures,
each the median of many samples between two CUDA events on the current stream:
- "kernel us": the op captured 20 times in a CUDA graph, the graph replayed; no host work between the kernels,
  so this is the GPU's time per call;
- "eager us": 100 calls issued back to back from Python. When a kernel is shorter than the host's time to issue
  one call, this is the host's time per call (Python, the framework, the launch), not the kernel's.
Inputs are fresh random values (never zeros).

usage: python3 examples/pytorch/add2.py [--n 1048576] [--no-extension]
"""
import argparse
import statistics

import torch

import jitune.torch as jt

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAStream.h>
__global__ void add2_kernel(float* c, const float* a, const float* b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) c[i] = a[i] + b[i];
}
void launch_add2(float* c, const float* a, const float* b, int n) {
  dim3 grid((n + 1023) / 1024);
  dim3 block(1024);
  // The article launches on the legacy default stream; a PyTorch extension must use the current stream (streams,
  // CUDA graphs).
  add2_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(c, a, b, n);
}
"""
CPP_SOURCE = r"""
#include <torch/extension.h>
void launch_add2(float* c, const float* a, const float* b, int n);
void torch_launch_add2(torch::Tensor& c, const torch::Tensor& a, const torch::Tensor& b, int64_t n) {
  launch_add2(c.data_ptr<float>(), a.data_ptr<float>(), b.data_ptr<float>(), static_cast<int>(n));
}
"""


def _median_us_per_call(run, calls, samples):
    """Median over `samples` of the event time of `run()` divided by `calls`."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / calls)
    return statistics.median(times)


def eager_us(fn, calls=100, samples=30):
    """Per call, `calls` calls issued back to back: the host's time when it is longer than the kernel's."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()

    def run():
        for _ in range(calls):
            fn()

    return _median_us_per_call(run, calls, samples)


def kernel_us(fn, calls=20, samples=50):
    """Per call, `calls` calls captured in one CUDA graph and replayed: the GPU's time alone."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph wants
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    return _median_us_per_call(graph.replay, calls, samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--no-extension", action="store_true", help="skip building the hand-written extension")
    args = ap.parse_args()
    n = args.n
    a = torch.empty(n, device="cuda").uniform_(0.25, 4.0)
    b = torch.empty(n, device="cuda").uniform_(-4.0, -0.25)
    expected = a + b

    ops = {
        "jitune: jt.elementwise('c = a + b', a, b)": lambda: jt.elementwise("c = a + b", a, b),
        "torch.add(a, b)": lambda: torch.add(a, b),
    }
    if not args.no_extension:
        from torch.utils.cpp_extension import load_inline

        module = load_inline(name="add2", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                             functions=["torch_launch_add2"], verbose=False)
        c = torch.empty_like(a)

        def hand_written():
            module.torch_launch_add2(c, a, b, n)
            return c

        ops["hand-written extension (the article's add2_kernel)"] = hand_written

    print(f"{torch.cuda.get_device_name()}, n = {n} float32; GB/s counts 12 bytes per element")
    print(f"{'op':52s} {'kernel us':>10s} {'GB/s':>7s} {'eager us':>10s}")
    for name, fn in ops.items():
        torch.testing.assert_close(fn(), expected)  # correct first
        k, e = kernel_us(fn), eager_us(fn)
        print(f"{name:52s} {k:10.2f} {3 * 4 * n / (k * 1e3):7.1f} {e:10.2f}")

if __name__ == "__main__":
    main()
