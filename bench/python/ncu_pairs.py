#!/usr/bin/env python3
"""jitune's and Inductor's kernels of each profiled case side by side, from one Nsight Compute run of
`vs_inductor.py --profile` (bench/device.sh metrics): ncu's CSV (`--csv --page raw --metrics ...`) and the script's
own lines in one file, as the device script writes them. vs_inductor.py prints "<case>: jitune correct ..." before
each case and launches torch.cuda._sleep's `spin_kernel` after each side, so the kernels between two spin kernels are
one side of one case, jitune's first. Counted metrics (bytes, sectors, requests, instructions, time) are summed over a
side's kernels; rates and launch figures are the largest kernel's (by time). Needs no GPU.
usage: python3 bench/python/ncu_pairs.py profile.txt [--markdown out.md]
"""
import argparse
import csv
import io
import re
import sys

# (metric, column title, how to show it); the device script asks ncu for exactly these.
METRICS = [
    ("gpu__time_duration.sum", "µs", lambda v: f"{v / 1000:.2f}"),
    ("dram__bytes_read.sum", "DRAM read MB", lambda v: f"{v / 1e6:.1f}"),
    ("dram__bytes_write.sum", "DRAM write MB", lambda v: f"{v / 1e6:.1f}"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM % peak", lambda v: f"{v:.1f}"),
    ("lts__t_sector_hit_rate.pct", "L2 hit %", lambda v: f"{v:.1f}"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "ld sectors/req", None),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", None, None),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "st sectors/req", None),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", None, None),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "smem conflicts", lambda v: f"{v:.0f}"),
    ("smsp__inst_executed.sum", "warp instr (M)", lambda v: f"{v / 1e6:.2f}"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy %", lambda v: f"{v:.1f}"),
    ("launch__registers_per_thread", "regs", lambda v: f"{v:.0f}"),
    ("launch__grid_size", "grid", lambda v: f"{v:.0f}"),
    ("launch__block_size", "block", lambda v: f"{v:.0f}"),
]
SUMMED = {"gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__inst_executed.sum",
          "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
          "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"}
MARKER = "spin_kernel"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def parse(text):
    """(case names in order, kernels in order as dicts: name and metric values)."""
    names, csv_lines = [], []
    for line in text.splitlines():
        if ": jitune correct" in line and not line.startswith('"'):
            names.append(line.split(": jitune correct")[0].strip())
        elif line.startswith('"'):
            csv_lines.append(line)
    rows = list(csv.reader(io.StringIO("\n".join(csv_lines))))
    if not rows:
        raise SystemExit("no ncu CSV rows in the file: was ncu run with --csv --page raw?")
    header = rows[0]
    kernels = []
    for row in rows[1:]:
        if len(row) != len(header) or not row[0].strip().isdigit():  # the units row
            continue
        rec = dict(zip(header, row))
        kernels.append({"name": rec.get("Kernel Name", "?"), **{m: number(rec.get(m, "nan")) for m, _, _ in METRICS}})
    return names, kernels


def sides(kernels):
    """Kernels split at each marker kernel: [[side kernels], ...]."""
    groups, current = [], []
    for k in kernels:
        if re.search(rf"\b{MARKER}\b", k["name"]):  # at::cuda::(anonymous namespace)::spin_kernel(long)
            groups.append(current)
            current = []
        else:
            current.append(k)
    return groups


def side_figures(group):
    if not group:
        return None
    main = max(group, key=lambda k: k["gpu__time_duration.sum"])
    out = {m: (sum(k[m] for k in group) if m in SUMMED else main[m]) for m, _, _ in METRICS}
    out["kernels"] = len(group)
    out["main"] = main["name"]
    return out


def cell(fig, metric, show):
    if fig is None:
        return "-"
    if metric.startswith("l1tex__t_sectors"):
        req = fig[metric.replace("sectors", "requests")]
        return f"{fig[metric] / req:.2f}" if req else "-"
    return show(fig[metric])


def table(names, groups):
    titles = [(m, t, s) for m, t, s in METRICS if t]
    out = ["| case | side | kernels | " + " | ".join(t for _, t, _ in titles) + " |",
           "|---|---|---|" + "---|" * len(titles)]
    notes = []
    if len(groups) != 2 * len(names):
        notes.append(f"warning: {len(names)} cases but {len(groups)} kernel groups; pairing in order anyway")
    for i, name in enumerate(names):
        for j, side in enumerate(("jitune", "Inductor")):
            k = 2 * i + j
            fig = side_figures(groups[k]) if k < len(groups) else None
            kernels = fig["kernels"] if fig else 0
            out.append(f"| `{name}` | {side} | {kernels} | "
                       + " | ".join(cell(fig, m, s) for m, _, s in titles) + " |")
            if fig:
                notes.append(f"{name} {side}: {fig['main'][:160]}")
    return "\n".join(out) + "\n\nLongest kernel of each side:\n" + "\n".join(f"- {n}" for n in notes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    with open(args.profile, errors="replace") as f:
        names, kernels = parse(f.read())
    text = table(names, sides(kernels))
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
