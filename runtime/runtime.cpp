// Runtime: the device and its primary context, the layered stores it opens, and the public Runtime methods
// (the decisions live in lookup.cpp, kernel loading and launching in loader.cpp, the one dispatch in
// dispatch.cpp).
#include "runtime/runtime_impl.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "runtime/dispatch.hpp"

namespace jitune {

std::string_view match_level_name(MatchLevel level) noexcept {
  switch (level) {
    case MatchLevel::kExact:
      return "exact";
    case MatchLevel::kNearestProblem:
      return "nearest_problem";
    case MatchLevel::kSameArchitecture:
      return "same_architecture";
    case MatchLevel::kHeuristic:
      return "heuristic";
  }
  return "unknown";
}

int device_count() noexcept {
  try {
    int n = 0;
    if (driver::api().cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
    return n;
  } catch (...) {
    return 0;
  }
}

std::string device_unavailable_reason() {
  if (!driver::load_error().empty()) return driver::load_error();
  int n = 0;
  CUresult r = driver::api().cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) return "cuDeviceGetCount failed: " + driver::error_text(r);
  if (n == 0) return "the driver reports no CUDA device";
  return {};
}

DeviceInfo query_device(CUdevice dev) {
  const auto& a = driver::api();
  DeviceInfo d;
  char name[256] = {};
  JITUNE_CU_CHECK(cuDeviceGetName(name, sizeof name, dev));
  d.name = name;
  auto attr = [&](CUdevice_attribute what) {
    int v = 0;
    driver::check(a.cuDeviceGetAttribute(&v, what, dev), "cuDeviceGetAttribute");
    return v;
  };
  d.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  d.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  d.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  d.max_threads_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  d.max_shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  d.max_shared_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  d.max_shared_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  d.registers_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  d.registers_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  d.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  std::size_t total = 0;
  JITUNE_CU_CHECK(cuDeviceTotalMem(&total, dev));
  d.global_memory_bytes = static_cast<std::int64_t>(total);
  JITUNE_CU_CHECK(cuDriverGetVersion(&d.driver_version));
  // Fingerprint only (tuning records): a driver that no longer reports a clock leaves it 0 (unknown).
  int khz = 0;
  if (a.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) == CUDA_SUCCESS) d.sm_clock_mhz = khz / 1000;
  if (a.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) == CUDA_SUCCESS)
    d.memory_clock_mhz = khz / 1000;
  return d;
}

Runtime::Impl::Impl(Runtime& owner, RuntimeOptions opts)
    : self(owner),
      options(std::move(opts)),
      binaries(
          options.disk_binary_cache
              ? (options.binary_cache_dir.empty()
                     ? (options.user_cache.empty() ? default_cache_dir() : options.user_cache.parent_path()) /
                           "kernels"
                     : options.binary_cache_dir)
              : std::filesystem::path()) {
  const auto& a = driver::api();
  int count = 0;
  JITUNE_CU_CHECK(cuDeviceGetCount(&count));
  if (options.device < 0 || options.device >= count)
    throw NoDevice("CUDA device " + std::to_string(options.device) + " does not exist; " +
                   std::to_string(count) + " device(s) visible (check CUDA_VISIBLE_DEVICES)");
  JITUNE_CU_CHECK(cuDeviceGet(&cu_device, options.device));
  JITUNE_CU_CHECK(cuDevicePrimaryCtxRetain(&context, cu_device));
  (void)a;
  driver::make_current(
      context);  // as cudaSetDevice would: the caller's CUDA calls on this thread now work too
  device = query_device(cu_device);
  device.ordinal = options.device;

  if (options.user_cache.empty()) options.user_cache = default_cache_dir() / "tuning.sqlite";
  if (options.binary_cache_dir.empty() && options.disk_binary_cache)
    options.binary_cache_dir = binaries.folder();
  if (std::string note = default_cache_dir_note(); !note.empty()) store_notes.push_back(std::move(note));
  if (std::string note = binaries.untrusted_note(); !note.empty()) store_notes.push_back(std::move(note));
  if (options.use_user_cache) user_store = open_user_store(options.user_cache, store_notes);
  std::vector<std::filesystem::path> shipped = options.shipped_caches;
  if (options.use_builtin_shipped_caches)
    for (auto& p : builtin_shipped_caches()) {
      // A caller may name a built-in cache itself (the Python package does): each file is opened once.
      std::error_code ec;
      const bool named = std::any_of(shipped.begin(), shipped.end(), [&](const std::filesystem::path& q) {
        return std::filesystem::equivalent(p, q, ec);
      });
      if (!named) shipped.push_back(p);
    }
  std::set<std::filesystem::path> kernel_dirs;
  for (const auto& p : shipped) {
    try {
      shipped_stores.push_back(std::make_unique<cache::Store>(p, cache::OpenMode::kReadOnly));
    } catch (const StoreError& e) {
      store_notes.push_back(std::string("shipped cache skipped: ") + e.what());
      continue;
    }
    std::error_code ec;
    const std::filesystem::path dir = p.parent_path() / "kernels";
    if (options.disk_binary_cache && std::filesystem::is_directory(dir, ec) &&
        kernel_dirs.insert(std::filesystem::weakly_canonical(dir, ec)).second) {
      auto folder = std::make_unique<BinaryCache>(dir);
      if (std::string note = folder->untrusted_note(); !note.empty()) store_notes.push_back("shipped kernels: " + note);
      shipped_binaries.push_back(std::move(folder));
    }
  }
  if (!options.quiet)
    for (const std::string& note : store_notes) std::fprintf(stderr, "jitune warning: %s\n", note.c_str());
  call_sites = std::make_unique<CallSites>();
}

Runtime::Impl::~Impl() {
  if (!scratches.empty() || workspace_pool) {  // a launch on a stream may still use its scratch: wait, then free
    driver::make_current(context);
    driver::api().cuCtxSynchronize();
    for (const Scratch& s : scratches) driver::api().cuMemFree(s.ptr);
    if (workspace_pool) driver::api().cuMemPoolDestroy(workspace_pool);
  }
  call_sites.reset();
  kernels_.clear();
  modules_.clear();
  if (context) driver::api().cuDevicePrimaryCtxRelease(cu_device);
}

void Runtime::Impl::forget_decisions() {
  call_sites->clear();
  std::unique_lock lock(mutex_);
  // Callers may still hold references to decisions: retire them instead of freeing.
  for (auto& [key, d] : decisions_) retired_decisions_.push_back(std::move(d));
  decisions_.clear();
}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(*this, std::move(options))) {}
Runtime::~Runtime() = default;

const DeviceInfo& Runtime::device() const noexcept {
  return impl_->device;
}
const RuntimeOptions& Runtime::options() const noexcept {
  return impl_->options;
}
const std::vector<std::string>& Runtime::warnings() const noexcept {
  return impl_->store_notes;
}

Explanation Runtime::explain(std::string_view family_name, std::string_view signature) {
  const Family& f = family(family_name);
  auto problem = f.parse_problem(signature);
  Explanation x = impl_->decide(f, *problem).explanation;
  x.notes.insert(x.notes.begin(), impl_->store_notes.begin(), impl_->store_notes.end());
  return x;
}

void Runtime::reload() {
  impl_->forget_decisions();
}

}  // namespace jitune
