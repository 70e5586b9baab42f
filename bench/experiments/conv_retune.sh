#!/usr/bin/env bash
# The conv2d cases whose names match an ERE tuned exhaustively into an empty user cache (the shipped file present,
# its records untouched), then benched from those records beside PyTorch / cuDNN (benchmark mode; TF32 only in the
# `_tf32` cases) in the same call.
#   usage (GPU machine, build at ./build): OUT=dir [TUNE_ONLY=1] bench/experiments/conv_retune.sh NAME-ERE
#   Writes $OUT/algos.txt (per case: the winner, the fastest of each algorithm), $OUT/tuned.jsonl (the new records),
#   $OUT/jitune.json, $OUT/torch.json, $OUT/table.md and every case's tune report as $OUT/tunes.tar.gz.
set -euo pipefail
out=${OUT:?set OUT to a folder}
pattern=${1:?a regular expression over case names}
export JITUNE_CACHE_DIR=${JITUNE_CACHE_DIR:-$(mktemp -d)}
mkdir -p "$out" "$JITUNE_CACHE_DIR/tunes"
names=()
while IFS=$'\t' read -r _ name sig; do
  [[ "$name" =~ $pattern ]] || continue
  names+=(--case "$name")
  echo "== $name"
  report="$JITUNE_CACHE_DIR/tunes/$name.json"
  build/jitune --json tune conv2d --signature "$sig" --strategy exhaustive < /dev/null > "$report" ||
    { echo "  tune failed"; continue; }
  python3 bench/experiments/tune_summary.py "$name" "$report" | tee -a "$out/algos.txt"
done < <(build/jitune_bench --list --family conv2d)
[ ${#names[@]} -gt 0 ] || { echo "no conv2d case matches $pattern" >&2; exit 2; }
build/jitune cache export "$out/tuned.jsonl"
tar -C "$JITUNE_CACHE_DIR" -czf "$out/tunes.tar.gz" tunes
[ "${TUNE_ONLY:-0}" = 1 ] && exit 0
build/jitune_bench --family conv2d "${names[@]}" --json "$out/jitune.json"
python3 bench/peer_torch.py --family conv2d "${names[@]}" --json "$out/torch.json"
python3 bench/compare.py "$out/jitune.json" "$out/torch.json" --markdown "$out/table.md"
