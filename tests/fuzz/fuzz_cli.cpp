// libFuzzer target: the jitune command line. Input lines become arguments; parsing and the problem validation that
// `jitune tune/explain/cache show` do first must end in an exit code or a jitune::Error, never a crash.
#include <cstdint>
#include <string>
#include <vector>

#include <jitune/error.hpp>

#include "tuner/cli/app.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"jitune"};
  std::string current;
  for (std::size_t i = 0; i < size && args.size() < 24; ++i) {
    if (data[i] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (!current.empty()) args.push_back(current);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  jitune::cli::CliApp app;
  if (!app.parse(static_cast<int>(argv.size()), argv.data(), false)) {
    try {
      app.check_problem();
    } catch (const jitune::Error&) {
    }
  }
  return 0;
}
