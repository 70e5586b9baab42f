#!/usr/bin/env python3
"""conv2d algorithms side by side on the GPU (issue 18): for each shape, jitune's exhaustive tune (every algorithm's
candidates, each verified against the CPU reference) and cuDNN (torch, benchmark mode, TF32 off) in the same call.
Prints per shape: the best of each algorithm (direct, implicit GEMM, tensor-core direct, Winograd), the untuned
default, cuDNN, TFLOP/s.

usage: python3 bench/experiments/conv_algos.py [--build build] [--only TEXT] [--out FILE.json]
Shapes: N,C,H,W,K,R,stride,pad,dtype[,layout].
"""
import argparse
import json
import re
import statistics
import subprocess
import sys

SHAPES = [
    (1, 64, 56, 56, 64, 3, 1, 0, "float16"),     # the suite's C64 row
    (1, 64, 56, 56, 64, 3, 1, 1, "float16"),     # ResNet-50 layer1, batch 1
    (32, 64, 56, 56, 64, 3, 1, 1, "float16"),    # ... batch 32
    (32, 128, 28, 28, 128, 3, 1, 1, "float16"),  # layer2
    (32, 256, 14, 14, 256, 3, 1, 1, "float16"),  # layer3
    (32, 512, 7, 7, 512, 3, 1, 1, "float16"),    # layer4
    (1, 256, 14, 14, 256, 3, 1, 1, "float16"),
    (32, 256, 56, 56, 64, 1, 1, 0, "float16"),   # 1x1 reduction
    (32, 128, 56, 56, 128, 3, 2, 1, "float16"),  # strided 3x3
    (1, 320, 64, 64, 320, 3, 1, 1, "float16"),   # UNet
    (1, 16, 512, 512, 16, 3, 1, 0, "float16"),   # the suite's C16 row
    (32, 64, 56, 56, 64, 3, 1, 1, "bfloat16"),
    (32, 64, 56, 56, 64, 3, 1, 1, "float16", "nhwc"),    # channels last
    (32, 256, 14, 14, 256, 3, 1, 1, "float16", "nhwc"),
    (32, 512, 7, 7, 512, 3, 1, 1, "float16", "nhwc"),
    (1, 320, 64, 64, 320, 3, 1, 1, "float16", "nhwc"),
    # float32 (no tensor cores): the direct kernel beside Winograd F(2x2, 3x3) and F(4x4, 3x3)
    (1, 64, 56, 56, 64, 3, 1, 0, "float32"),
    (1, 64, 56, 56, 64, 3, 1, 1, "float32"),
    (32, 64, 56, 56, 64, 3, 1, 1, "float32"),
    (32, 128, 28, 28, 128, 3, 1, 1, "float32"),
    (32, 256, 14, 14, 256, 3, 1, 1, "float32"),
    (32, 512, 7, 7, 512, 3, 1, 1, "float32"),
    (1, 256, 14, 14, 256, 3, 1, 1, "float32"),
    (1, 320, 64, 64, 320, 3, 1, 1, "float32"),
    (32, 64, 56, 56, 64, 3, 1, 1, "float32", "nhwc"),
    (1, 16, 512, 512, 16, 3, 1, 0, "float32"),
]
# conv2d's algo values: Winograd F(2x2), F(4x4) fused and F(4x4) as batched GEMMs are 3, 4 and 5.
ALGOS = {0: "direct", 1: "igemm", 2: "tcd", 3: "wino2", 4: "wino4", 5: "wino4_gemm", 6: "stream1x1"}


def name(s):
    n, c, h, w, k, r, st, pad, dt = s[:9]
    return (f"{dt} N{n}C{c}H{h}W{w}K{k}R{r}" + (f"S{st}" if st > 1 else "") + (f"P{pad}" if pad else "")
            + ("_nhwc" if s[9:] == ("nhwc",) else ""))


def flops(s):
    n, c, h, w, k, r, st, pad, dt = s[:9]
    p = (h + 2 * pad - r) // st + 1
    q = (w + 2 * pad - r) // st + 1
    return 2 * n * k * p * q * c * r * r


def tune(build, s):
    n, c, h, w, k, r, st, pad, dt = s[:9]
    cmd = [f"{build}/jitune", "--json", "tune", "conv2d", "--dtype", dt, "--n", str(n), "--c", str(c), "--h", str(h),
           "--w", str(w), "--k", str(k), "--r", str(r), "--stride", str(st), "--padding", str(pad), "--no-store",
           "--layout", s[9] if len(s) > 9 else "nchw"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    rep = json.loads(out.stdout)
    rep = rep["results"][0] if "results" in rep else rep
    best = {a: None for a in ALGOS}
    for cand in rep["candidates"]:
        if cand["status"] != "ok":
            continue
        algo = int(re.search(r"algo=(\d)", cand["config"]).group(1))
        if best[algo] is None or cand["time_us"] < best[algo][0]:
            best[algo] = (cand["time_us"], cand["config"])
    bad = [c for c in rep["candidates"] if c["status"] not in ("ok", "resources_exceeded", "pruned", "cut")]
    return {"best": (rep["best_us"], rep["best"]), "default": (rep["default_us"], rep["heuristic"]),
            **{ALGOS[a]: best[a] for a in ALGOS}, "wall_s": rep["wall_s"], "tried": rep["tried"],
            "statuses": sorted({c["status"] for c in rep["candidates"]}), "bad": bad[:3]}


def cudnn(s):
    import torch
    import torch.nn.functional as F
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    n, c, h, w, k, r, st, pad, dt = s[:9]
    dtype = getattr(torch, dt)
    x = (torch.rand(n, c, h, w, device="cuda") + 0.5).to(dtype)
    wt = (torch.rand(k, c, r, r, device="cuda") - 0.5).to(dtype)
    if s[9:] == ("nhwc",):
        x, wt = x.contiguous(memory_format=torch.channels_last), wt.contiguous(memory_format=torch.channels_last)
    run = lambda: F.conv2d(x, wt, stride=st, padding=pad)
    for _ in range(10):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(99):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", action="append")
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for s in SHAPES:
        if args.only and not any(o in name(s) for o in args.only):
            continue
        t = tune(args.build, s)
        cu = cudnn(s)
        if t is None:
            print(f"{name(s)}: tune failed; cuDNN {cu:.2f} us", flush=True)
            continue
        tf = lambda us: flops(s) / us / 1e6
        per = "  ".join(f"{a} {t[a][0]:8.2f}" for a in ALGOS.values() if t[a])
        print(f"{name(s):34s} {per}  default {t['default'][0]:9.2f}  cuDNN {cu:9.2f} us"
              f"  best/cuDNN {cu / t['best'][0]:.3f}x  {tf(t['best'][0]):.1f} TFLOP/s (cuDNN {tf(cu):.1f})"
              f"  tune {t['wall_s']:.1f}s/{t['tried']}", flush=True)
        print(f"    best {t['best'][1]}  wino {t['wino'][1] if t['wino'] else '-'}  statuses {t['statuses']}"
              + (f" BAD {t['bad']}" if t["bad"] else ""), flush=True)
        rows.append({"shape": name(s), "cudnn_us": cu, **t})
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
