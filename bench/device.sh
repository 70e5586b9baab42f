#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) from the repository root, with the build folder carried:
# GPU tests, tuning time of one problem, the default suite, the benchmark against PyTorch / cuDNN, and the first
# call of a new process. Everything it prints is also kept under $OUT (or ./device-out).
# With "python" (or all): the Python package's tests (the wheel installed into build-py/site, carried), its bench
# beside PyTorch, and the join with the C++ bench of the same run (needs bench's jitune.json and torch.json).
# With "inductor": the C++ bench and PyTorch eager + torch.compile (Inductor, max-autotune) side by side.
# With "firstcall": the first call of a new process per family, with the shipped kernels and with NVRTC.
# With "vs_inductor": jitune's Python path and Inductor in one process (bench/python/vs_inductor.py), per family.
# With "profile": Nsight Compute on one call of jitune and of Inductor per case whose name contains an argument
#   (bench/python/vs_inductor.py --profile; the arguments are case texts, not families), and Inductor's code.
# With "metrics": Nsight Compute counters (DRAM bytes and rate, L2 hits, sectors per request, shared-memory conflicts,
#   occupancy, launch shape) of both sides of each case whose name contains an argument (one process), paired per
#   case by bench/python/ncu_pairs.py into metrics.md.
# With "refresh": the cases this GPU's caches do not serve exactly (`jitune tune --suite default --missing`, the
#   families given or all), tuned into a scratch store seeded with this GPU model's shipped file, and exported with
#   only current records (`cache export --current`) to $OUT/refresh.jsonl: the new shipped file for that model
#   (copy it to cache/shipped/ on the development machine); then `explain --suite default` there. The device tool
#   brings back at most 8 files from $OUT: a call that writes more beside a refresh may lose refresh.jsonl (it did
#   once; `jitune cache export --current` from a warm machine's store got it back), so keep such calls small.
#   usage: [BUILD=build] bench/device.sh [tests|bench|python|inductor|vs_inductor|firstcall|profile|metrics|refresh|all]
#          [family ...]
#   (default: all)
set -uo pipefail
what=${1:-all}
shift || true
families=("$@")
build=${BUILD:-build}
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
# The build folder holds absolute paths of the machine it was built on; make them valid here.
src=$(grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2)
if [ -n "$src" ] && [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")"; ln -sfn "$PWD" "$src"; fi
export JITUNE_CACHE_DIR=${JITUNE_CACHE_DIR:-/tmp/jitune-device-cache}
fam_args=(); peer_args=(); ctest_args=()
for f in "${families[@]}"; do fam_args+=(--family "$f"); peer_args+=(--family "$f"); done
[ ${#families[@]} -gt 0 ] && ctest_args=(-R "$(IFS='|'; echo "${families[*]}")")
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
"$build/jitune" devices | tee -a "$out/gpu.txt"
if [ "$what" = tests ] || [ "$what" = all ]; then
  (cd "$build" && ctest --output-on-failure -j1 -L gpu "${ctest_args[@]}" 2>&1) | tee "$out/ctest.log" | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  rm -rf "$JITUNE_CACHE_DIR"
  if [ ${#families[@]} -eq 0 ] || [[ " ${families[*]} " == *" elementwise "* ]]; then
    { /usr/bin/time -f "tune wall %e s" "$build/jitune" tune elementwise --expr 'z = x * y' --dtype float32 --n 134217728 ; } 2>&1 | tee "$out/tune_one.txt"
  fi
  { /usr/bin/time -f "suite wall %e s" "$build/jitune" tune --suite default "${fam_args[@]}" ; } 2>&1 | tee "$out/suite.txt" | grep -v ' candidates, best '
  "$build/jitune_bench" --json "$out/jitune.json" "${fam_args[@]}" || status=1
  python3 bench/peer_torch.py --json "$out/torch.json" "${peer_args[@]}" || status=1
  python3 bench/compare.py "$out/jitune.json" "$out/torch.json" --markdown "$out/table.md"
  if [ ${#families[@]} -eq 0 ] || [[ " ${families[*]} " == *" elementwise "* ]]; then
    "$build/jitune_bench" --first-call | tee "$out/first_call.json"
  fi
fi
if [ "$what" = inductor ]; then
  # Inductor beside eager (peer_torch.py --inductor: compile times apart), joined with the jitune bench of the same
  # call; max-autotune compiles each case, so run a few families per call.
  "$build/jitune_bench" --json "$out/jitune.json" "${fam_args[@]}" || status=1
  python3 bench/peer_torch.py --inductor --json "$out/torch_inductor.json" "${peer_args[@]}" || status=1
  python3 bench/compare.py "$out/jitune.json" "$out/torch_inductor.json" --markdown "$out/table_inductor.md" |
    grep -E "at or above|Behind"
fi
if [ "$what" = firstcall ]; then
  # Issue 19: the first call of a new process per family (empty user folder), with the shipped kernels and without
  # any binary folder (NVRTC), each in its own process.
  fams=("${families[@]}")
  [ ${#fams[@]} -eq 0 ] && fams=(elementwise permute upsample_nearest2d scatter_add conv2d reduce_rows)
  : > "$out/first_call.jsonl"
  for f in "${fams[@]}"; do
    for mode in shipped nvrtc nvrtc shipped; do
      dir=$(mktemp -d)
      extra=()
      [ "$mode" = nvrtc ] && extra=(--no-binaries)
      JITUNE_CACHE_DIR=$dir "$build/jitune_bench" --first-call --family "$f" "${extra[@]}" >> "$out/first_call.jsonl" ||
        status=1
      rm -rf "$dir"
    done
  done
  cat "$out/first_call.jsonl"
fi
if [ "$what" = vs_inductor ]; then
  # Issue 21: jitune's Python path and Inductor in one process, same timer (bench/python/vs_inductor.py), per family.
  export PYTHONPATH=$PWD/build-py/site${PYTHONPATH:+:$PYTHONPATH}
  python3 bench/python/vs_inductor.py --json "$out/vs_inductor.json" --rounds "${ROUNDS:-2}" "${fam_args[@]}" \
    2>&1 | grep -v Warning | tee "$out/vs_inductor.txt" || status=1
fi
if [ "$what" = profile ]; then
  export PYTHONPATH=$PWD/build-py/site${PYTHONPATH:+:$PYTHONPATH}
  for c in "${families[@]}"; do
    TORCH_LOGS=output_code ncu --profile-from-start off --clock-control none --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
      python3 bench/python/vs_inductor.py --profile --case "$c" > "$out/profile_$c.txt" 2>&1 || status=1
    grep -E '^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|L2 Hit|Grid Size|Block Size|Registers Per|Achieved Occupancy' \
      "$out/profile_$c.txt" | head -60
  done
fi
if [ "$what" = metrics ]; then
  export PYTHONPATH=$PWD/build-py/site${PYTHONPATH:+:$PYTHONPATH}
  metrics=$(python3 -c 'import sys; sys.path.insert(0, "bench/python"); import ncu_pairs
print(",".join(m for m, _, _ in ncu_pairs.METRICS))')
  case_args=()
  for c in "${families[@]}"; do case_args+=(--case "$c"); done
  ncu --profile-from-start off --clock-control none --csv --page raw --print-units base --metrics "$metrics" \
    python3 bench/python/vs_inductor.py --profile "${case_args[@]}" > "$out/metrics.txt" 2>&1 || status=1
  python3 bench/python/ncu_pairs.py "$out/metrics.txt" --markdown "$out/metrics.md" || status=1
fi
if [ "$what" = refresh ]; then
  name=$("$build/jitune" --json devices | python3 -c 'import json, sys; print(json.load(sys.stdin)["devices"][0]["name"])')
  slug=$(echo "$name" | tr 'A-Z' 'a-z' | sed -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/^-//' -e 's/-$//')
  scratch=$(mktemp -d)
  if [ -f "cache/shipped/$slug.jsonl" ]; then
    "$build/jitune" --cache "$scratch/refresh.sqlite" cache import "cache/shipped/$slug.jsonl" | tail -1 || status=1
  fi
  { /usr/bin/time -f "refresh wall %e s" "$build/jitune" --cache "$scratch/refresh.sqlite" tune --suite default \
      --missing "${fam_args[@]}" ; } 2>&1 | tee "$out/refresh.txt" | grep -E -- '--missing|where the|wall'
  "$build/jitune" --cache "$scratch/refresh.sqlite" cache export --current "$out/refresh.jsonl" || status=1
  JITUNE_CACHE_DIR=$scratch "$build/jitune" --cache "$scratch/refresh.sqlite" explain --suite default | tail -1
  echo "new shipped file for $name: $out/refresh.jsonl (cache/shipped/$slug.jsonl)"
  rm -rf "$scratch"
fi
if [ "$what" = python ] || [ "$what" = all ]; then
  export PYTHONPATH=$PWD/build-py/site${PYTHONPATH:+:$PYTHONPATH}
  python3 -m pytest -q -rs -p no:cacheprovider tests/python 2>&1 | tee "$out/pytest.log" | tail -30
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  python3 bench/python/bench_ops.py --json "$out/python.json" "${peer_args[@]}" || status=1
  if [ -f "$out/jitune.json" ] && [ -f "$out/torch.json" ]; then
    # A second C++ run after the Python one: the C++ bench's own run-to-run spread, beside the 2% comparison.
    "$build/jitune_bench" --json "$out/jitune_again.json" "${fam_args[@]}" >/dev/null || status=1
    python3 bench/python/compare_paths.py "$out/jitune.json" "$out/python.json" "$out/torch.json" \
      --cpp-again "$out/jitune_again.json" --markdown "$out/paths.md" | tail -60
  fi
  python3 examples/pytorch/add2.py 2>&1 | tee "$out/add2.txt"
fi
exit $status
