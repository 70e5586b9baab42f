#!/usr/bin/env python3
"""Tunes the default suite twice in separate processes and reports, per case, whether the same config won; where
not, both winners are re-timed side by side (one more process, interleaved rounds) and their gap is printed.
Usage: bench/stability.py --jitune build/jitune [--family F ...] [--first run1.json] --json out.json
--first takes the output of an earlier `jitune --json tune --suite default` (another process) as the first run."""
import argparse
import json
import subprocess
import sys


def suite(jitune, families):
    cmd = [jitune, "--json", "tune", "--suite", "default", "--no-store"]
    for f in families or []:
        cmd += ["--family", f]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jitune", default="build/jitune")
    ap.add_argument("--family", action="append")
    ap.add_argument("--json")
    ap.add_argument("--first", help="JSON of an earlier suite run to use as the first of the two")
    ap.add_argument("--second-json", help="also write the second run's full JSON here")
    args = ap.parse_args()
    first = json.load(open(args.first)) if args.first else suite(args.jitune, args.family)
    second = suite(args.jitune, args.family)
    if args.second_json:
        with open(args.second_json, "w") as f:
            json.dump(second, f)
    b = {r["case"]: r for r in second["results"]}
    rows = []
    print(f"{'case':40s} {'same':>5s} {'run 1 config':40s} {'run 2 config':40s} {'gap':>7s}")
    for r in first["results"]:
        s = b.get(r["case"])
        if not s:
            continue
        row = {"case": r["case"], "config_1": r["best"], "config_2": s["best"], "same": r["best"] == s["best"],
               "us_1": r["best_us"], "us_2": s["best_us"]}
        if not row["same"]:
            cmd = [args.jitune, "--json", "tune", r["family"], "--signature", r["signature"], "--no-store",
                   "--configs", f"{r['best']};{s['best']}"]
            res = subprocess.run(cmd, capture_output=True, text=True)
            timed = {t["config"]: t["us"] for t in json.loads(res.stdout)["results"][0]["retimed"]}
            a, c = timed[r["best"]], timed[s["best"]]
            row.update({"side_by_side_us_1": a, "side_by_side_us_2": c, "gap_pct": 100 * abs(a - c) / min(a, c)})
        rows.append(row)
        gap = f"{row['gap_pct']:6.2f}%" if "gap_pct" in row else "     -"
        print(f"{r['case']:40s} {'yes' if row['same'] else 'no':>5s} {r['best']:40s} {s['best']:40s} {gap}")
    worst = max([r.get("gap_pct", 0.0) for r in rows] or [0.0])
    same = sum(r["same"] for r in rows)
    print(f"{same}/{len(rows)} cases picked the same config twice; largest side-by-side gap between differing "
          f"winners {worst:.2f}%; suite wall {first['wall_s']:.1f}s and {second['wall_s']:.1f}s")
    if args.json:
        json.dump({"rows": rows, "same": same, "cases": len(rows), "worst_gap_pct": worst,
                   "wall_s": [first["wall_s"], second["wall_s"]]}, open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
