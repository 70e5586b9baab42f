// Helpers for GPU tests: device buffers filled from host vectors, random data, temporary cache folders.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <jitune/runtime.hpp>

#include "runtime/driver.hpp"
#include "runtime/runtime_impl.hpp"
#include "templates/host_float.hpp"

namespace jitune::test {

/// A fresh folder under the temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("jitune_gpu_test_" + std::to_string(std::random_device{}()) + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// Runtime options with every cache inside `dir` (nothing from the user's machine leaks into a test).
inline RuntimeOptions isolated_options(const TempDir& dir) {
  RuntimeOptions o;
  o.user_cache = dir.path / "tuning.sqlite";
  o.binary_cache_dir = dir.path / "kernels";
  o.use_builtin_shipped_caches = false;
  return o;
}

/// Random values of `dtype` with magnitude in [0.25, 4) and random sign (never zero).
inline std::vector<std::byte> random_values(DType dtype, std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n * dtype_size(dtype));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(0.25, 4.0);
  for (std::size_t i = 0; i < n; ++i) store_element(dtype, out.data(), i, (rng() & 1 ? -1 : 1) * mag(rng));
  return out;
}

/// Device memory with `pad` spare bytes before the data region so tests can offset pointers.
struct Buffer {
  driver::DeviceBuffer mem;
  std::size_t bytes;
  explicit Buffer(std::size_t b, std::size_t pad = 64) : mem(b + pad), bytes(b + pad) {}
  void* at(std::size_t offset) const { return static_cast<char*>(mem.data()) + offset; }
  // Upload and poison finish before they return: cuMemcpyHtoD from pageable memory and cuMemsetD8 may still run
  // on the legacy stream when they return, and a test's non-blocking stream (driver::StreamHandle) does not wait
  // for it, so a fast launch there could read stale inputs or have its output overwritten by the poison.
  void upload(const std::vector<std::byte>& host, std::size_t offset) const {
    if (!host.empty()) JITUNE_CU_CHECK(cuMemcpyHtoD(mem.get() + offset, host.data(), host.size()));
    JITUNE_CU_CHECK(cuCtxSynchronize());
  }
  std::vector<std::byte> download(std::size_t n, std::size_t offset) const {
    std::vector<std::byte> host(n);
    if (n) JITUNE_CU_CHECK(cuMemcpyDtoH(host.data(), mem.get() + offset, n));
    return host;
  }
  void poison() const {
    JITUNE_CU_CHECK(cuMemsetD8(mem.get(), 0xFF, bytes));
    JITUNE_CU_CHECK(cuCtxSynchronize());
  }
};

}  // namespace jitune::test
