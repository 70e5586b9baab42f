#!/usr/bin/env python3
"""Draws % of copy bandwidth per case for jitune and its peer as an SVG bar chart, from jitune_bench and
peer_torch.py JSON (the same files bench/compare.py reads). Pure Python: no plotting library needed."""
import argparse
import json
from xml.sax.saxutils import escape


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jitune")
    ap.add_argument("peer")
    ap.add_argument("--out", required=True, help="output .svg")
    args = ap.parse_args()
    j = json.load(open(args.jitune))
    p = json.load(open(args.peer))
    peer = {r["case"]: r for r in p["cases"]}
    rows = [(r["case"], r["pct_copy"], peer[r["case"]]["pct_copy"] if r["case"] in peer else None) for r in j["cases"]]
    bar, gap, label_w, plot_w = 9, 8, 330, 560
    top = 60
    height = top + len(rows) * (2 * bar + gap) + 50
    top_pct = max(110.0, max(max(a, b or 0) for _, a, b in rows) * 1.05)
    x = lambda pct: label_w + plot_w * pct / top_pct
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 40}" height="{height}" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(j["device"])}: % of device copy bandwidth '
           f'(copy {j["copy_gbs"]:.0f} GB/s, same run)</text>',
           '<rect x="10" y="32" width="12" height="10" fill="#1f77b4"/><text x="27" y="41">jitune (tuned)</text>',
           f'<rect x="130" y="32" width="12" height="10" fill="#ff7f0e"/><text x="147" y="41">peer: PyTorch / cuDNN '
           f'{escape(p.get("torch", ""))}</text>']
    for pct in range(0, int(top_pct) + 1, 10):
        out.append(f'<line x1="{x(pct):.1f}" y1="{top - 6}" x2="{x(pct):.1f}" y2="{height - 40}" '
                   f'stroke="{"#999" if pct == 100 else "#e5e5e5"}" stroke-width="1"/>')
        out.append(f'<text x="{x(pct):.1f}" y="{height - 26}" text-anchor="middle">{pct}</text>')
    y = top
    for case, a, b in rows:
        out.append(f'<text x="{label_w - 6}" y="{y + bar + 3}" text-anchor="end">{escape(case)}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{x(a) - label_w:.1f}" height="{bar}" fill="#1f77b4"/>')
        out.append(f'<text x="{x(a) + 3:.1f}" y="{y + bar - 1}" font-size="9">{a:.0f}%</text>')
        if b is not None:
            out.append(f'<rect x="{label_w}" y="{y + bar}" width="{x(b) - label_w:.1f}" height="{bar}" fill="#ff7f0e"/>')
            out.append(f'<text x="{x(b) + 3:.1f}" y="{y + 2 * bar - 1}" font-size="9">{b:.0f}%</text>')
        y += 2 * bar + gap
    out.append(f'<text x="{label_w + plot_w / 2}" y="{height - 8}" text-anchor="middle">% of copy bandwidth '
               '(bytes read once + written once; conv rows count bytes too)</text>')
    out.append('</svg>')
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
