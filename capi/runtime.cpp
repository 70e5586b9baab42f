// The C ABI's devices and runtimes: device count, runtime creation from jitune_runtime_options (tuning on
// first use included), device facts, cache warnings, reload, destruction.
#include <jitune/tuner.hpp>

#include "capi/boundary.hpp"
#include "runtime/runtime_impl.hpp"

namespace jitune::capi {
namespace {

constexpr std::size_t kOptionsV0 = JITUNE_V0_SIZE(jitune_runtime_options, tune_min_time_ms);
constexpr std::size_t kDeviceInfoV0 = JITUNE_V0_SIZE(jitune_device_info, nvrtc_version);

RuntimeOptions runtime_options(const jitune_runtime_options* in, const char* fn) {
  RuntimeOptions o;
  if (!in) return o;
  const jitune_runtime_options c = read_struct(in, kOptionsV0, fn, "options");
  o.device = c.device;
  if (c.user_cache) o.user_cache = c.user_cache;
  o.use_user_cache = c.disable_user_cache == 0;
  std::size_t i = 0;
  for (const char* path : array_arg(c.shipped_caches, c.n_shipped_caches, fn, "options->shipped_caches")) {
    if (!path) throw_null(fn, ("options->shipped_caches[" + std::to_string(i) + "]").c_str());
    o.shipped_caches.emplace_back(path);
    ++i;
  }
  o.use_builtin_shipped_caches = c.disable_builtin_shipped_caches == 0;
  if (c.binary_cache_dir) o.binary_cache_dir = c.binary_cache_dir;
  o.disk_binary_cache = c.disable_disk_binary_cache == 0;
  o.quiet = c.quiet != 0;
  if (c.tune_on_first_use) {
    if (!(c.tune_min_time_ms >= 0))
      throw InvalidArgument(std::string(fn) + ": options->tune_min_time_ms is " +
                            std::to_string(c.tune_min_time_ms) + "; give a time >= 0 (0: the default, 1 ms)");
    tuner::FirstUseOptions first_use;
    first_use.budget = c.tune_budget > 0   ? static_cast<std::size_t>(c.tune_budget)
                       : c.tune_budget < 0 ? 0
                                           : 48;
    if (c.tune_min_time_ms > 0) first_use.min_time_ms = c.tune_min_time_ms;
    o.tuning = tuner::tune_on_first_use(first_use);
  }
  return o;
}

}  // namespace
}  // namespace jitune::capi

using namespace jitune;
using namespace jitune::capi;

extern "C" {

JITUNE_API jitune_status jitune_device_count(int* count) {
  return guarded("jitune_device_count",
                 [&](const char* fn) { *require(count, fn, "count") = device_count(); });
}

JITUNE_API jitune_status jitune_runtime_create(const jitune_runtime_options* options,
                                               jitune_runtime** runtime) {
  return guarded("jitune_runtime_create", [&](const char* fn) {
    require(runtime, fn, "runtime");
    *runtime = nullptr;
    RuntimeOptions o = runtime_options(options, fn);
    *runtime = new jitune_runtime(std::move(o));
  });
}

JITUNE_API jitune_status jitune_runtime_destroy(jitune_runtime* runtime) {
  return guarded("jitune_runtime_destroy", [&](const char*) { delete runtime; });
}

JITUNE_API jitune_status jitune_runtime_device(const jitune_runtime* runtime, jitune_device_info* info) {
  return guarded("jitune_runtime_device", [&](const char* fn) {
    const Runtime& rt = runtime_arg(runtime, fn);
    require(info, fn, "info");
    const DeviceInfo& d = rt.device();
    jitune_device_info out{};
    out.ordinal = d.ordinal;
    out.cc_major = d.cc_major;
    out.cc_minor = d.cc_minor;
    out.sm_count = d.sm_count;
    out.l2_bytes = d.l2_bytes;
    out.global_memory_bytes = d.global_memory_bytes;
    out.max_shared_per_block_optin = d.max_shared_per_block_optin;
    out.driver_version = d.driver_version;
    out.sm_clock_mhz = d.sm_clock_mhz;
    out.memory_clock_mhz = d.memory_clock_mhz;
    copy_fixed(out.name, d.name);
    copy_fixed(out.nvrtc_version, internal::impl(const_cast<Runtime&>(rt)).compiler.nvrtc_version());
    write_struct(info, out, kDeviceInfoV0, fn, "info");
  });
}

JITUNE_API jitune_status jitune_runtime_warnings(const jitune_runtime* runtime, char* out, size_t out_size,
                                                 size_t* required) {
  return guarded("jitune_runtime_warnings", [&](const char* fn) {
    std::string text;
    for (const std::string& warning : runtime_arg(runtime, fn).warnings()) text += warning + "\n";
    write_text(text, out, out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_runtime_reload(jitune_runtime* runtime) {
  return guarded("jitune_runtime_reload", [&](const char* fn) { runtime_arg(runtime, fn).reload(); });
}

}  // extern "C"
