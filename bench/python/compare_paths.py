#!/usr/bin/env python3
"""Joins the C++ bench (jitune_bench --json), the Python path (bench/python/bench_ops.py --json) and PyTorch
(bench/peer_torch.py --json) of one device run by case name: is the Python path's device time within 2% of the
C++ bench's, and how does it stand against PyTorch? Also the host-overhead table of bench_ops.py.
With --cpp-again (a second jitune_bench run of the same build on the same device), each case also shows how far
the C++ bench moves between two of its own runs: a Python figure outside 2% of one C++ run but inside the C++
bench's own run-to-run spread is noise, not Python overhead (the kernels are the same: the Python path launches
the configuration the C++ bench launches, from the same cache record).
usage: python3 bench/python/compare_paths.py CPP.json PY.json TORCH.json [--cpp-again CPP2.json] [--markdown OUT.md]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cpp")
    ap.add_argument("python")
    ap.add_argument("torch")
    ap.add_argument("--cpp-again")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    cpp = {r["case"]: r for r in json.load(open(args.cpp))["cases"]}
    again = {r["case"]: r for r in json.load(open(args.cpp_again))["cases"]} if args.cpp_again else {}
    py = json.load(open(args.python))
    peer = {r["case"]: r for r in json.load(open(args.torch))["cases"]}
    lines = [f"Device: {py['device']}, torch {py['torch']}, jitune {py['jitune']}.", "",
             "| case | C++ us | Python device us (graph) | Python / C++ | Python eager us | PyTorch us | "
             "Python eager vs PyTorch | mode | C++ again / C++ |", "|---|---|---|---|---|---|---|---|---|"]
    within = total = explained = 0
    outside = []
    for r in py.get("cases", []):
        c, t = cpp.get(r["case"]), peer.get(r["case"])
        if c is None:
            continue
        ratio = r["graph_us"] / c["us"]
        total += 1
        within += ratio <= 1.02
        vs_torch = t["us"] / r["us"] if t else float("nan")
        flag = "" if ratio <= 1.02 else " **over 2%**"
        a = again.get(r["case"])
        spread = a["us"] / c["us"] if a else float("nan")
        if ratio > 1.02:
            # Inside the C++ bench's own spread: the Python figure is no further from C++ run 1 than C++ run 2 is
            # (or no slower than C++ run 2).
            noise = a is not None and (ratio <= max(spread, 1 / spread) or r["graph_us"] <= a["us"] * 1.02)
            explained += noise
            outside.append(f"`{r['case']}` {ratio:.3f}" + (f" (C++ vs itself {spread:.3f})" if a else ""))
        lines.append(f"| `{r['case']}` | {c['us']:.2f} | {r['graph_us']:.2f} | {ratio:.3f}{flag} | {r['us']:.2f} | "
                     f"{t['us'] if t else float('nan'):.2f} | {vs_torch:.3f}x | {r['mode']} | {spread:.3f} |"
                     + ("" if r["correct"] else " WRONG |"))
    lines += ["", f"{within} of {total} cases: Python device time within 2% of the C++ bench's."]
    if outside:
        lines.append("Outside 2%: " + ", ".join(outside) + ".")
    if again and outside:
        lines.append(f"Of those {total - within}, {explained} are within the C++ bench's own run-to-run spread "
                     "(or within 2% of its second run).")
    single = [r for r in py.get("cases", []) if "graph1_us" in r and r["case"] in cpp]
    if single:
        worst = max(single, key=lambda r: r["graph1_us"] / cpp[r["case"]]["us"])
        lines.append(f"Large cases use 5 calls a graph; with one call a graph (the graph's launch latency on one "
                     f"kernel) the largest Python / C++ ratio is {worst['graph1_us'] / cpp[worst['case']]['us']:.3f} "
                     f"(`{worst['case']}`).")
    lines.append("")
    if py.get("host_overhead"):
        lines += ["| op (small tensors, eager, no grad) | jitune.torch us per call | PyTorch op | PyTorch us per "
                  "call | ratio | jitune.torch through ctypes only |", "|---|---|---|---|---|---|"]
        for o in py["host_overhead"]:
            ct = o.get("jitune_ctypes_us")
            ct_text = f"{ct:.2f} us ({ct / o['peer_us']:.2f}x)" if ct else "-"
            lines.append(f"| {o['op']} | {o['jitune_us']:.2f} | `{o['peer']}` | {o['peer_us']:.2f} | "
                         f"{o['ratio']:.2f}x | {ct_text} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
