#!/usr/bin/env python3
"""Old build against new build, side by side: jitune_bench JSONs of each (several runs each, interleaved in one
device call) reduced to the fastest run per case, the ratio new / old per case, and whether each case still beats
the peer (PyTorch / cuDNN) run of the same call.

usage: compare_builds.py --old a.json [b.json ...] --new c.json [d.json ...] [--peer torch.json] [--limit 1.03]
       [--markdown out.md]
"""
import argparse
import json
import sys


def fastest(paths):
    best = {}
    for path in paths:
        for row in json.load(open(path))["cases"]:
            if row["case"] not in best or row["us"] < best[row["case"]]["us"]:
                best[row["case"]] = row
    return best


def overhead(paths):
    rows = {}
    for path in paths:
        h = json.load(open(path)).get("host_overhead") or []
        if isinstance(h, dict):
            h = [dict(h, family="elementwise")]
        for o in h:
            if o["family"] not in rows or o["overhead_us"] < rows[o["family"]]["overhead_us"]:
                rows[o["family"]] = o
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--peer")
    ap.add_argument("--limit", type=float, default=1.03, help="largest allowed new / old time")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    old, new = fastest(args.old), fastest(args.new)
    peer = {r["case"]: r for r in json.load(open(args.peer))["cases"]} if args.peer else {}
    lines = ["| case | old us | new us | new / old | peer us | new vs peer |", "|---|---|---|---|---|---|"]
    slower, lost, compared = [], [], 0
    for case, n in new.items():
        o = old.get(case)
        if not o:
            continue
        compared += 1
        ratio = n["us"] / o["us"]
        q = peer.get(case)
        vs = q["us"] / n["us"] if q else float("nan")
        if ratio > args.limit:
            slower.append(case)
        if q and q["us"] / o["us"] > 1 and vs <= 1:
            lost.append(case)
        lines.append(f"| `{case}` | {o['us']:.2f} | {n['us']:.2f} | {ratio:.3f} | "
                     f"{q['us'] if q else float('nan'):.2f} | {vs:.3f}x |")
    oh_old, oh_new = overhead(args.old), overhead(args.new)
    lines += ["", "| family | old overhead us | new overhead us | new op call us | raw launch us |", "|---|---|---|---|---|"]
    for fam, o in oh_new.items():
        before = oh_old.get(fam)
        lines.append(f"| {fam} | {before['overhead_us'] if before else float('nan'):.3f} | {o['overhead_us']:.3f} | "
                     f"{o['api_call_us']:.3f} | {o['raw_launch_us']:.3f} |")
    ratios = sorted(new[c]["us"] / old[c]["us"] for c in new if c in old)
    summary = (f"{compared} cases compared; new / old from {ratios[0]:.3f} to {ratios[-1]:.3f} "
               f"(median {ratios[len(ratios) // 2]:.3f}); over {args.limit}: {len(slower)} {slower}; "
               f"beat the peer before but not now: {len(lost)} {lost}")
    lines += ["", summary]
    print("\n".join(lines))
    if args.markdown:
        open(args.markdown, "w").write("\n".join(lines) + "\n")
    return 1 if slower or lost else 0


if __name__ == "__main__":
    sys.exit(main())
