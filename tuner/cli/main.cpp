// jitune: tune kernels offline per device, explain what a call would run, and manage tuning caches.
#include "tuner/cli/app.hpp"

int main(int argc, char** argv) {
  jitune::cli::CliApp app;
  if (auto code = app.parse(argc, argv)) return *code;
  return app.run();
}
