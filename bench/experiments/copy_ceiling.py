#!/usr/bin/env python3
"""Experiment (2026-11-22): cudaMemcpy (torch copy_) at the permute cases sizes, single and back to back."""
import torch, statistics
def timed(fn, per, groups):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10): fn()
    out = []
    for _ in range(groups):
        s.record()
        for _ in range(per): fn()
        e.record(); e.synchronize()
        out.append(s.elapsed_time(e) * 1000.0 / per)
    return statistics.median(out)
for nbytes, per, groups, label in [(1 << 30, 1, 20, "1GiB single"), (8192*8192*4, 1, 50, "8192^2 f32 single"),
                                   (128*128*9*64*4, 100, 20, "43210 f32 size b2b100"),
                                   (128*128*9*64*4, 1, 50, "43210 f32 size single")]:
    a = torch.rand(nbytes // 4, device="cuda"); b = torch.empty_like(a)
    us = timed(lambda: b.copy_(a), per, groups)
    print(f"{label:28s} {us:9.2f} us {2*nbytes/us/1e3:8.1f} GB/s")
