#!/usr/bin/env python3
"""Issue 17 item 5: does the guided search find the exhaustive winner while timing a quarter of the candidates?

Runs on the GPU (from the repository root, the build folder carried):
  1. `jitune --json --no-shipped tune --suite default` from an empty user cache: the exhaustive winners;
  2. `jitune --json tune --suite default --strategy guided` from another empty user cache, with only the shipped
     cache of *another* GPU model visible (JITUNE_SHIPPED_CACHES=SEEDS): its records are the transfer seeds;
  3. for every case whose two winners differ, `jitune tune <case> --configs A,B` in the exhaustive run's cache, which
     times both side by side with the default in one session (no cross-run drift);
and prints a markdown table: per case the candidates each strategy timed and the guided winner's time against the
exhaustive winner's (side by side where they differ, else 1.000).
usage: python3 bench/guided_eval.py --cli build/jitune --seeds build/shipped/nvidia-h200.sqlite --out DIR
       [--family F ...]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def environment(cache_dir, shipped):
    """The CLI's environment and global options: its own user cache, and only `shipped` (None: no shipped cache)."""
    env = dict(os.environ, JITUNE_CACHE_DIR=cache_dir)
    env.pop("JITUNE_SHIPPED_CACHES", None)
    if shipped:
        env["JITUNE_SHIPPED_CACHES"] = shipped
    return env, ["--json"] + ([] if shipped else ["--no-shipped"])


def tune_suite(cli, cache_dir, shipped, extra, families, log):
    env, common = environment(cache_dir, shipped)
    cmd = [cli] + common + ["tune", "--suite", "default"] + [a for f in families for a in ("--family", f)] + extra
    t0 = time.time()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(out.stderr)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout), time.time() - t0


def timed(result):
    return sum(c["status"] in ("ok", "cut") for c in result["candidates"])


def side_by_side(cli, cache_dir, shipped, r, a, b):
    """Times configs a and b of r's problem side by side (with the default); their µs, or None on failure."""
    env, common = environment(cache_dir, shipped)
    cmd = [cli] + common + ["tune", r["family"], "--signature", r["signature"], "--configs", f"{a};{b}", "--no-store"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    got = {c["config"]: c["time_us"] for c in json.loads(out.stdout)["results"][0]["candidates"] if c["status"] == "ok"}
    return (got.get(a), got.get(b)) if a in got and b in got else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--seeds", required=True, help="a shipped .sqlite of another GPU model (the transfer seeds)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", action="append", default=[])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    none = None  # the exhaustive run sees no shipped cache at all
    ex_dir, gd_dir = os.path.join(args.out, "exhaustive"), os.path.join(args.out, "guided")
    ex, ex_wall = tune_suite(args.cli, ex_dir, none, [], args.family, os.path.join(args.out, "exhaustive.log"))
    gd, gd_wall = tune_suite(args.cli, gd_dir, args.seeds, ["--strategy", "guided"], args.family,
                             os.path.join(args.out, "guided.log"))
    by_case = {r["case"]: r for r in ex["results"]}
    rows = []
    for g in gd["results"]:
        e = by_case[g["case"]]
        ratio, how = 1.0, "same winner"
        if g["best"] != e["best"]:
            pair = side_by_side(args.cli, ex_dir, none, e, e["best"], g["best"])
            if pair:
                ratio, how = pair[1] / pair[0], "side by side"
            else:
                ratio, how = g["best_us"] / e["best_us"], "separate runs"
        rows.append({"case": g["case"], "legal": e["legal"], "exhaustive_timed": timed(e), "guided_timed": timed(g),
                     "exhaustive_best": e["best"], "guided_best": g["best"], "ratio": ratio, "how": how})
    within = sum(r["ratio"] <= 1.02 for r in rows)
    frac = sum(r["guided_timed"] for r in rows) / max(1, sum(r["legal"] for r in rows))
    seeds = os.path.basename(args.seeds)
    lines = [f"Device: {ex['device']}. Exhaustive: {ex_wall:.1f} s wall; guided (seeds: {seeds}): {gd_wall:.1f} s wall."
             f" Guided winner within 2% of the exhaustive winner on {within} of {len(rows)} "
             f"cases; it timed {100 * frac:.1f}% of the legal candidates in all.", "",
             "| case | legal | timed (exhaustive) | timed (guided) | guided / exhaustive time | how compared |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['case']}` | {r['legal']} | {r['exhaustive_timed']} | {r['guided_timed']} | "
                     f"{r['ratio']:.3f} | {r['how']} |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "guided_eval.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "guided_eval.json"), "w") as f:
        json.dump({"device": ex["device"], "exhaustive_wall_s": ex_wall, "guided_wall_s": gd_wall, "rows": rows}, f,
                  indent=2)


if __name__ == "__main__":
    main()
