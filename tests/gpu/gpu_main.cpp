// doctest main for GPU test executables: without a usable device it prints why and exits 77, which CTest
// reports as Skipped (never as passed). Cases whose name ends in "[sm_90]" need sm_90 or newer: on an older GPU
// they are filtered out, which doctest counts and prints as skipped, and this main says why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <jitune/runtime.hpp>

int main(int argc, char** argv) {
  const std::string why = jitune::device_unavailable_reason();
  if (!why.empty()) {
    std::printf("SKIPPED: GPU tests need a CUDA device: %s\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  jitune::RuntimeOptions options;
  options.use_user_cache = false;
  options.use_builtin_shipped_caches = false;
  options.disk_binary_cache = false;
  if (jitune::Runtime probe(options); probe.device().cc() < 90) {
    std::printf("SKIPPED: cases marked [sm_90] need sm_90 or newer; this GPU is %s\n", probe.device().arch().c_str());
    context.addFilter("test-case-exclude", "*[sm_90]");
  }
  return context.run();
}
