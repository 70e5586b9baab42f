#!/usr/bin/env python3
"""Two or more builds (or template folders) timed on the same configs in one call, alternating per case.

Each side is a jitune executable and, optionally, a template folder (JITUNE_TEMPLATE_DIR: a kernel change tried
without a rebuild, or the templates of the build being compared). For every record of --family in --records whose
config contains each --match text, every side times that config with `jitune --json tune FAMILY --signature SIG
--configs CFG --no-store` (the tuner's verified median; it also times the side's heuristic default, which is
ignored here); sides alternate within a case and the whole list repeats --rounds times, so drift hits all sides
alike. `table` prints the fastest time of each side per case and its ratio to the base side (above 1: faster).
Unlike bench/builds.sh (whole builds through jitune_bench and the shipped cache, whose records a template change
makes stale), this times one fixed config per case, so a kernel variant is compared before anything is re-tuned.

usage: bench/experiments/side_by_side.py run --family conv2d --records cache/shipped/nvidia-h100-80gb-hbm3.jsonl \\
           --match repack=1 --side old=old/jitune:old/templates --side new=build/jitune --rounds 2 --out sbs.jsonl
       bench/experiments/side_by_side.py table sbs.jsonl [--base old]
"""
import argparse
import json
import os
import subprocess
import sys


def parse_side(text):
    name, _, rest = text.partition("=")
    if not name or not rest:
        raise argparse.ArgumentTypeError(f"--side {text!r} is not NAME=JITUNE[:TEMPLATE_DIR]")
    exe, _, templates = rest.partition(":")
    return name, exe, templates


def records(path, family, matches):
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("family") == family and all(m in r["config"] for m in matches):
                yield r["signature"], r["config"]


def time_one(exe, templates, family, signature, config):
    env = dict(os.environ)
    if templates:
        env["JITUNE_TEMPLATE_DIR"] = os.path.abspath(templates)
    p = subprocess.run([exe, "--json", "tune", family, "--signature", signature, "--configs", config, "--no-store"],
                       capture_output=True, text=True, env=env)
    try:
        out = json.loads(p.stdout[p.stdout.index("{"):])
    except ValueError:
        return {"status": "error", "reason": (p.stdout + p.stderr).strip()[-400:]}
    for c in out["results"][0]["candidates"]:
        if c["config"] == config:
            return {"status": c["status"], "time_us": c.get("time_us"), "reason": c.get("reason", "")}
    return {"status": "error", "reason": "the config was not timed"}


def run(args):
    cases = list(records(args.records, args.family, args.match))
    if not cases:
        sys.exit(f"no {args.family} record of {args.records} has a config containing {args.match}")
    with open(args.out, "a") as out:
        for rnd in range(args.rounds):
            for signature, config in cases:
                for name, exe, templates in args.side:
                    row = {"side": name, "signature": signature, "config": config, "round": rnd}
                    row.update(time_one(exe, templates, args.family, signature, config))
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    if row["status"] != "ok":
                        print(f"{name} {signature}: {row['status']} {row.get('reason', '')}", file=sys.stderr)


def table(args):
    best, sides = {}, []
    with open(args.file) as f:
        for line in f:
            r = json.loads(line)
            if r["side"] not in sides:
                sides.append(r["side"])
            if r["status"] == "ok":
                key = (r["signature"], r["side"])
                best[key] = min(best.get(key, float("inf")), r["time_us"])
    base = args.base or sides[0]
    print("| case | " + " | ".join(f"{s} µs" + ("" if s == base else f" (vs {base})") for s in sides) + " |")
    print("|---" * (len(sides) + 1) + "|")
    for signature in dict.fromkeys(k[0] for k in best):
        cells = []
        for s in sides:
            t = best.get((signature, s))
            b = best.get((signature, base))
            if t is None:
                cells.append("failed")
            elif s == base or b is None:
                cells.append(f"{t:.2f}")
            else:
                cells.append(f"{t:.2f} ({b / t:.3f}x)")
        print(f"| `{signature}` | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--family", required=True)
    r.add_argument("--records", required=True, help="a JSON-lines cache export (e.g. cache/shipped/*.jsonl)")
    r.add_argument("--match", action="append", default=[], help="only configs containing this text (repeatable)")
    r.add_argument("--side", action="append", type=parse_side, required=True, help="NAME=JITUNE[:TEMPLATE_DIR]")
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--out", required=True, help="JSON lines, appended")
    t = sub.add_parser("table")
    t.add_argument("file")
    t.add_argument("--base", help="the side the ratios divide (default: the first)")
    args = ap.parse_args()
    run(args) if args.what == "run" else table(args)


if __name__ == "__main__":
    main()
