// A first C++ program against an installed jitune, linked statically (jitune::runtime and jitune::tuner from
// find_package(jitune COMPONENTS static)): print the files the installation brings (found from the package, so
// the shipped caches work with no setup), then open a runtime with tuning on first use and ask which configuration
// an elementwise problem would use and why. Without a GPU it says so and exits 3, as the jitune CLI does.
#include <cstdio>
#include <exception>

#include <jitune/jitune.hpp>
#include <jitune/tuner.hpp>

int main() {
  const jitune::InstalledFiles files = jitune::installed_files();
  for (const auto& cache : files.shipped_caches) std::printf("shipped cache %s\n", cache.c_str());
  std::printf("worker        %s\n", files.worker.empty() ? "(none found)" : files.worker.c_str());
  try {
    jitune::RuntimeOptions options;
    options.tuning = jitune::tuner::tune_on_first_use();
    jitune::Runtime runtime(options);
    std::printf("device %d: %s\n", runtime.device().ordinal, runtime.device().name.c_str());
    const std::string signature = jitune::elementwise_signature("z = x * y", 1 << 24, jitune::DType::kFloat16);
    const jitune::Explanation why = runtime.explain("elementwise", signature);
    std::printf("elementwise %s: %s (%s, from %s)\n", signature.c_str(), why.config.c_str(),
                std::string(jitune::match_level_name(why.level)).c_str(), why.source.c_str());
    return 0;
  } catch (const jitune::NoDevice& e) {
    std::fprintf(stderr, "jitune_example_cpp: no GPU: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jitune_example_cpp: %s\n", e.what());
    return 1;
  }
}
