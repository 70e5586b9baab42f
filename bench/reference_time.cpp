// jitune_reference_time: CPU time of every default-suite case's workload and CPU reference, the host work a tuning
// session does besides NVRTC (no GPU needed). Issue 17: how much of a suite tune's CPU work is not compiling.
//   usage: jitune_reference_time [--family F ...]
#include <sys/resource.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "templates/family.hpp"

namespace {

using namespace jitune;

// User + system CPU seconds of this process so far (every thread).
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("CPU time of each default-suite case's workload and CPU reference");
  std::vector<std::string> only;
  app.add_option("--family", only, "only these families");
  CLI11_PARSE(app, argc, argv);
  double all_wall = 0, all_cpu = 0;
  for (const Family* f : families()) {
    if (!only.empty() && std::find(only.begin(), only.end(), f->name()) == only.end()) continue;
    double wall = 0, cpu = 0;
    for (const auto& [name, signature] : f->default_suite()) {
      const auto problem = f->parse_problem(signature);
      const double c0 = cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      const Workload w = f->workload(*problem, 1);
      const auto r = f->reference(*problem, w);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double c = cpu_seconds() - c0;
      std::printf("%-52s %8.2f s wall %8.2f CPU-s (%zu outputs)\n", name.c_str(), s, c, r.size());
      wall += s;
      cpu += c;
    }
    std::printf("== %s: %.1f s wall, %.1f CPU-s\n", std::string(f->name()).c_str(), wall, cpu);
    all_wall += wall;
    all_cpu += cpu;
  }
  std::printf("== all: %.1f s wall, %.1f CPU-s\n", all_wall, all_cpu);
  return 0;
}
