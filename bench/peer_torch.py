#!/usr/bin/env python3
"""Times the public cases through PyTorch / cuDNN on the same GPU, with the protocol jitune_bench uses.

Large cases: one call between two CUDA events, 10 warm-ups, median of 50. Small cases (bytes < 4x L2): 100
back-to-back calls between two events divided by 100, median of 20 groups. Inputs are fresh random values, never
zero; each case's result is checked before it is timed. TF32 off (on only for cases marked "tf32"), cudnn.benchmark
on. Cases come from the modules in bench/peer/ (one per jitune family). Writes JSON for bench/compare.py.

With --inductor each case is also compiled with torch.compile(mode="max-autotune-no-cudagraphs", fullgraph=True,
dynamic=False) from its plain PyTorch expression (the case module's third setup value: function, inputs, check),
checked, and timed the same way with the host hidden (the GPU spins before each group for twice the time Python
takes to enqueue it: Dynamo's guards and Inductor's wrapper cost tens of µs a call, which would otherwise be timed
as an idle GPU): inductor_us beside us. The first call's wall time (tracing, autotuning, Triton compilation) is
reported apart as inductor_compile_s. --hide-host times the eager calls that way too. Dynamo is reset before each case, so no case is served by
another's graph or falls back to eager at a recompile limit.
"""
import argparse
import ctypes
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


_sleep_cycles_per_us = None


def _cycles_per_us():
    """torch.cuda._sleep's spin cycles per µs on this GPU, measured once with events."""
    global _sleep_cycles_per_us
    if _sleep_cycles_per_us is None:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        start.record()
        torch.cuda._sleep(10_000_000)
        stop.record()
        stop.synchronize()
        _sleep_cycles_per_us = 10_000_000 / (start.elapsed_time(stop) * 1000.0)
    return _sleep_cycles_per_us


_libcuda = None


def reset_l2_persistence():
    """Lines loaded with an evict_last policy (Inductor's hints, jitune's cache=1) stay ahead of others in L2 until
    reset, and speed up (or slow down) whatever is timed next: every measurement starts from normal lines, as
    jitune's tuner and C++ bench do (cuCtxResetPersistingL2Cache on the current context)."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    torch.cuda.synchronize()
    rc = _libcuda.cuCtxResetPersistingL2Cache()
    if rc != 0:
        raise RuntimeError(f"cuCtxResetPersistingL2Cache failed with CUresult {rc}")


def timed(fn, small, hide_host=False):
    """Median µs per call (see the module's docstring), from L2 lines of normal priority (reset_l2_persistence).
    hide_host: before each group the GPU spins (torch.cuda._sleep) for twice the host time one group takes to
    enqueue, so the events measure device time only, never a GPU waiting for Python (a compiled function's guards
    and wrapper cost tens of µs a call)."""
    reset_l2_persistence()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
        fn()
    samples = []
    groups, per = (20, 100) if small else (50, 1)
    spin = 0
    if hide_host:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        host_us = (time.perf_counter() - t0) * 1e6
        torch.cuda.synchronize()
        spin = int(max(2 * host_us, 50.0) * _cycles_per_us())
    for _ in range(groups):
        if spin:
            torch.cuda._sleep(spin)
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
    us, mode = timed(lambda: compiled(*args), small, hide_host=True)
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
    ap.add_argument("--hide-host", action="store_true", help="time the eager calls with the host hidden too")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copy = copy_gbs()
    rows = []
    # conv2d last: max-autotune benchmarks its conv templates per case, the longest compiles of the suite.
    modules = sorted((m.name for m in pkgutil.iter_modules(peer.__path__) if m.name != "common"),
                     key=lambda name: (name == "conv2d", name))
    for mod in modules:
        if args.family and mod not in args.family:
            continue
        for case in importlib.import_module(f"peer.{mod}").cases():
            if args.case and not any(text in case["case"] for text in args.case):
                continue
            # TF32 only where the case opts in (conv2d's "_tf32" cases), for its eager and Inductor runs alike.
            torch.backends.cudnn.allow_tf32 = bool(case.get("tf32"))
            torch.backends.cuda.matmul.allow_tf32 = bool(case.get("tf32"))
            run, check, pure = case["setup"]()
            run()
            torch.cuda.synchronize()
            ok = bool(check())
            us, mode = timed(run, case["bytes"] < 4 * l2, hide_host=args.hide_host)
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
            write_json(args, copy, rows)  # after every case: a run cut short keeps what it measured
    write_json(args, copy, rows)


def write_json(args, copy, rows):
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "copy_gbs": copy, "eager_host_hidden": args.hide_host,
           "cases": rows}
    with open(args.json + ".tmp", "w") as f:
        json.dump(out, f, indent=2)
    os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
