#!/usr/bin/env bash
# Installs jitune's build dependencies from Debian's packages when any is missing (the CUDA toolkit, which
# provides NVRTC and cuda.h, must already be installed: it is not a Debian package here).
set -euo pipefail
pkgs=(cmake ninja-build g++ libsqlite3-dev doctest-dev libcli11-dev nlohmann-json3-dev python3)
# The fuzzers (scripts/fuzz.sh) need clang and its libFuzzer runtime.
[ "${JITUNE_FUZZ_DEPS:-0}" = 1 ] && pkgs+=(clang libclang-rt-14-dev)
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
