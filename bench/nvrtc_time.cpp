// jitune_nvrtc_time: NVRTC time of every default-suite kernel of each family (the heuristic config, sm_90), plain
// and with NVRTC's automatic precompiled headers (-pch, CUDA 12.8+), in one process per mode. Needs no GPU: the
// question is where a first call's or a tuning session's compile time goes (issue 19, item 2).
//   usage: jitune_nvrtc_time [--pch] [--family F ...] [--rounds N]
#include <nvrtc.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/compiler.hpp"
#include "templates/family.hpp"
#include "templates/sources.hpp"

namespace {

using namespace jitune;

// Seconds NVRTC takes for `program` (our headers given as in-memory sources, as Compiler::compile does).
double nvrtc_seconds(const std::string& program, const std::string& name, const std::string& include, bool pch) {
  const auto& sources = template_sources();
  std::vector<const char*> names, texts;
  for (const SourceFile& f : sources) {
    names.push_back(f.name.c_str());
    texts.push_back(f.contents.c_str());
  }
  nvrtcProgram p = nullptr;
  if (nvrtcCreateProgram(&p, program.c_str(), "jitune_program.cu", static_cast<int>(sources.size()), texts.data(),
                         names.data()) != NVRTC_SUCCESS)
    throw Error("nvrtcCreateProgram failed");
  nvrtcAddNameExpression(p, name.c_str());
  std::vector<std::string> options = {"-arch=sm_90", "-std=c++17", "-I" + include, "-default-device"};
  if (pch) options.push_back("-pch");
  std::vector<const char*> raw;
  for (const std::string& o : options) raw.push_back(o.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult r = nvrtcCompileProgram(p, static_cast<int>(raw.size()), raw.data());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nvrtcDestroyProgram(&p);
  if (r != NVRTC_SUCCESS) throw Error("NVRTC could not compile " + name);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"jitune_nvrtc_time: NVRTC time of the default suite's kernels, plain or with -pch"};
  bool pch = false;
  int rounds = 1;
  std::vector<std::string> only;
  app.add_flag("--pch", pch, "NVRTC's automatic precompiled headers");
  app.add_option("--family", only, "only these families");
  app.add_option("--rounds", rounds, "compile the suite this many times (the first round pays NVRTC's start-up)");
  CLI11_PARSE(app, argc, argv);
  try {
    const Compiler compiler;  // finds the CUDA include folder
    for (int round = 0; round < rounds; ++round)
      for (const Family* f : families()) {
        if (!only.empty() && std::find(only.begin(), only.end(), f->name()) == only.end()) continue;
        double total = 0, first = 0;
        int n = 0;
        for (const auto& [name, signature] : f->default_suite()) {
          const auto problem = f->parse_problem(signature);
          const KernelSource src = f->source(*problem, f->heuristic(*problem, nominal_device(90)));
          const double s = nvrtc_seconds(src.program, src.name_expression, compiler.cuda_include(), pch);
          if (n++ == 0) first = s;
          total += s;
        }
        if (n == 0) continue;
        std::printf("%-6s round %d %-20s %3d kernels  %7.0f ms total  %5.0f ms each  (first %4.0f ms)\n",
                    pch ? "pch" : "plain", round + 1, std::string(f->name()).c_str(), n, 1000 * total,
                    1000 * total / n, 1000 * first);
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jitune_nvrtc_time: %s\n", e.what());
    return 1;
  }
  return 0;
}
