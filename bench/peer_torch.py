#!/usr/bin/env python3
"""Times the public cases through PyTorch / cuDNN on the same GPU, with the protocol jitune_bench uses.

Large cases: one call between two CUDA events, 10 warm-ups, median of 50. Small cases (bytes < 4x L2): 100
back-to-back calls between two events divided by 100, median of 20 groups. Inputs are fresh random values, never
zero; each case's result is checked before it is timed. TF32 off, cudnn.benchmark on. Cases come from the modules
in bench/peer/ (one per jitune family). Writes JSON for bench/compare.py.

With --inductor each case is also compiled with torch.compile(mode="max-autotune-no-cudagraphs", fullgraph=True,
dynamic=False) from its plain PyTorch expression (the case module's third setup value: function, inputs, check),
checked, and timed the same way: inductor_us beside us. The first call's wall time (tracing, autotuning, Triton
compilation) is reported apart as inductor_compile_s. Dynamo is reset before each case, so no case is served by
another's graph or falls back to eager at a recompile limit.
"""
import argparse
import importlib
import json
import os
import pkgutil
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402


def timed(fn, small):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
        fn()
    samples = []
    groups, per = (20, 100) if small else (50, 1)
    for _ in range(groups):
        start.record()
        for _ in range(per):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / per)
    return statistics.median(samples), ("back_to_back_100" if small else "single")


def inductor(pure, small):
    """torch.compile of the case's plain expression: (us, mode, compile seconds, correct)."""
    fn, args, check = pure
    torch._dynamo.reset()
    compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    t0 = time.perf_counter()
    got = compiled(*args)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    ok = bool(check(got))
    del got
    us, mode = timed(lambda: compiled(*args), small)
    return us, mode, compile_s, ok


def copy_gbs():
    n = 1 << 28  # 1 GiB of float32
    a, b = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    a.fill_(1.5)
    us, _ = timed(lambda: b.copy_(a), small=False)
    return 2 * 4 * n / (us * 1e3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--family", action="append", help="only these families (module names in bench/peer)")
    ap.add_argument("--case", action="append", help="only cases whose name contains this text")
    ap.add_argument("--inductor", action="store_true",
                    help="also time torch.compile(mode='max-autotune-no-cudagraphs') of each case")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copy = copy_gbs()
    rows = []
    for mod in sorted(m.name for m in pkgutil.iter_modules(peer.__path__) if m.name != "common"):
        if args.family and mod not in args.family:
            continue
        for case in importlib.import_module(f"peer.{mod}").cases():
            if args.case and not any(text in case["case"] for text in args.case):
                continue
            run, check, pure = case["setup"]()
            run()
            torch.cuda.synchronize()
            ok = bool(check())
            us, mode = timed(run, case["bytes"] < 4 * l2)
            row = {"case": case["case"], "family": mod, "us": us, "gbs": case["bytes"] / (us * 1e3),
                   "pct_copy": 100 * case["bytes"] / (us * 1e3) / copy, "mode": mode, "bytes": case["bytes"],
                   "correct": ok, "op": case["op"]}
            if case.get("flops"):
                row["gflops"] = case["flops"] / (us * 1e3)
            if args.inductor:
                ius, _, compile_s, iok = inductor(pure, case["bytes"] < 4 * l2)
                row.update(inductor_us=ius, inductor_gbs=case["bytes"] / (ius * 1e3), inductor_compile_s=compile_s,
                           inductor_correct=iok)
            rows.append(row)
            print(f"{case['case']:40s} {us:9.2f} us {row['gbs']:8.1f} GB/s {row['pct_copy']:6.1f}% copy  {mode}"
                  f"{'' if ok else '  WRONG'}"
                  + (f"   inductor {row['inductor_us']:9.2f} us (compiled in {row['inductor_compile_s']:.1f} s)"
                     f"{'' if row['inductor_correct'] else ' WRONG'}" if args.inductor else ""), flush=True)
            del run, check, pure
            torch.cuda.empty_cache()
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "copy_gbs": copy, "cases": rows}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
