#!/usr/bin/env python3
"""The default suite through jitune's Python path (jitune.torch ops), timed like bench/peer_torch.py, and the
eager per-call host overhead of jitune.torch ops against PyTorch's own ops on the same small tensors.

Per case (the names of bench/peer/ and jitune_bench): the op's result is checked against PyTorch's first, then
  eager_us: timed as peer_torch.py times PyTorch (events; one call per sample for large cases, 100 back-to-back
            calls per sample for cases under 4x the L2), so the Python host path is inside the figure;
  graph_us: the same calls captured once into a CUDA graph (100 calls for small cases, 5 for large ones) and
            replayed between events: the device time of the kernels jitune launched, with no host work in between
            (what "device time" means for the Python path); graph1_us: large cases with one call a graph;
  level:    how the call's configuration was chosen (jitune.torch.explain-like lookup: "exact" = the same tuned
            record the C++ bench uses).
Host overhead: rounds of 5000 calls on small tensors, synchronised once per round, median of 15 rounds, for the
jitune.torch op, the PyTorch op that computes the same thing and (where the wheel has jitune._fast) the jitune.torch
op with its call made through ctypes, the rounds interleaved.
usage: python3 bench/python/bench_ops.py --json out.json [--family permute ...] [--overhead-only]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import peer_torch  # noqa: E402  (timed(): the one timing protocol of the Python benches)
from peer import conv2d as peer_conv, permute as peer_permute, reduce_rows as peer_reduce  # noqa: E402
from peer import elementwise as peer_elementwise, elementwise_view as peer_view  # noqa: E402
from peer import upsample_nearest2d as peer_upsample  # noqa: E402
from peer.common import nonzero  # noqa: E402

import jitune  # noqa: E402
import jitune.torch as jt  # noqa: E402


def _case(name, family, run, reference, check, nbytes):
    return {"case": name, "family": family, "run": run, "reference": reference, "check": check, "bytes": nbytes}


def elementwise_cases():
    for dtype in ("float32", "float16"):
        for n in (134217728, 1048576):
            x, y = nonzero(n, getattr(torch, dtype)), nonzero(n, getattr(torch, dtype))
            yield _case(f"mul_{dtype}_{n}", "elementwise", lambda x=x, y=y: jt.elementwise("z = x * y", x, y),
                        lambda x=x, y=y: x * y, torch.equal, 3 * n * x.element_size())
    for dtype in ("float32", "float16"):
        n = 134217728
        a, b, c = (nonzero(n, getattr(torch, dtype)) for _ in range(3))
        yield _case(f"fma_{dtype}_{n}", "elementwise", lambda a=a, b=b, c=c: jt.elementwise("out = a * b + c", a, b, c),
                    lambda a=a, b=b, c=c: torch.addcmul(c, a, b),
                    lambda got, want: torch.allclose(got.float(), want.float(), rtol=1e-2, atol=2e-2),
                    4 * n * a.element_size())
    # Misaligned views (issue 19) and one element: the names and element offsets (out, inputs...) of
    # bench/peer/elementwise.py; an offset output is written through jitune.elementwise(out=).
    for name, dtype, n, offsets in peer_elementwise.offset_cases():
        dt = getattr(torch, dtype)
        arity = len(offsets) - 1
        ins = [peer_elementwise.offset_view(n, dt, offsets[1 + a], nonzero) for a in range(arity)]
        res = peer_elementwise.offset_view(n, dt, offsets[0], lambda m, t: torch.empty(m, device="cuda", dtype=t))
        expr = "z = x * y" if arity == 2 else "out = a * b + c"
        run = ((lambda e=expr, i=ins, r=res: jitune.elementwise(e, *i, out=r)) if offsets[0] else
               (lambda e=expr, i=ins: jt.elementwise(e, *i)))
        if arity == 2:
            yield _case(name, "elementwise", run, lambda i=ins: i[0] * i[1], torch.equal, 3 * n * dt.itemsize)
        else:
            yield _case(name, "elementwise", run, lambda i=ins: torch.addcmul(i[2], i[0], i[1]),
                        lambda got, want: torch.allclose(got.float(), want.float(), rtol=1e-2, atol=2e-2),
                        4 * n * dt.itemsize)


def elementwise_view_cases():
    """The fused chains of bench/peer/elementwise_view.py through one jitune.torch elementwise call over the views
    (the contiguous chain with out= a new contiguous tensor, as .contiguous() allocates one)."""
    calls = {"view_permute_scale_bias_float16_64x1024x1024":
             ("y = x * s + b", lambda x, s, b: (x.permute(0, 2, 1), s, b)),
             "view_permute_scale_bias_contiguous_float16_64x1024x1024":
             ("y = x * s + b", lambda x, s, b: (x.permute(0, 2, 1), s, b), True),
             "view_bias_add_float16_8192x1024": ("y = x + b", lambda x, b: (x, b)),
             "view_slice_mul_float32_8192x1024": ("y = a * b", lambda a, b: (a[:, 1:], b)),
             "view_broadcast3_float16_4096x4096": ("y = x * r + c", lambda x, r, c: (x, r, c))}
    for peer in peer_view.cases():
        expr, views, *contiguous = calls[peer["case"]]
        _, _, (fn, args, good) = peer["setup"]()
        ins = views(*args)
        if contiguous:
            shape = torch.broadcast_shapes(*(t.shape for t in ins))
            run = lambda e=expr, i=ins, n=shape: jt.elementwise(e, *i, out=i[0].new_empty(n))
        else:
            run = lambda e=expr, i=ins: jt.elementwise(e, *i)
        yield _case(peer["case"], "elementwise_view", run, lambda fn=fn, a=args: fn(*a),
                    lambda got, want, good=good: good(got), peer["bytes"])


def permute_cases():
    for dtype in ("float32", "float16"):
        for shape, perm in peer_permute.SHAPES:
            x = nonzero(shape, getattr(torch, dtype))
            name = f"permute_{dtype}_{'x'.join(map(str, shape))}_{''.join(map(str, perm))}"
            yield _case(name, "permute", lambda x=x, p=perm: jt.permute(x, p),
                        lambda x=x, p=perm: x.permute(p).contiguous(), torch.equal, 2 * x.numel() * x.element_size())
    for dtype in ("float32", "float16"):  # identity: one device copy on both sides (jitune into a new tensor)
        x = nonzero((4096, 4096), getattr(torch, dtype))
        yield _case(f"permute_{dtype}_4096x4096_01_identity", "permute", lambda x=x: jt.permute(x, (0, 1)),
                    lambda x=x: x.clone(), torch.equal, 2 * x.numel() * x.element_size())


def _upsample_case(direction, dtype, shape, layout, factor=2.0, label="upsample2x", offset=0):
    n, c, h, w = shape
    oh, ow = int(h * factor), int(w * factor)
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    dt = getattr(torch, dtype)
    name = (f"{label}_{direction}_{dtype}_{'x'.join(map(str, shape))}{'_nhwc' if layout == 'nhwc' else ''}"
            + (f"_src+{offset}" if offset else ""))
    nbytes = n * c * (h * w + oh * ow) * dt.itemsize
    if direction == "fwd":
        x = (peer_upsample.shifted(shape, dt, layout, offset) if offset else
             nonzero(shape, dt).contiguous(memory_format=fmt))
        return _case(name, "upsample_nearest2d", lambda: jt.upsample_nearest2d(x, scale_factor=factor),
                     lambda: F.interpolate(x, scale_factor=factor, mode="nearest"), torch.equal, nbytes)
    g = nonzero((n, c, oh, ow), dt).contiguous(memory_format=fmt)
    return _case(name, "upsample_nearest2d",
                 lambda: jt.upsample_nearest2d_backward(g, [n, c, h, w], [oh, ow], factor, factor),
                 lambda: torch.ops.aten.upsample_nearest2d_backward(g.float(), [oh, ow], [n, c, h, w], factor,
                                                                    factor),
                 lambda got, want: torch.allclose(got.float(), want, rtol=1e-2 if dt != torch.float32 else 1e-6,
                                                  atol=1e-5), nbytes)


def upsample_cases():
    for layout in ("nchw", "nhwc"):
        for dtype in ("float32", "float16"):
            for shape in peer_upsample.SHAPES:
                for direction in ("fwd", "bwd"):
                    yield _upsample_case(direction, dtype, shape, layout)
    for direction in ("fwd", "bwd"):
        yield _upsample_case(direction, "float32", (8, 128, 64, 64), "nchw", 3.0, "upsample3x")
        yield _upsample_case(direction, "float16", (8, 128, 96, 96), "nhwc", 1.5, "upsample1p5x")
    for dtype, shape, layout, offset in peer_upsample.SHIFTED:  # a misaligned input (issue 19)
        yield _upsample_case("fwd", dtype, shape, layout, offset=offset)


def _index_add_case(dtype, count, rows, row_length):
    dt = getattr(torch, dtype)
    name = f"index_add_{dtype}_{count}" + (f"x{row_length}" if row_length > 1 else "") + f"_into_{rows}"
    shape, tshape = ((count,), (rows,)) if row_length == 1 else ((count, row_length), (rows, row_length))
    idx = torch.randperm(count, device="cuda") % rows
    src, tgt = nonzero(shape, dt), nonzero(tshape, dt)
    start = tgt.clone()
    # Checked once from a fresh copy (the timed calls keep adding into tgt, as the C++ and PyTorch benches do).
    return _case(name, "scatter_add", lambda: jt.index_add_(tgt, idx, src),
                 lambda: start.double().index_add_(0, idx, src.double()),
                 # k atomic additions in the dtype per destination: the classic bound of a k-term sum, in the
                 # dtype's unit roundoff u, plus the final rounding
                 lambda got, want, u=torch.finfo(dt).eps / 2, k=-(-count // rows) + 1: bool(
                     ((got.double() - want).abs()
                      <= k * u * start.double().abs().index_add(0, idx, src.double().abs()) + u * want.abs()).all()),
                 count * (row_length * dt.itemsize + 8) + rows * row_length * dt.itemsize, )


def scatter_add_cases():
    n = 1 << 24
    for dtype in ("float32", "float16", "bfloat16"):
        yield _index_add_case(dtype, n, 65536, 1)
    for dtype in ("float16", "float32"):
        for per in (1, 2, 4, 16, 64):
            yield _index_add_case(dtype, n, n // per, 1)
    for per in (1, 4, 64):
        yield _index_add_case("bfloat16", n, n // per, 1)
    yield _index_add_case("float16", n // 64, 16384, 64)
    yield _index_add_case("float16", n // 256, 16384, 256)
    for dtype in ("float16", "bfloat16"):
        x, y = nonzero(n, getattr(torch, dtype)), nonzero(n, getattr(torch, dtype))
        yield _case(f"dot_{dtype}_{n}", "scatter_add", lambda x=x, y=y: jt.dot(x, y),
                    lambda x=x, y=y: torch.dot(x.double(), y.double()),
                    # the result is rounded to the dtype itself: half its epsilon on top of the summation error
                    lambda got, want, eps=torch.finfo(getattr(torch, dtype)).eps:
                        bool(abs(got.double() - want) <= (1e-3 + eps / 2) * abs(want) + 1.0),
                    2 * n * x.element_size() + x.element_size())


def conv2d_cases():
    rows = [(dtype, row) for dtype in ("float32", "float16") for row in peer_conv.ROWS]
    rows += [("float16", row) for row in peer_conv.NETWORK_ROWS]
    rows = [(dtype, row, False) for dtype, row in rows]
    rows += [("float16", row, True) for row in peer_conv.CHANNELS_LAST_ROWS]
    for dtype, (n, c, h, w, k, r, st, pad), nhwc in rows:
        dt = getattr(torch, dtype)
        x, wt = nonzero((n, c, h, w), dt), nonzero((k, c, r, r), dt)
        if nhwc:
            x, wt = x.contiguous(memory_format=torch.channels_last), wt.contiguous(memory_format=torch.channels_last)
        tol = 1e-4 if dtype == "float32" else 2e-3
        p, q = (h + 2 * pad - r) // st + 1, (w + 2 * pad - r) // st + 1
        name = (f"conv_{dtype}_N{n}C{c}H{h}W{w}K{k}R{r}" + (f"S{st}" if st > 1 else "") + (f"P{pad}" if pad else "")
                + ("_nhwc" if nhwc else ""))
        yield _case(name, "conv2d", lambda x=x, wt=wt, st=st, pad=pad: jt.conv2d(x, wt, stride=st, padding=pad),
                    lambda x=x, wt=wt, st=st, pad=pad: F.conv2d(x.double(), wt.double(), stride=st, padding=pad),
                    lambda got, want, tol=tol, c=c, r=r: torch.allclose(got.double(), want, rtol=tol,
                                                                        atol=tol * c * r * r),
                    (n * c * h * w + k * c * r * r + n * k * p * q) * dt.itemsize)
    # Fused epilogues: one jitune call against PyTorch's chain (the peer's cases, the same tensors).
    fused = {peer_conv.fused_name("float16", row, nhwc, suffix): residual
             for row, nhwc, suffix, residual in peer_conv.FUSED_ROWS}
    for peer in peer_conv.cases():
        if peer["case"] not in fused:
            continue
        _, _, (fn, args, good) = peer["setup"]()
        (_, _, _, _, _, _, st, pad) = next(row for row, nhwc, suffix, residual in peer_conv.FUSED_ROWS
                                          if peer_conv.fused_name("float16", row, nhwc, suffix) == peer["case"])
        epilogue = "y = max(acc + r, 0.0f)" if fused[peer["case"]] else "y = max(acc, 0.0f)"
        yield _case(peer["case"], "conv2d",
                    lambda a=args, e=epilogue, st=st, pad=pad: jt.conv2d(a[0], a[1], a[2], stride=st, padding=pad,
                                                                        epilogue=e,
                                                                        residual=a[3] if len(a) > 3 else None),
                    lambda fn=fn, a=args: fn(*a), lambda got, want, good=good: good(got), peer["bytes"])


def reduce_rows_cases():
    for op, dtype, rows, cols, offset in [c + (0,) for c in peer_reduce.CASES] + list(peer_reduce.VIEWS):
        dt = getattr(torch, dtype)
        x = nonzero((rows * cols + offset,), dt)[offset:].view(rows, cols)
        fn = jt.sum_rows if op == "sum" else jt.amax_rows
        if op == "sum":
            want = lambda x=x: x.double().sum(-1)
            check = lambda got, want, dtype=dtype, cols=cols: torch.allclose(
                got.double(), want, rtol=peer_reduce.RTOL[dtype], atol=cols * 2.0 ** -20)
        else:
            want = lambda x=x: torch.amax(x, -1)
            check = torch.equal
        name = f"reduce_rows_{op}_{dtype}_{rows}x{cols}" + (f"_x+{offset}" if offset else "")
        yield _case(name, "reduce_rows", lambda x=x, fn=fn: fn(x), want, check, (rows * cols + rows) * dt.itemsize)


FAMILIES = {"elementwise": elementwise_cases, "elementwise_view": elementwise_view_cases, "permute": permute_cases,
            "upsample_nearest2d": upsample_cases,
            "scatter_add": scatter_add_cases, "conv2d": conv2d_cases, "reduce_rows": reduce_rows_cases}


def graph_us(fn, small, per=None):
    """Device time per call: `per` calls captured into one CUDA graph, replays timed between events. Large cases
    take 5 calls a graph: a replay of a one-call graph adds the graph's launch latency (about 2 µs on the H100) to
    one kernel, which the C++ bench's single call between events does not pay in the same way."""
    per, groups = (100, 20) if small else (per or 5, 50)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per):
            fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        graph.replay()
    samples = []
    for _ in range(groups):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / per)
    del graph
    return statistics.median(samples)


def run_suite(families, l2):
    rows = []
    for family in families:
        for case in FAMILIES[family]():
            want = case["reference"]()
            got = case["run"]()
            torch.cuda.synchronize()
            ok = bool(case["check"](got, want))
            small = case["bytes"] < 4 * l2
            eager, mode = peer_torch.timed(case["run"], small)
            device = graph_us(case["run"], small)
            row = {"case": case["case"], "family": family, "us": eager, "graph_us": device, "mode": mode,
                   "bytes": case["bytes"], "correct": ok}
            if not small:
                row["graph1_us"] = graph_us(case["run"], small, per=1)  # one call a graph, for comparison
            rows.append(row)
            print(f"{case['case']:45s} eager {eager:9.2f} us  graph {device:9.2f} us  {mode}"
                  + (f" (one call a graph {row['graph1_us']:.2f} us)" if not small else "")
                  + ("" if ok else "  WRONG"), flush=True)
            del case, want, got
            torch.cuda.empty_cache()
    return rows


def per_call_us(fns, calls=5000, rounds=15):
    """Host µs per call of each of `fns`, each the median of `rounds` rounds of `calls` back-to-back calls. The
    rounds alternate (one round of each fn in turn), so all see the same clock and background drift: one op timed
    after the other gave ratios that moved by a third between runs of the same code. An entry may be a pair
    (fn, path): path(True) is called before its round and path(False) after it (outside the timed loop)."""
    fns = [f if isinstance(f, tuple) else (f, None) for f in fns]
    for fn, path in fns:
        if path:
            path(True)
        fn()
        if path:
            path(False)
    torch.cuda.synchronize()
    samples = [[] for _ in fns]
    for _ in range(rounds):
        for (fn, path), out in zip(fns, samples):
            if path:
                path(True)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            out.append((time.perf_counter() - t0) / calls * 1e6)
            if path:
                path(False)
    return [statistics.median(s) for s in samples]


_FAST = jt._F


def _ctypes_path(on):
    """Sets jitune._fast aside (on=True) so jitune.torch calls libjitune through ctypes, or puts it back."""
    jt._F = None if on else _FAST


def overhead_pairs():
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    m = torch.randn(64, 64, device="cuda")
    img = torch.randn(1, 4, 8, 8, device="cuda")
    wt = torch.randn(4, 4, 3, 3, device="cuda")
    dst, src = torch.randn(64, 8, device="cuda"), torch.randn(128, 8, device="cuda")
    idx = torch.randint(0, 64, (128,), device="cuda")
    return [
        ("elementwise z = x * y", lambda: jt.elementwise("z = x * y", x, y), "torch.mul(x, y)",
         lambda: torch.mul(x, y)),
        ("permute 64x64 (1, 0)", lambda: jt.permute(m, (1, 0)), "m.permute(1, 0).contiguous()",
         lambda: m.permute(1, 0).contiguous()),
        ("upsample_nearest2d 2x", lambda: jt.upsample_nearest2d(img, scale_factor=2), "F.interpolate(2x)",
         lambda: F.interpolate(img, scale_factor=2, mode="nearest")),
        ("index_add_ 128 rows", lambda: jt.index_add_(dst, idx, src), "dst.index_add_(0, idx, src)",
         lambda: dst.index_add_(0, idx, src)),
        ("dot 4096", lambda: jt.dot(x, y), "torch.dot(x, y)", lambda: torch.dot(x, y)),
        ("conv2d 1x4x8x8, 3x3", lambda: jt.conv2d(img, wt), "F.conv2d", lambda: F.conv2d(img, wt)),
        ("sum_rows 64x64", lambda: jt.sum_rows(m), "torch.sum(m, -1)", lambda: torch.sum(m, -1)),
    ]


def host_overhead():
    rows = []
    with torch.no_grad():
        for ours_name, ours, peer_name, peer in overhead_pairs():
            fns = [ours, peer] + ([(ours, _ctypes_path)] if _FAST is not None else [])
            a, b, *c = per_call_us(fns)
            row = {"op": ours_name, "jitune_us": a, "peer": peer_name, "peer_us": b, "ratio": a / b}
            if c:
                row["jitune_ctypes_us"] = c[0]
            rows.append(row)
            print(f"host overhead {ours_name:28s} {a:7.2f} us   {peer_name:30s} {b:7.2f} us   {a / b:5.2f}x"
                  + (f"   (ctypes only {c[0]:6.2f} us, {c[0] / b:4.2f}x)" if c else ""), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    ap.add_argument("--overhead-only", action="store_true")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "jitune": jitune.__version__}
    out["host_overhead"] = host_overhead()
    if not args.overhead_only:
        out["cases"] = run_suite(args.family or list(FAMILIES), l2)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    bad = [r["case"] for r in out.get("cases", []) if not r["correct"]]
    if bad:
        print("WRONG:", ", ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
