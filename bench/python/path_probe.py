#!/usr/bin/env python3
"""Where the host time of a jitune.torch call goes, layer by layer, on the GPU machine (small tensors, so every
figure is host time): a bare ctypes call into libjitune with fixed pointers, the same with the output pointer
alternating between two buffers (as a fresh torch output per call does), the op's CUDA kernel function, the op
through the dispatcher, the public wrapper, and PyTorch's own op. Median of 7 rounds of 20000 calls.
usage: python3 bench/python/path_probe.py
"""
import ctypes
import statistics
import time

import torch

import jitune
import jitune.torch as jt
from jitune import _lib, _runtime

N_CALLS = 20000
ROUNDS = 7


def per_call_us(fn):
    fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(N_CALLS):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) / N_CALLS * 1e6)
    return statistics.median(rounds)


def main():
    lib = _lib.lib
    dev = torch.cuda.current_device()
    rt = _runtime.runtime_for(dev)
    stream = torch._C._cuda_getCurrentRawStream(dev)
    m = torch.randn(64, 64, device="cuda")
    y1, y2 = torch.empty(64, device="cuda"), torch.empty(64, device="cuda")
    x, w = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    z1, z2 = torch.empty(4096, device="cuda"), torch.empty(4096, device="cuda")
    mp, p1, p2 = m.data_ptr(), y1.data_ptr(), y2.data_ptr()
    xp, wp, q1, q2 = x.data_ptr(), w.data_ptr(), z1.data_ptr(), z2.data_ptr()
    ins = (ctypes.c_void_p * 2)(xp, wp)
    flip = [0]

    def reduce_alternating():
        flip[0] ^= 1
        return lib.jitune_reduce_rows(rt, mp, p1 if flip[0] else p2, 64, 64, 0, 0, stream)

    def ew_alternating():
        flip[0] ^= 1
        return lib.jitune_elementwise(rt, b"z = x * y", ins, 2, q1 if flip[0] else q2, 4096, 0, stream)

    rows = [
        ("ctypes: jitune_status_name(0)", lambda: lib.jitune_status_name(0)),
        ("ctypes: jitune_reduce_rows, fixed pointers", lambda: lib.jitune_reduce_rows(rt, mp, p1, 64, 64, 0, 0,
                                                                                       stream)),
        ("ctypes: jitune_reduce_rows, output alternating", reduce_alternating),
        ("ctypes: jitune_reduce_rows, fixed, legacy stream", lambda: lib.jitune_reduce_rows(rt, mp, p1, 64, 64, 0,
                                                                                             0, None)),
        ("ctypes: jitune_elementwise, fixed pointers", lambda: lib.jitune_elementwise(rt, b"z = x * y", ins, 2, q1,
                                                                                       4096, 0, stream)),
        ("ctypes: jitune_elementwise, output alternating", ew_alternating),
        ("torch.empty(64)", lambda: torch.empty(64, device="cuda")),
        ("jt._reduce_cuda(m, 'sum')", lambda: jt._reduce_cuda(m, "sum")),
        ("torch.ops.jitune.reduce_rows(m, 'sum')", lambda: torch.ops.jitune.reduce_rows.default(m, "sum")),
        ("jt.sum_rows(m)", lambda: jt.sum_rows(m)),
        ("jitune.sum_rows(m, out=y1) (functional API)", lambda: jitune.sum_rows(m, out=y1)),
        ("torch.sum(m, -1)", lambda: torch.sum(m, -1)),
        ("jt._elementwise_cuda('z = x * y', [x, w])", lambda: jt._elementwise_cuda("z = x * y", [x, w])),
        ("jt.elementwise('z = x * y', x, w)", lambda: jt.elementwise("z = x * y", x, w)),
        ("torch.mul(x, w)", lambda: torch.mul(x, w)),
    ]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, jitune {jitune.__version__}")
    print("| layer | µs per call |\n|---|---|")
    with torch.no_grad():
        for name, fn in rows:
            print(f"| {name} | {per_call_us(fn):.2f} |", flush=True)


if __name__ == "__main__":
    main()
