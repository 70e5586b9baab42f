#!/usr/bin/env python3
"""conv2d algo 1's NCHW repacking side by side: repack 1, 2 and 3 with a shipped record's tiles, then repack 3 over a
grid of tiles (64 x 64 / 64 x 128 / 64 x 256 / 128 x 128 / 128 x 64, 4 or 6 stages, split 1 or 2), all timed in one
process per case: `build/jitune --json tune conv2d --signature SIG --configs 'C1;C2;...' --no-store` (the default
timed beside them) with an empty user cache. Configs the family refuses for the case are dropped one by one (the CLI
names the first it refuses) and listed with the reason.
    python3 bench/experiments/repack_compare.py [--shipped cache/shipped/nvidia-h200.jsonl] CASE [CASE ...]
CASE: a conv2d case name of the default suite (`build/jitune_bench --list --family conv2d`). A case whose record is
not algo 1 starts from wgmma tiles of 4 stages. GPU machine, build at ./build; bench/RESULTS.md 2026-11-29
(twenty-third session) has the figures it gave on the H200.
"""
import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TILES = [(64, 64, 1, 1), (64, 128, 1, 1), (64, 256, 1, 2), (128, 128, 2, 1), (128, 64, 2, 1)]


def configs_of(record_config, signature):
    """Named configs: the record's with repack 1, 2 and 3, then repack 3 over TILES x stages x split."""
    base = dict(kv.split("=") for kv in record_config.split(","))
    if base["algo"] != "1":
        base.update(algo="1", mma="1", stages="4", tile_k="32" if "tf32" in signature else "64", split_k="1",
                    min_blocks="1")
    named = {f"repack {r}, record's tiles": dict(base, repack=r) for r in ("1", "2", "3")}
    for (tm, tn, wm, wn), stages, split in itertools.product(TILES, ("4", "6"), ("1", "2")):
        named[f"repack 3, {tm} x {tn}, {stages} stages, split {split}"] = dict(
            base, repack="3", tile_m=str(tm), tile_n=str(tn), warps_m=str(wm), warps_n=str(wn), stages=stages,
            split_k=split)
    return {name: ",".join(f"{k}={v}" for k, v in sorted(c.items())) for name, c in named.items()}


def time_configs(jitune, signature, configs):
    """{config: candidate} of one tune process, and {config: why} for those the family refused."""
    refused = {}
    todo = list(dict.fromkeys(configs))
    cache = tempfile.mkdtemp()
    try:
        while todo:
            out = subprocess.run([jitune, "--json", "tune", "conv2d", "--signature", signature, "--configs",
                                  ";".join(todo), "--no-store"], env=dict(os.environ, JITUNE_CACHE_DIR=cache),
                                 capture_output=True, text=True, timeout=600)
            if out.returncode == 0:
                return {c["config"]: c for c in json.loads(out.stdout)["results"][0]["candidates"]}, refused
            hit = next((c for c in todo if f"config {c} cannot run" in out.stderr), None)
            if hit is None:
                sys.exit(f"repack_compare.py: jitune tune failed:\n{out.stderr[-2000:]}")
            refused[hit] = out.stderr.split("cannot run", 1)[1].split(": ", 1)[-1].strip()
            todo.remove(hit)
        return {}, refused
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+", help="conv2d case names of the default suite")
    ap.add_argument("--shipped", default=os.path.join(ROOT, "cache", "shipped", "nvidia-h200.jsonl"),
                    help="the shipped file whose records give the starting tiles")
    ap.add_argument("--jitune", default=os.path.join(ROOT, "build", "jitune"))
    args = ap.parse_args()
    records = {}
    with open(args.shipped) as f:
        for line in f:
            r = json.loads(line)
            if r.get("family") == "conv2d":
                records[r["signature"]] = r["config"]
    listed = subprocess.run([os.path.join(os.path.dirname(args.jitune), "jitune_bench"), "--list", "--family",
                             "conv2d"], capture_output=True, text=True, check=True).stdout
    signatures = {name: sig for _, name, sig in (line.split("\t") for line in listed.splitlines())}
    for case in args.cases:
        if case not in signatures or signatures[case] not in records:
            sys.exit(f"repack_compare.py: {case} is not a conv2d case with a record in {args.shipped}")
        named = configs_of(records[signatures[case]], signatures[case])
        timed, refused = time_configs(args.jitune, signatures[case], named.values())
        print(f"== {case}")
        for name, config in named.items():
            c = timed.get(config)
            if config in refused:
                print(f"  {name:42s} refused: {refused[config][:160]}")
            elif c is None:
                print(f"  {name:42s} not timed")
            elif c["status"] != "ok":
                print(f"  {name:42s} {c['status']}")
            else:
                print(f"  {name:42s} {c['time_us']:8.2f} us")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
