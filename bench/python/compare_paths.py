#!/usr/bin/env python3
"""Joins the C++ bench (jitune_bench --json), the Python path (bench/python/bench_ops.py --json) and PyTorch
(bench/peer_torch.py --json) of one device run by case name: is the Python path's device time within 2% of the
C++ bench's, and how does it stand against PyTorch? Also the host-overhead table of bench_ops.py.
usage: python3 bench/python/compare_paths.py CPP.json PY.json TORCH.json [--markdown OUT.md]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cpp")
    ap.add_argument("python")
    ap.add_argument("torch")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    cpp = {r["case"]: r for r in json.load(open(args.cpp))["cases"]}
    py = json.load(open(args.python))
    peer = {r["case"]: r for r in json.load(open(args.torch))["cases"]}
    lines = [f"Device: {py['device']}, torch {py['torch']}, jitune {py['jitune']}.", "",
             "| case | C++ us | Python device us (graph) | Python / C++ | Python eager us | PyTorch us | "
             "Python eager vs PyTorch | mode |", "|---|---|---|---|---|---|---|---|"]
    within = total = 0
    for r in py.get("cases", []):
        c, t = cpp.get(r["case"]), peer.get(r["case"])
        if c is None:
            continue
        ratio = r["graph_us"] / c["us"]
        total += 1
        within += ratio <= 1.02
        vs_torch = t["us"] / r["us"] if t else float("nan")
        flag = "" if ratio <= 1.02 else " **over 2%**"
        lines.append(f"| `{r['case']}` | {c['us']:.2f} | {r['graph_us']:.2f} | {ratio:.3f}{flag} | {r['us']:.2f} | "
                     f"{t['us'] if t else float('nan'):.2f} | {vs_torch:.3f}x | {r['mode']} |"
                     + ("" if r["correct"] else " WRONG |"))
    lines += ["", f"{within} of {total} cases: Python device time within 2% of the C++ bench's.", ""]
    if py.get("host_overhead"):
        lines += ["| op (small tensors, eager, no grad) | jitune.torch us per call | PyTorch op | PyTorch us per "
                  "call | ratio |", "|---|---|---|---|---|"]
        for o in py["host_overhead"]:
            lines.append(f"| {o['op']} | {o['jitune_us']:.2f} | `{o['peer']}` | {o['peer_us']:.2f} | "
                         f"{o['ratio']:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
