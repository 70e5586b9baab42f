#!/usr/bin/env bash
# Winograd F(4x4, 3x3) (conv2d algo 4) beside the shipped records and cuDNN: the default suite's float32 3x3
# stride-1 cases (TF32 ones left out) tuned exhaustively into an empty user cache (the shipped file present, its
# records untouched), then the C++ bench of the conv2d cases beside PyTorch / cuDNN (TF32 off).
#   usage (GPU machine, build at ./build): OUT=dir [TUNE_ONLY=1] bench/experiments/winograd_f4.sh [name-regex]
#   TUNE_ONLY=1 stops after the tunes and the export (no bench, no peer).
#   Writes $OUT/algos.txt (per case: the winner, the fastest of each algorithm), $OUT/tuned.jsonl (the new records),
#   $OUT/jitune.json, $OUT/torch.json, $OUT/table.md, and each case's tune report (every candidate's time and
#   verdict) as $OUT/tunes.tar.gz.
set -euo pipefail
out=${OUT:?set OUT to a folder}
filter=${1:-}
export JITUNE_CACHE_DIR=${JITUNE_CACHE_DIR:-$(mktemp -d)}
mkdir -p "$out" "$JITUNE_CACHE_DIR"
build/jitune_bench --list --family conv2d |
  awk -F'\t' '$2 ~ /^conv_float32_/ && $2 ~ /R3/ && $2 !~ /tf32/ && $3 !~ /stride_h=2/ {print $2 "\t" $3}' |
  while IFS=$'\t' read -r name sig; do
    [ -n "$filter" ] && ! [[ "$name" =~ $filter ]] && continue
    echo "== $name"
    mkdir -p "$JITUNE_CACHE_DIR/tunes"
    report="$JITUNE_CACHE_DIR/tunes/$name.json"
    build/jitune --json tune conv2d --signature "$sig" --strategy exhaustive < /dev/null > "$report" ||
      { echo "  tune failed"; continue; }
    python3 bench/experiments/tune_summary.py "$name" "$report" | tee -a "$out/algos.txt"
  done
build/jitune cache export "$out/tuned.jsonl"
tar -C "$JITUNE_CACHE_DIR" -czf "$out/tunes.tar.gz" tunes
[ "${TUNE_ONLY:-0}" = 1 ] && exit 0
build/jitune_bench --family conv2d --json "$out/jitune.json"
python3 bench/peer_torch.py --family conv2d --case float32 --json "$out/torch.json"
python3 bench/compare.py "$out/jitune.json" "$out/torch.json" --markdown "$out/table.md"
