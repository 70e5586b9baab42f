#!/usr/bin/env python3
"""jitune (its Python path) and torch.compile (Inductor, max-autotune-no-cudagraphs) side by side in one process,
on the same tensors' cases, timed by the same functions: the check of a cross-process comparison (jitune_bench in
C++ against bench/peer_torch.py --inductor), where each process has its own allocator, clocks and timing loop.

Per case (names of bench/peer and bench/python/bench_ops.py): both results are checked first (jitune against
PyTorch eager, Inductor against the case's check), then, in rounds that alternate the two,
  hidden_us: peer_torch.timed(hide_host=True): events around one call (large cases) or 100 calls (small), the GPU
             spinning first for twice the host time of a group, so neither side's host cost is inside;
  graph_us:  bench_ops.graph_us: calls captured into a CUDA graph (5 a graph for large cases, 100 for small ones),
             replays between events: device time with no host work at all.
The figure of each side is the median over rounds of each round's median.
With --profile: no timing; after both checks, one call of each side between cudaProfilerStart and Stop, each side
followed by torch.cuda._sleep's `spin_kernel` as a separator, for
  ncu --profile-from-start off --clock-control none ... python3 bench/python/vs_inductor.py --profile --case X
(bench/device.sh profile and metrics run that; TORCH_LOGS=output_code shows Inductor's kernel source;
bench/python/ncu_pairs.py pairs the two sides' kernels per case from ncu's CSV).
A --case text that starts with "=" must match a case's whole name (mul_float32_1 is a prefix of other cases).
usage: python3 bench/python/vs_inductor.py --json out.json [--family F ...] [--case TEXT ...] [--rounds 3] [--profile]
       python3 bench/python/vs_inductor.py --summarize a.json [b.json ...]  (a markdown table of earlier runs'
       rows, a later file's row replacing an earlier one of the same case; needs no GPU)
"""
import argparse
import importlib
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
if __name__ == "__main__" and sys.argv[1:2] == ["--summarize"]:  # reads JSON only: no torch, jitune or GPU
    torch = bench_ops = peer_torch = None
else:
    import torch  # noqa: E402
    import bench_ops  # noqa: E402
    import peer_torch  # noqa: E402


def peer_cases():
    out = {}
    for family in bench_ops.FAMILIES:
        for case in importlib.import_module(f"peer.{family}").cases():
            out[case["case"]] = case
    return out


def summarize(paths):
    """Markdown: per family, how many cases are at or above Inductor (host hidden), the lowest and median ratio;
    then every case."""
    rows, devices = {}, []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        devices.append(data["device"])
        for r in data["cases"]:
            rows[r["case"]] = r
    out = [f"Device(s): {', '.join(sorted(set(devices)))}; {len(rows)} cases.", "",
           "| family | cases | jitune >= 1.0x Inductor (hidden) | lowest | median | >= 1.0x in graphs |",
           "|---|---|---|---|---|---|"]
    families = []
    for r in rows.values():
        if r["family"] not in families:
            families.append(r["family"])
    for fam in families:
        rs = [r for r in rows.values() if r["family"] == fam]
        hidden = sorted(r["ratio_hidden"] for r in rs)
        out.append(f"| {fam} | {len(rs)} | {sum(h >= 1.0 for h in hidden)} | {hidden[0]:.3f}x | "
                   f"{statistics.median(hidden):.3f}x | {sum(r['ratio_graph'] >= 1.0 for r in rs)} |")
    out += ["", "| case | jitune µs | Inductor µs | vs Inductor (hidden) | jitune graph µs | Inductor graph µs | "
            "vs Inductor (graph) | both correct |", "|---|---|---|---|---|---|---|---|"]
    for r in rows.values():
        out.append(f"| `{r['case']}` | {r['jitune_hidden_us']:.2f} | {r['inductor_hidden_us']:.2f} | "
                   f"{r['ratio_hidden']:.3f}x | {r['jitune_graph_us']:.2f} | {r['inductor_graph_us']:.2f} | "
                   f"{r['ratio_graph']:.3f}x | {'yes' if r['jitune_correct'] and r['inductor_correct'] else 'NO'} |")
    behind = [r for r in rows.values() if r["ratio_hidden"] < 1.0]
    out += ["", f"At or above Inductor (hidden): {len(rows) - len(behind)} of {len(rows)}. Behind: "
            + ", ".join(f"`{r['case']}` {r['ratio_hidden']:.3f}x" for r in behind) + "."]
    return "\n".join(out)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--summarize":
        print(summarize(sys.argv[2:]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true", help="one call of each side for ncu, no timing")
    ap.add_argument("--case", action="append", help="only cases whose name contains this text")
    ap.add_argument("--family", action="append", choices=sorted(bench_ops.FAMILIES),
                    help="only these families, in this order (default: all)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not args.json and not args.profile:
        ap.error("--json is required unless --profile")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    peers = peer_cases()
    rows = []
    for family in args.family or list(bench_ops.FAMILIES):
        make = bench_ops.FAMILIES[family]
        for case in make():
            name = case["case"]
            if args.case and not any(name == text[1:] if text.startswith("=") else text in name
                                     for text in args.case):
                continue
            if name not in peers:
                continue
            small = case["bytes"] < 4 * l2
            want = case["reference"]()
            ok = bool(case["check"](case["run"](), want))
            _, _, (fn, fargs, fcheck) = peers[name]["setup"]()
            torch._dynamo.reset()
            compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
            iok = bool(fcheck(compiled(*fargs)))
            sides = {"jitune": case["run"], "inductor": lambda c=compiled, a=fargs: c(*a)}
            if args.profile:
                print(f"{name}: jitune correct {ok}, inductor correct {iok}; profiling one call of each", flush=True)
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStart()
                for run in sides.values():
                    run()
                    torch.cuda._sleep(1)  # spin_kernel: where this side's kernels end in ncu's list
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
                continue
            hidden = {k: [] for k in sides}
            graph = {k: [] for k in sides}
            for _ in range(args.rounds):
                for side, run in sides.items():
                    hidden[side].append(peer_torch.timed(run, small, hide_host=True)[0])
                    try:
                        peer_torch.reset_l2_persistence()
                        graph[side].append(bench_ops.graph_us(run, small))
                    except Exception as e:  # a side that cannot be captured keeps its event figure only
                        print(f"  {side}: no CUDA graph ({type(e).__name__}: {e})", flush=True)
            row = {"case": name, "family": family, "bytes": case["bytes"], "mode": "small" if small else "large",
                   "jitune_correct": ok, "inductor_correct": iok}
            for side in sides:
                row[f"{side}_hidden_us"] = statistics.median(hidden[side])
                row[f"{side}_graph_us"] = statistics.median(graph[side]) if graph[side] else float("nan")
            row["ratio_hidden"] = row["inductor_hidden_us"] / row["jitune_hidden_us"]
            row["ratio_graph"] = row["inductor_graph_us"] / row["jitune_graph_us"]
            rows.append(row)
            print(f"{name:45s} hidden: jitune {row['jitune_hidden_us']:9.2f} inductor {row['inductor_hidden_us']:9.2f}"
                  f" ({row['ratio_hidden']:.3f}x)  graph: jitune {row['jitune_graph_us']:9.2f} inductor "
                  f"{row['inductor_graph_us']:9.2f} ({row['ratio_graph']:.3f}x)"
                  + ("" if ok and iok else "  WRONG"), flush=True)
            del case, want, sides, compiled, fargs
            torch.cuda.empty_cache()
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cases": rows}, f,
                          indent=2)


if __name__ == "__main__":
    main()
