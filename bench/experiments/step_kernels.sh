#!/usr/bin/env bash
# conv2d repack 3 by kernel, warm: Nsight Compute's duration of each of a call's kernels (the copy, the GEMM, the
# unstaging) with the caches and clocks left alone (L2-resident inputs at the boost clock, as the bench runs them;
# the launches serialised, so the programmatic overlap is not in these figures). The call is a record's config in a
# `jitune tune --configs CFG --no-store` process (the tuner's timing launches).
#   usage (GPU machine, build at ./build): bench/experiments/step_kernels.sh CASE [CASE ...]
#   CASE: a conv2d case of the default suite whose H200 record is repack 3 (cache/shipped/nvidia-h200.jsonl).
set -euo pipefail
for case in "$@"; do
  sig=$(build/jitune_bench --list --family conv2d | awk -F'\t' -v c="$case" '$2 == c { print $3 }')
  [ -n "$sig" ] || { echo "no conv2d case $case" >&2; exit 2; }
  cfg=$(python3 -c 'import json, sys
for line in open("cache/shipped/nvidia-h200.jsonl"):
    r = json.loads(line)
    if r["family"] == "conv2d" and r["signature"] == sys.argv[1]: print(r["config"])' "$sig")
  [ -n "$cfg" ] || { echo "no H200 record for $case" >&2; exit 2; }
  csv=$(mktemp)
  JITUNE_CACHE_DIR=$(mktemp -d) ncu --clock-control none --cache-control none --csv \
    --kernel-name regex:'conv2d_(repack_copy|igemm_after_copy|unstage)' --launch-skip 30 --launch-count 12 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    build/jitune --json tune conv2d --signature "$sig" --configs "$cfg" --no-store > "$csv" 2>/dev/null || true
  echo "== $case ($cfg)"
  python3 - "$csv" <<'PY'
import collections, csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
h = rows[head]
k, m, v = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
got = collections.defaultdict(list)
for r in rows[head + 1:]:
    if len(r) > v:
        got[(r[k].split("<")[0].replace("void ", "").split("::")[-1], r[m])].append(float(r[v].replace(",", "")))
for kernel in ("conv2d_repack_copy", "conv2d_igemm_after_copy", "conv2d_unstage"):
    t = got.get((kernel, "gpu__time_duration.sum"))
    if not t:
        continue
    print(f"  {kernel:24s} median {statistics.median(t) / 1000:7.2f} us of {len(t)}, grid "
          f"{got[(kernel, 'launch__grid_size')][0]:.0f}, {got[(kernel, 'launch__registers_per_thread')][0]:.0f} registers, "
          f"{statistics.median(got[(kernel, 'sm__warps_active.avg.pct_of_peak_sustained_active')]):.0f}% warps active")
PY
  rm -f "$csv"
done
