#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (libraries instrumented, AddressSanitizer on) into build-fuzz/ and runs
# each for a bounded time (default 60 s), starting from tests/fuzz/corpus/<target>. A crash fails the script;
# the reproducer is left in build-fuzz/ and belongs in a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
JITUNE_FUZZ_DEPS=1 scripts/install-deps.sh
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DJITUNE_BUILD_FUZZERS=ON -DJITUNE_BUILD_TESTS=OFF -DJITUNE_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" >/dev/null
targets=(fuzz_expression fuzz_cli fuzz_cache_import)
cmake --build build-fuzz --target "${targets[@]}"
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/artifacts/$t"
  echo "== $t for ${seconds}s"
  # Leaks are findings too; inputs up to 1 MiB reach the import's size limits (a line over 64 KiB, deep nesting).
  ASAN_OPTIONS=detect_leaks=1 "./build-fuzz/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -max_len=1048576 -len_control=0 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t/" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
    2>&1 | grep -E "^#[0-9]+ +DONE|stat::number_of_executed_units|ERROR|SUMMARY|Test unit written" || true
  # Any one kind of failing input fails the script (ls over three globs would need all three to match).
  if compgen -G "build-fuzz/artifacts/$t/crash-*" >/dev/null || compgen -G "build-fuzz/artifacts/$t/leak-*" >/dev/null ||
    compgen -G "build-fuzz/artifacts/$t/timeout-*" >/dev/null || compgen -G "build-fuzz/artifacts/$t/oom-*" >/dev/null; then
    echo "$t found a failing input: build-fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
echo "fuzzers: no crash"
