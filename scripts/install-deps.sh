#!/usr/bin/env bash
# Installs jitune's build dependencies from Debian's packages when any is missing (the CUDA toolkit, which
# provides NVRTC and cuda.h, must already be installed: it is not a Debian package here), and what the Python
# package's build and tests need from PyPI (scikit-build-core, pytest, numpy) into `python3` when any is missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ libsqlite3-dev doctest-dev libcli11-dev nlohmann-json3-dev python3 python3-pip)
# The fuzzers (scripts/fuzz.sh) need clang and its libFuzzer runtime.
[ "${JITUNE_FUZZ_DEPS:-0}" = 1 ] && pkgs+=(clang libclang-rt-14-dev)
# The Slurm test of the tuner's shards (scripts/test-slurm.sh) runs a one-machine Slurm.
[ "${JITUNE_SLURM_DEPS:-0}" = 1 ] && pkgs+=(slurmd slurmctld slurm-client munge)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
if ! ls /usr/local/cuda/include/nvrtc.h >/dev/null 2>&1 && [ -z "${CUDAToolkit_ROOT:-}" ]; then
  echo "the CUDA toolkit (nvrtc.h) was not found under /usr/local/cuda; install CUDA 12+ or set CUDAToolkit_ROOT" >&2
  exit 1
fi

# Python: only what is missing, so a warm machine installs nothing. tqdm (progress bars of jitune.tune) is optional.
py_missing=()
python3 -c "import scikit_build_core" 2>/dev/null || py_missing+=("scikit-build-core>=0.10")
python3 -c "import pytest" 2>/dev/null || py_missing+=(pytest)
python3 -c "import numpy" 2>/dev/null || py_missing+=(numpy)
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "installing from PyPI: ${py_missing[*]}"
  pip_flags=(--quiet --disable-pip-version-check)
  # Debian's own python3 outside a virtual environment refuses pip installs (PEP 668) unless told.
  if python3 -c 'import os, sys, sysconfig
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")) else 1)'; then
    pip_flags+=(--break-system-packages)
  fi
  python3 -m pip install "${pip_flags[@]}" "${py_missing[@]}"
fi
