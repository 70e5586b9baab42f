"""Joins two `jitune cache export` files by problem: the stored (tuned-best) time of each side and their ratio.

usage: python3 bench/experiments/join_stores.py before.jsonl after.jsonl [--family NAME]
Used for old / new template comparisons on one GPU (both tunings in the same device call).
"""
import argparse
import json


def load(path, family):
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            key = r.get("key", r)
            if family and key.get("family") != family:
                continue
            out[key["signature"]] = (r["time_us"], r["config"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--family")
    a = ap.parse_args()
    before, after = load(a.before, a.family), load(a.after, a.family)
    print("| problem | before µs | after µs | before / after | after config |")
    print("|---|---|---|---|---|")
    for sig in sorted(set(before) | set(after)):
        b, n = before.get(sig), after.get(sig)
        ratio = f"{b[0] / n[0]:.3f}x" if b and n else "-"
        print(f"| `{sig}` | {b[0]:.2f} | " if b else f"| `{sig}` | - | ", end="")
        print(f"{n[0]:.2f} | {ratio} | {n[1]} |" if n else f"- | {ratio} | - |")


if __name__ == "__main__":
    main()
