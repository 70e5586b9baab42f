// doctest main for GPU test executables: without a usable device it prints why and exits 77, which CTest
// reports as Skipped (never as passed).
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
  return context.run();
}
