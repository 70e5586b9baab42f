#!/usr/bin/env python3
"""Where a tuning session's time went by knob value: the fastest candidate per value of each named knob and the
overall top few, from `jitune --json tune ...` output (one file per problem).

usage: bench/experiments/tune_breakdown.py --knob stages --knob tile_k tune1.json [tune2.json ...]
"""
import argparse
import json


def config_dict(text):
    return dict(kv.split("=") for kv in text.split(",") if kv)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--knob", action="append", default=[], help="break the best time down by this knob's values")
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()
    for path in args.files:
        with open(path) as f:
            doc = json.load(f)
        for result in doc.get("results", [doc]):
            cands = [c for c in result["candidates"] if c["status"] == "ok" and c["time_us"] > 0]
            print(f"{result.get('name', path)}: {len(cands)} timed of {len(result['candidates'])}")
            if not cands:
                continue
            for knob in args.knob:
                best = {}
                for c in cands:
                    v = config_dict(c["config"]).get(knob)
                    if v is not None and (v not in best or c["time_us"] < best[v]["time_us"]):
                        best[v] = c
                for v in sorted(best, key=lambda x: int(x) if x.lstrip("-").isdigit() else x):
                    print(f"  {knob}={v}: {best[v]['time_us']:.2f} us  {best[v]['config']}")
            for c in sorted(cands, key=lambda c: c["time_us"])[: args.top]:
                print(f"  top {c['time_us']:.2f} us regs {c['registers']} {c['config']}")


if __name__ == "__main__":
    main()
