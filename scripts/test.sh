#!/usr/bin/env bash
# Builds and runs every test. Host tests need no GPU; GPU tests report "Skipped" without one.
# 1. The C++ build (build/) and its doctest suites (ctest).
# 2. The Python package: the wheel (scripts/build-wheel.sh, built in build-py/), installed into build-py/site (not
#    into the machine's Python), and pytest over tests/python; the tests marked gpu skip without a device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
export PIP_ROOT_USER_ACTION=ignore  # CI runs as root
wheel=$(JITUNE_SKIP_DEPS=1 scripts/build-wheel.sh | tail -n 1)
rm -rf build-py/site
python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-index --target build-py/site "$wheel"
# The jitune CLI of build/ checks the signatures the package computes.
PYTHONPATH="$PWD/build-py/site" JITUNE_CLI="$PWD/build/jitune" python3 -m pytest tests/python -q -rs -p no:cacheprovider
