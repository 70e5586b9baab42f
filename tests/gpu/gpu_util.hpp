// Helpers for GPU tests: device buffers filled from host vectors, random data, temporary cache folders.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <jitune/runtime.hpp>

#include "cache/store.hpp"
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
/// The signatures of `family`'s records in the user store of `dir` (isolated_options), read directly (explain
/// would tune under a tune-on-first-use policy).
inline std::set<std::string> stored_signatures(const TempDir& dir, std::string_view family) {
  std::set<std::string> out;
  const cache::Store store(dir.path / "tuning.sqlite", cache::OpenMode::kReadOnly);
  for (const auto& r : store.records())
    if (r.key.family == family) out.insert(r.key.signature);
  return out;
}

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

/// For programmatic-launch tests (kernels launched with LaunchShape::programmatic on sm_90): a producer kernel that
/// lets dependent launches start at once, spins, then saves a buffer the dependent call writes (which that call
/// must not overwrite before) and writes the buffer the dependent call reads (which it must not read before); and,
/// as the control, a dependent copy that does not wait, which must see the stale input.
class PdlProducer {
 public:
  explicit PdlProducer(Runtime& rt) {
    REQUIRE_MESSAGE(rt.device().cc() >= 90, "programmatic launch needs sm_90: name the case \"... [sm_90]\"");
    const CompiledProgram program = internal::impl(rt).compiler.compile(
        kProgram, {"pdl_producer", "pdl_copy_without_wait"}, rt.device().arch(), false);
    REQUIRE_MESSAGE(program.ok, program.log);
    module_ = std::make_unique<driver::Module>(program.cubin.data());
    producer_ = module_->function(program.lowered.at(0));
    copy_ = module_->function(program.lowered.at(1));
  }

  /// On `s`: after a spin of `ns` nanoseconds, saved <- watched and input <- next, `bytes` each (a multiple of 4).
  void launch(CUstream s, const Buffer& next, const Buffer& input, std::size_t input_offset, const Buffer& watched,
              std::size_t watched_offset, const Buffer& saved, std::size_t bytes,
              unsigned long long ns = 300000) const {
    REQUIRE(bytes % 4 == 0);
    CUdeviceptr next_p = next.mem.get(), in_p = input.mem.get() + input_offset,
                watched_p = watched.mem.get() + watched_offset, saved_p = saved.mem.get();
    unsigned words = static_cast<unsigned>(bytes / 4);
    void* args[] = {&next_p, &in_p, &watched_p, &saved_p, &words, &ns};
    driver::check(launch_kernel(producer_, shape(), s, args), "pdl_producer");
  }

  /// A dependent call behind the producer: input <- stale and output poisoned first, then on `s` the producer (which
  /// writes `next` into the input after its spin) and `call`. The call must produce `expected` (so it read the
  /// finished input) and must not have written its output before the producer saved it (saved stays poison).
  void expect_waits(CUstream s, const Buffer& next, const Buffer& input, const std::vector<std::byte>& stale,
                    const Buffer& output, const Buffer& saved, const std::vector<std::byte>& expected,
                    const std::function<void()>& call, const char* what) const {
    const std::size_t bytes = expected.size();
    input.upload(stale, 0);
    output.poison();
    JITUNE_CU_CHECK(cuMemsetD8(saved.mem.get(), 0, saved.bytes));
    JITUNE_CU_CHECK(cuCtxSynchronize());  // the legacy stream's memset, before launches on the non-blocking `s`
    launch(s, next, input, 0, output, 0, saved, bytes);
    call();
    JITUNE_CU_CHECK(cuStreamSynchronize(s));
    CHECK_MESSAGE(output.download(bytes, 0) == expected, what << " read its input before the producer wrote it");
    const auto before = saved.download(bytes, 0);
    CHECK_MESSAGE(std::all_of(before.begin(), before.end(), [](std::byte b) { return b == std::byte{0xFF}; }),
                  what << " wrote its output before the producer had read it");
  }

  /// The control: the producer, then a programmatic copy input -> output that does not wait. True when the copy
  /// read the stale input in one of a few tries (a time slice given to another process can fall in the spin): then
  /// the driver really starts dependent launches early here, and a test of a kernel that waits can fail.
  bool control_races(CUstream s, const Buffer& next, const Buffer& input, const std::vector<std::byte>& stale,
                     const Buffer& output, const Buffer& saved) const {
    const std::size_t bytes = stale.size();
    CUdeviceptr in_p = input.mem.get(), out_p = output.mem.get();
    unsigned words = static_cast<unsigned>(bytes / 4);
    void* copy_args[] = {&in_p, &out_p, &words};
    LaunchShape dependent = shape();
    dependent.programmatic = true;
    for (int attempt = 0; attempt < 4; ++attempt) {
      input.upload(stale, 0);
      output.poison();
      launch(s, next, input, 0, output, 0, saved, bytes);
      driver::check(launch_kernel(copy_, dependent, s, copy_args), "pdl_copy_without_wait");
      JITUNE_CU_CHECK(cuStreamSynchronize(s));
      if (output.download(bytes, 0) == stale) return true;
    }
    return false;
  }

 private:
  static LaunchShape shape() {
    LaunchShape shape;
    shape.grid.x = 16;
    shape.block.x = 256;
    return shape;
  }
  static constexpr const char* kProgram = R"(
extern "C" __global__ void pdl_producer(const unsigned* next, unsigned* input, const unsigned* output,
                                        unsigned* saved, unsigned n, unsigned long long ns) {
  asm volatile("griddepcontrol.launch_dependents;");
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    saved[i] = output[i];
    input[i] = next[i];
  }
}
extern "C" __global__ void pdl_copy_without_wait(const unsigned* in, unsigned* out, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}
)";
  std::unique_ptr<driver::Module> module_;
  CUfunction producer_ = nullptr, copy_ = nullptr;
};

/// What a programmatic-launch test needs: an isolated Runtime, the producer, a non-blocking stream.
struct PdlCase {
  TempDir dir;
  Runtime rt{isolated_options(dir)};
  PdlProducer producer{rt};
  driver::StreamHandle stream;
  CUstream s = stream.get();
};

}  // namespace jitune::test
