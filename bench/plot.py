#!/usr/bin/env python3
"""SVG bar charts of a benchmark run. Pure Python: no plotting library needed.

  plot.py JITUNE.json PEER.json --out suite.svg
      % of copy bandwidth per case for jitune (jitune_bench JSON) and its peer (peer_torch.py JSON, the files
      bench/compare.py reads); where the peer JSON comes from `peer_torch.py --inductor`, a third bar per case for
      Inductor (torch.compile, max-autotune-no-cudagraphs) at the same copy bandwidth.
  plot.py --vs-inductor VSI.json [--vs-inductor REPEAT.json ...] --out vs_inductor.svg
      jitune's speed over Inductor's per case from bench/python/vs_inductor.py (one process, the same timer):
      Inductor's time / jitune's, host hidden, on a log axis with 1.0x marked; rows behind Inductor in red. A later
      file's cases replace the earlier ones of the same name (a repeat of some cases), and the chart says how many.
"""
import argparse
import json
import math
from xml.sax.saxutils import escape

BLUE, ORANGE, GREEN, RED = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"


def svg_start(width, height, title):
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="DejaVu Sans, Arial, sans-serif" font-size="11">',
            '<rect width="100%" height="100%" fill="white"/>',
            f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(title)}</text>']


def legend(entries, y=32):
    out, x = [], 10
    for color, text in entries:
        out.append(f'<rect x="{x}" y="{y}" width="12" height="10" fill="{color}"/>'
                   f'<text x="{x + 17}" y="{y + 9}">{escape(text)}</text>')
        x += 30 + 6.5 * len(text)
    return out


def copy_chart(j, p):
    """% of copy bandwidth: jitune, the peer, and Inductor where the peer JSON has it."""
    peer = {r["case"]: r for r in p["cases"]}
    copy_gbs = j["copy_gbs"]

    def inductor_pct(case):
        r = peer.get(case)
        if not r or not r.get("inductor_us") or not r.get("bytes"):
            return None
        return 100.0 * r["bytes"] / (r["inductor_us"] * 1e3) / copy_gbs

    rows = [(r["case"], [r["pct_copy"], peer[r["case"]]["pct_copy"] if r["case"] in peer else None,
                         inductor_pct(r["case"])]) for r in j["cases"]]
    series = 3 if any(v[2] is not None for _, v in rows) else 2
    bar, gap, label_w, plot_w, top = 9, 8, 330, 560, 60
    height = top + len(rows) * (series * bar + gap) + 50
    top_pct = max(110.0, max(v or 0 for _, vals in rows for v in vals) * 1.05)
    x = lambda pct: label_w + plot_w * pct / top_pct
    out = svg_start(label_w + plot_w + 40, height,
                    f'{j["device"]}: % of device copy bandwidth (copy {copy_gbs:.0f} GB/s, same run)')
    names = [(BLUE, "jitune (tuned)"), (ORANGE, f'peer: PyTorch / cuDNN {p.get("torch", "")}'.strip())]
    if series == 3:
        names.append((GREEN, "Inductor (torch.compile, max-autotune-no-cudagraphs)"))
    out += legend(names)
    for pct in range(0, int(top_pct) + 1, 10):
        out.append(f'<line x1="{x(pct):.1f}" y1="{top - 6}" x2="{x(pct):.1f}" y2="{height - 40}" '
                   f'stroke="{"#999" if pct == 100 else "#e5e5e5"}" stroke-width="1"/>')
        out.append(f'<text x="{x(pct):.1f}" y="{height - 26}" text-anchor="middle">{pct}</text>')
    y = top
    for case, vals in rows:
        out.append(f'<text x="{label_w - 6}" y="{y + bar + 3}" text-anchor="end">{escape(case)}</text>')
        for k, (value, color) in enumerate(zip(vals[:series], (BLUE, ORANGE, GREEN))):
            if value is None:
                continue
            out.append(f'<rect x="{label_w}" y="{y + k * bar}" width="{x(value) - label_w:.1f}" height="{bar}" '
                       f'fill="{color}"/>')
            out.append(f'<text x="{x(value) + 3:.1f}" y="{y + (k + 1) * bar - 1}" font-size="9">{value:.0f}%</text>')
        y += series * bar + gap
    out.append(f'<text x="{label_w + plot_w / 2}" y="{height - 8}" text-anchor="middle">% of copy bandwidth '
               '(bytes read once + written once; conv rows count bytes too)</text>')
    return out


def ratio_chart(runs):
    """Inductor's time over jitune's per case (host hidden), log axis; later runs' cases replace earlier ones."""
    v, cases, repeated = runs[0], {}, set()
    for k, run in enumerate(runs):
        if run.get("device") != v.get("device"):
            raise SystemExit(f"plot.py --vs-inductor: the files come from different devices ({v.get('device')!r}, "
                             f"{run.get('device')!r}); draw one device's runs")
        for r in run["cases"]:
            if k > 0 and r["case"] in cases:
                repeated.add(r["case"])
            cases[r["case"]] = r
    rows = [(r["case"], r["inductor_hidden_us"] / r["jitune_hidden_us"], r["jitune_correct"] and r["inductor_correct"])
            for r in cases.values() if r.get("jitune_hidden_us") and r.get("inductor_hidden_us")]
    if not rows:
        raise SystemExit("plot.py --vs-inductor: no case with both times in the file")
    bar, gap, label_w, plot_w, top = 10, 4, 400, 520, 76
    height = top + len(rows) * (bar + gap) + 50
    low = min(0.5, min(r for _, r, _ in rows) / 1.1)
    high = max(2.0, max(r for _, r, _ in rows) * 1.1)
    x = lambda ratio: label_w + plot_w * (math.log(ratio) - math.log(low)) / (math.log(high) - math.log(low))
    ahead = sum(1 for _, r, _ in rows if r >= 1.0)
    again = f"; {len(repeated)} cases from a repeat run" if repeated else ""
    out = svg_start(label_w + plot_w + 60, height,
                    f'{v["device"]}: jitune vs Inductor, {ahead} of {len(rows)} cases at or above 1.0x')
    out += legend([(BLUE, "jitune at or ahead of Inductor"), (RED, "behind Inductor")])
    how = f'torch {v.get("torch", "?")}, max-autotune-no-cudagraphs; one process, the same timer, host hidden{again}'
    out.append(f'<text x="10" y="60">{escape(how)}</text>')
    ticks = [t for t in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16) if low <= t <= high]
    for t in ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{top - 6}" x2="{x(t):.1f}" y2="{height - 40}" '
                   f'stroke="{"#333" if t == 1.0 else "#e5e5e5"}" stroke-width="1"/>')
        out.append(f'<text x="{x(t):.1f}" y="{height - 26}" text-anchor="middle">{t:g}x</text>')
    y = top
    one = x(1.0)
    for case, ratio, correct in rows:
        label = case + ("" if correct else " (WRONG)")
        out.append(f'<text x="{label_w - 6}" y="{y + bar - 1}" text-anchor="end">{escape(label)}</text>')
        left, right = sorted((one, x(ratio)))
        out.append(f'<rect x="{left:.1f}" y="{y}" width="{max(right - left, 1):.1f}" height="{bar}" '
                   f'fill="{BLUE if ratio >= 1.0 else RED}"/>')
        out.append(f'<text x="{max(right, one) + 3:.1f}" y="{y + bar - 1}" font-size="9">{ratio:.3f}x</text>')
        y += bar + gap
    out.append(f'<text x="{label_w + plot_w / 2}" y="{height - 8}" text-anchor="middle">Inductor µs / jitune µs '
               '(above 1.0x: jitune faster)</text>')
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jitune", nargs="?", help="jitune_bench JSON")
    ap.add_argument("peer", nargs="?", help="peer_torch.py JSON (with --inductor: a third bar)")
    ap.add_argument("--vs-inductor", metavar="JSON", action="append",
                    help="bench/python/vs_inductor.py JSON: the ratio chart (again: a repeat of some cases)")
    ap.add_argument("--out", required=True, help="output .svg")
    args = ap.parse_args()
    if args.vs_inductor:
        if args.jitune or args.peer:
            ap.error("--vs-inductor draws one file; give no bench JSON with it")
        runs = []
        for name in args.vs_inductor:
            with open(name) as f:
                runs.append(json.load(f))
        out = ratio_chart(runs)
    else:
        if not (args.jitune and args.peer):
            ap.error("give the jitune_bench JSON and the peer JSON, or --vs-inductor JSON")
        with open(args.jitune) as f, open(args.peer) as g:
            out = copy_chart(json.load(f), json.load(g))
    out.append('</svg>')
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
