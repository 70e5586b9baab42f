#!/usr/bin/env python3
"""Where a repack 2 call's time goes (conv2d algo 1, templates/conv2d/igemm_repack.cuh), by switching parts off.

Writes copies of templates/ whose igemm_repack.cuh reads a flag at workspace byte 64 that block 0 sets after the first
grid barrier; on every launch after the first (the tuner verifies the first one, and its inputs stay the same, so the
workspace still holds the right copies) the copy skips a part:
  whole     nothing skipped (the template as it is)
  w-only    the copy of x skipped (only w copied)
  x-only    the copy of w skipped
  no-copy   both copies skipped
  no-copy-no-unstage  both copies and the unstaging of a staged y skipped (y is then not written: one config a process)
Only the config's own instantiation skips (a constexpr test of its tile parameters), so the default the tuner times
beside it runs whole and its launches leave the flag alone. Each (variant, config) is timed in a process of its own: `build/jitune --json tune conv2d --signature SIG --configs CFG
--no-store` with JITUNE_TEMPLATE_DIR at the copy and an empty user cache (the default is timed beside it).
    python3 bench/experiments/repack_parts.py --signature SIG --config CFG [--config CFG ...] [--variant NAME ...]
GPU machine, build at ./build. bench/RESULTS.md 2026-11-29 (twenty-second session) has the figures it gave.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = ("whole", "w-only", "x-only", "no-copy", "no-copy-no-unstage")


def replace_once(text, old, new):
    if text.count(old) != 1:
        sys.exit(f"repack_parts.py: igemm_repack.cuh changed; this anchor is no longer found once:\n{old}")
    return text.replace(old, new)


def variant_source(text, variant, config):
    """igemm_repack.cuh with `variant`'s parts skipped after the first launch of `config`'s instantiation (others, such
    as the default the tuner times beside it, run whole and leave the flag alone)."""
    if variant == "whole":
        return text
    c = dict(kv.split("=") for kv in config.split(","))
    target = " && ".join(f"{name} == {c[key]}" for name, key in (
        ("kTileM", "tile_m"), ("kTileN", "tile_n"), ("kTileK", "tile_k"), ("kWarpsM", "warps_m"), ("kWarpsN", "warps_n"),
        ("kMma", "mma"), ("kStages", "stages"), ("kSplitK", "split_k"), ("kMinBlocks", "min_blocks")))
    mode = {"w-only": 1, "x-only": 2}.get(variant, 3)
    text = replace_once(text, "int rs,\n                                            T* stage, int capacity) {",
                        "int rs,\n                                            T* stage, int capacity, int skip_mode) {")
    text = replace_once(
        text,
        "  const long long first = blockIdx.x, step = gridDim.x;\n"
        "  const long long mine = first < total ? (total - 1 - first) / step + 1 : 0;",
        "  const long long lo = skip_mode == 2 ? tw : 0, hi = skip_mode == 1 ? tw : total;\n"
        "  const long long first = lo + blockIdx.x, step = gridDim.x;\n"
        "  const long long mine = first < hi ? (hi - 1 - first) / step + 1 : 0;")
    text = replace_once(
        text,
        "  repack_ring<T, kC, kThreads, kRepackRing>(a.x, a.wt, xs, ws, a.n, hw, kK, kR * kS, smem, kCapacity);\n"
        "  grid_barrier(barrier, 1);\n",
        "  volatile unsigned* const parts_flag = reinterpret_cast<volatile unsigned*>(bytes + 64);\n"
        f"  constexpr bool parts_target = {target};\n"
        "  const bool parts_skip = parts_target && *parts_flag == 0x5EED1234u;\n"
        f"  if (!parts_skip || {mode} != 3)\n"
        "    repack_ring<T, kC, kThreads, kRepackRing>(a.x, a.wt, xs, ws, a.n, hw, kK, kR * kS, smem, kCapacity,\n"
        f"                                              parts_skip ? {mode} : 0);\n"
        "  grid_barrier(barrier, 1);\n"
        "  if (parts_target && blockIdx.x == 0 && threadIdx.x == 0) *parts_flag = 0x5EED1234u;\n")
    if variant == "no-copy-no-unstage":
        text = replace_once(text, "    unstage_y<T, Epi, kThreads>(",
                            "    if (!parts_skip) unstage_y<T, Epi, kThreads>(")
    return text


def run(template_dir, signature, config, jitune):
    env = dict(os.environ, JITUNE_TEMPLATE_DIR=template_dir, JITUNE_CACHE_DIR=tempfile.mkdtemp())
    out = subprocess.run([jitune, "--json", "tune", "conv2d", "--signature", signature, "--configs", config,
                          "--no-store"], env=env, capture_output=True, text=True, timeout=600)
    shutil.rmtree(env["JITUNE_CACHE_DIR"], ignore_errors=True)
    if out.returncode != 0:
        return f"failed: {out.stderr.strip()[-300:]}", None
    for c in json.loads(out.stdout)["results"][0]["candidates"]:
        if c["config"] == config:
            return c["status"], c.get("time_us")
    return "not timed", None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--signature", required=True, help="a conv2d problem signature (NCHW, repack 2 legal)")
    ap.add_argument("--config", action="append", required=True, help="a repack 2 config (repeatable)")
    ap.add_argument("--variant", action="append", choices=VARIANTS, help="default: all")
    ap.add_argument("--jitune", default=os.path.join(ROOT, "build", "jitune"))
    args = ap.parse_args()
    source = open(os.path.join(ROOT, "templates", "conv2d", "igemm_repack.cuh")).read()
    work = tempfile.mkdtemp()
    try:
        rows = []
        for variant in args.variant or VARIANTS:
            for i, config in enumerate(args.config):
                tdir = os.path.join(work, f"{variant}-{i}")
                shutil.copytree(os.path.join(ROOT, "templates"), tdir,
                                ignore=shutil.ignore_patterns("*.cpp", "*.hpp", "*.txt"))
                with open(os.path.join(tdir, "conv2d", "igemm_repack.cuh"), "w") as f:
                    f.write(variant_source(source, variant, config))
                status, us = run(tdir, args.signature, config, args.jitune)
                rows.append((i, variant, status, us))
                print(f"config {i} {variant:20s} {status:12s} {us if us is not None else float('nan'):8.2f} us",
                      flush=True)
        print("\n| config | " + " | ".join(args.variant or VARIANTS) + " |")
        print("|---|" + "---|" * len(args.variant or VARIANTS))
        for i in range(len(args.config)):
            cells = [f"{us:.2f}" if status == "ok" else status for j, v, status, us in rows if j == i]
            print(f"| {i} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
