#!/usr/bin/env bash
# The install is a real, relocatable CMake package: installs BUILD into a temporary prefix, moves the prefix, and
# checks that
# - jitune --version runs and `jitune cache paths` finds the shipped cache and the worker inside the moved
#   prefix, and nothing in the build tree;
# - the C header, libjitune and the CMake package files are there;
# - examples/cpp configures and builds against it with find_package(jitune) and runs: exit 0 on a GPU, 3 without
#   one (the no-GPU message on stderr).
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
set +e
"$work/example/jitune_example" >"$work/run.out" 2>"$work/run.err"
rc=$?
set -e
case $rc in
  0) echo "check_install: examples/cpp ran on a GPU: $(head -n 1 "$work/run.out")" ;;
  3) grep -q "no GPU" "$work/run.err" || fail "exit 3 without saying why: $(cat "$work/run.err")"
     echo "check_install: examples/cpp without a GPU: $(cat "$work/run.err")" ;;
  *) cat "$work/run.out" "$work/run.err" >&2; fail "examples/cpp exited $rc" ;;
esac
echo "check_install: ok ($version, relocated prefix, find_package consumer)"
