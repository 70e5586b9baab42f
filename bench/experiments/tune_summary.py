#!/usr/bin/env python3
"""One line per tune report of `jitune --json tune conv2d ...`: the winner and the fastest first timing of each
algorithm, with the verdict counts per algorithm.
usage: python3 bench/experiments/tune_summary.py CASE-NAME REPORT.json"""
import json
import sys

r = json.load(open(sys.argv[2]))["results"][0]
best, status = {}, {}
for c in r["candidates"]:
    algo = dict(kv.split("=") for kv in c["config"].split(","))["algo"]
    status.setdefault(algo, {}).setdefault(c["status"], 0)
    status[algo][c["status"]] += 1
    if c["status"] != "ok":
        continue
    if algo not in best or c["time_us"] < best[algo][0]:
        best[algo] = (c["time_us"], c["config"])
fmt = "  ".join(f"algo {a}: {t:.2f}" for a, (t, _) in sorted(best.items()))
print(f"{sys.argv[1]}: winner {r['best_us']:.2f} us ({r['best']}); fastest per algo (first timing) {fmt}; "
      f"verdicts {status}")
