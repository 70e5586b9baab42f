#!/usr/bin/env bash
# The install is a real, relocatable CMake package: installs BUILD into a temporary prefix, moves the prefix, and
# checks that
# - jitune --version runs and `jitune cache paths` finds the shipped cache and the worker inside the moved
#   prefix, and nothing in the build tree;
# - the C header, libjitune and the CMake package files are there;
# - the C++ headers and the static libraries are there;
# - examples/cpp configures and builds against it with find_package(jitune COMPONENTS static); its C program
#   (libjitune) and its C++ program (static jitune::tuner) run: exit 0 on a GPU, 3 without one (the no-GPU
#   message on stderr); the C++ one finds the shipped caches and the worker in the moved prefix.
#   usage: tests/install/check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >/dev/null
mv "$work/prefix" "$work/moved"  # nothing may point back at the first prefix
p=$work/moved
version=$("$p/bin/jitune" --version) || fail "installed jitune --version failed"
[[ $version == "jitune "* ]] || fail "jitune --version printed '$version'"
paths=$(env -u JITUNE_SHIPPED_CACHES -u JITUNE_WORKER "$p/bin/jitune" --json cache paths) || fail "cache paths failed"
python3 - "$p" "$build" "$paths" <<'PY' || fail "the installed jitune looks outside its prefix: $paths"
import json, sys
prefix, build, info = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
shipped = info["shipped_caches"]
assert shipped, "no shipped cache found"
assert all(s.startswith(prefix + "/share/jitune/") for s in shipped), shipped
assert info["worker"] == prefix + "/libexec/jitune/jitune-worker", info["worker"]
assert build not in json.dumps(info), "a build-tree path"
PY
[ -f "$p/include/jitune/jitune.h" ] || fail "no include/jitune/jitune.h"
config=$(find "$p" -name jitune-config.cmake | head -n 1)
[ -n "$config" ] || fail "no jitune-config.cmake"
find "$p" -name 'libjitune.so*' | grep -q . || fail "no libjitune.so"

cmake -S "$src/examples/cpp" -B "$work/example" -DCMAKE_PREFIX_PATH="$p" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "examples/cpp does not configure with find_package(jitune)"; }
cmake --build "$work/example" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "examples/cpp does not build"; }
for lib in libjitune_runtime.a libjitune_tuner.a libjitune_cache.a libjitune_templates.a; do
  find "$p" -name "$lib" | grep -q . || fail "no $lib (the static C++ libraries)"
done
[ -f "$p/include/jitune/runtime.hpp" ] || fail "no include/jitune/runtime.hpp (the C++ headers)"
# Each example: exit 0 on a GPU, 3 with "no GPU" on stderr without one.
run_example() {
  set +e
  "$work/example/$1" >"$work/$1.out" 2>"$work/$1.err"
  local rc=$?
  set -e
  case $rc in
    0) echo "check_install: $1 ran on a GPU: $(grep -m1 '^device' "$work/$1.out")" ;;
    3) grep -q "no GPU" "$work/$1.err" || fail "$1: exit 3 without saying why: $(cat "$work/$1.err")"
       echo "check_install: $1 without a GPU: $(cat "$work/$1.err")" ;;
    *) cat "$work/$1.out" "$work/$1.err" >&2; fail "$1 exited $rc" ;;
  esac
}
run_example jitune_example
JITUNE_SHIPPED_CACHES= JITUNE_WORKER= run_example jitune_example_cpp
# Linked statically, the C++ example finds the shipped caches and the worker through the package it was built
# against (the moved prefix), never through the build tree.
grep -q "^shipped cache $p/share/jitune/" "$work/jitune_example_cpp.out" ||
  fail "the static C++ example found no shipped cache in the package: $(cat "$work/jitune_example_cpp.out")"
grep -q "^worker        $p/libexec/jitune/jitune-worker$" "$work/jitune_example_cpp.out" ||
  fail "the static C++ example did not find the package's worker: $(cat "$work/jitune_example_cpp.out")"
! grep -q "$build" "$work/jitune_example_cpp.out" || fail "the static C++ example uses a build-tree path"
echo "check_install: ok ($version, relocated prefix, find_package consumers: C shared, C++ static)"
