// A jitune_runtime made through the C ABI for GPU tests, every cache inside a TempDir; freed on destruction.
#pragma once

#include <jitune/jitune.h>

#include <string>

#include "gpu_util.hpp"

namespace jitune::test {

// A runtime made through the C ABI, every cache inside `dir` (or `user_cache`).
class CRuntime {
 public:
  explicit CRuntime(const TempDir& dir, const std::string& user_cache = {}, bool tune_on_first_use = false) {
    const std::string cache = user_cache.empty() ? (dir.path / "tuning.sqlite").string() : user_cache;
    const std::string kernels = (dir.path / "kernels").string();
    jitune_runtime_options o{};
    o.struct_size = sizeof o;
    o.user_cache = cache.c_str();
    o.binary_cache_dir = kernels.c_str();
    o.disable_builtin_shipped_caches = 1;
    o.quiet = 1;
    o.tune_on_first_use = tune_on_first_use ? 1 : 0;
    o.tune_budget = 3;
    o.tune_min_time_ms = 0.2;
    const jitune_status status = jitune_runtime_create(&o, &rt_);
    REQUIRE_MESSAGE(status == JITUNE_OK, jitune_status_name(status), " ", jitune_last_error());
  }
  ~CRuntime() { jitune_runtime_destroy(rt_); }
  CRuntime(const CRuntime&) = delete;
  CRuntime& operator=(const CRuntime&) = delete;
  jitune_runtime* get() const { return rt_; }

 private:
  jitune_runtime* rt_ = nullptr;
};

}  // namespace jitune::test
