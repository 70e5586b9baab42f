#!/usr/bin/env python3
"""Joins jitune_bench and peer_torch.py JSON by case name into the side-by-side table (text and Markdown). When the
peer JSON has Inductor times (peer_torch.py --inductor), the table gains "vs Inductor" (Inductor us / jitune us)
and the compile time, and the summary counts the cases at or above 1.0x each peer."""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jitune")
    ap.add_argument("peer")
    ap.add_argument("--markdown", help="also write the Markdown table here")
    args = ap.parse_args()
    j = json.load(open(args.jitune))
    p = json.load(open(args.peer))
    peer = {r["case"]: r for r in p["cases"]}
    has_inductor = any("inductor_us" in r for r in p["cases"])
    head = ("| case | jitune us | GB/s | % of copy | % of same-size copy | peer us | peer GB/s | peer % of copy "
            "| vs peer | config | level | default us | tuned vs default | mode |"
            + (" Inductor us | vs Inductor | Inductor compile s |" if has_inductor else ""))
    lines = [f"Device: {j['device']}; copy bandwidth measured in the same runs: jitune process "
             f"{j['copy_gbs']:.1f} GB/s, PyTorch process {p['copy_gbs']:.1f} GB/s ({p.get('torch', '')}).", "",
             "% of same-size copy: against cuMemcpyDtoDAsync of the case's bytes, timed the same way in the same "
             "process (what memory allows at that size and launch mode).", "", head,
             "|" + "---|" * (17 if has_inductor else 14)]
    print(f"{'case':40s} {'jitune us':>10s} {'%copy':>6s} {'%same':>6s} {'peer us':>10s} {'%copy':>6s} {'vs peer':>8s} "
          f"{'tuned/default':>13s}  config [level]")
    worst = None
    ahead = {"eager PyTorch / cuDNN": [0, 0], "Inductor": [0, 0]}  # [cases at or above 1.0x, cases compared]
    behind_inductor = []
    no_peer = []  # jitune cases the peer run has no figure for (a case module missing a row, or filtered out)
    for r in j["cases"]:
        q = peer.get(r["case"])
        if not q:
            no_peer.append(f"`{r['case']}`")
        ratio = q["us"] / r["us"] if q else float("nan")
        if q:
            ahead["eager PyTorch / cuDNN"][0] += ratio >= 1.0
            ahead["eager PyTorch / cuDNN"][1] += 1
        ind = q["inductor_us"] / r["us"] if q and "inductor_us" in q else float("nan")
        if q and "inductor_us" in q:
            ahead["Inductor"][0] += ind >= 1.0
            ahead["Inductor"][1] += 1
            if ind < 1.0:
                behind_inductor.append(f"`{r['case']}` {ind:.3f}x")
        vs_default = r["default_us"] / r["us"]
        worst = ratio if worst is None or ratio < worst else worst
        print(f"{r['case']:40s} {r['us']:10.2f} {r['pct_copy']:5.1f}% {r.get('pct_copy_same_size', float('nan')):5.1f}% "
              f"{q['us'] if q else float('nan'):10.2f} "
              f"{q['pct_copy'] if q else float('nan'):5.1f}% {ratio:7.3f}x {vs_default:12.3f}x  {r['config']} [{r['level']}]")
        gf = f" ({r['gflops']:.0f} GFLOP/s vs {q.get('gflops', float('nan')):.0f})" if "gflops" in r and q else ""
        same = f"{r['pct_copy_same_size']:.1f}%" if "pct_copy_same_size" in r else "n/a"
        lines.append(f"| `{r['case']}`{gf} | {r['us']:.2f} | {r['gbs']:.1f} | {r['pct_copy']:.1f}% | {same} | "
                     f"{q['us'] if q else float('nan'):.2f} | {q['gbs'] if q else float('nan'):.1f} | "
                     f"{q['pct_copy'] if q else float('nan'):.1f}% | {ratio:.3f}x | `{r['config']}` | {r['level']} | "
                     f"{r['default_us']:.2f} | {vs_default:.3f}x | {r['mode']} |"
                     + (f" {q['inductor_us']:.2f} | {ind:.3f}x{'' if q['inductor_correct'] else ' WRONG'} | "
                        f"{q['inductor_compile_s']:.1f} |" if q and "inductor_us" in q else
                        (" | | |" if has_inductor else "")))
    for peer_name, (n_ahead, n) in ahead.items():
        if n:
            summary = f"jitune at or above 1.0x {peer_name} on {n_ahead} of {n} cases"
            print(summary)
            lines += ["", summary + "."]
    if no_peer:
        text = f"No peer figure for {len(no_peer)} case(s): " + ", ".join(no_peer)
        print(text)
        lines.append(text + ".")
    if behind_inductor:
        text = "Behind Inductor: " + ", ".join(behind_inductor)
        print(text)
        lines.append(text + ".")
    h = j.get("host_overhead")
    if isinstance(h, dict):  # older bench JSON: the elementwise probe only
        h = [dict(h, family="elementwise")]
    if h:
        lines += ["", "| family | raw launch us | op call us | overhead us |", "|---|---|---|---|"]
        for o in h:
            print(f"Warm call host time {o['family']:20s} raw launch {o['raw_launch_us']:.3f} us, op call "
                  f"{o['api_call_us']:.3f} us, overhead {o['overhead_us']:.3f} us per call")
            lines.append(f"| {o['family']} | {o['raw_launch_us']:.3f} | {o['api_call_us']:.3f} | "
                         f"{o['overhead_us']:.3f} |")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
