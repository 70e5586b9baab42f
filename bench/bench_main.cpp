// jitune_bench: times the public cases through the runtime API (tuned pick and heuristic default), the device copy
// bandwidth in the same process, the warm-call host overhead against raw cuLaunchKernel, and (with --first-call)
// the first call of a new process. Writes JSON for bench/compare.py.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include <jitune/jitune.hpp>

#include "bench/bench_case.hpp"
#include "bench/host_overhead.hpp"
#include "runtime/runtime_impl.hpp"
#include "tuner/measure.hpp"
#include "tuner/tuner.hpp"

namespace {

using namespace jitune;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The first call of this process on `family_name`'s first default-suite case (elementwise: mul_float32_1048576, the
// case this figure has always used): the decision, the kernel's binary (the user's folder, the shipped kernels or
// NVRTC) and module, the launch and its completion, timed on the host. The CUDA context, the workload's upload
// and its CPU reference come before the clock; the result is checked against the reference after it.
json first_call_of(const std::string& family_name, RuntimeOptions o, bool no_binaries) {
  if (no_binaries) o.disk_binary_cache = false;
  Runtime rt(o);
  const Family& f = family(family_name);
  const auto suite = f.default_suite();
  if (suite.empty()) throw InvalidArgument("jitune_bench --first-call: " + family_name + " has no default-suite case");
  auto chosen = suite.front();
  for (const auto& c : suite)
    if (c.first == "mul_float32_1048576") chosen = c;
  const auto problem = f.parse_problem(chosen.second);
  const Workload w = f.workload(*problem, 7);
  tuner::DeviceWorkload dw(f, *problem, w, f.reference(*problem, w));
  driver::StreamHandle stream;
  dw.reset_outputs(stream.get());
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  Runtime::Impl& impl = internal::impl(rt);
  const auto t0 = Clock::now();
  const Config config = impl.decide(f, *problem).config;
  const Kernel& k = impl.kernel(f, *problem, config);
  dw.prepare_launch(k.prep, stream.get());
  impl.launch_call(f, *problem, k, dw.bindings(k.prep), stream.get());
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const std::size_t compiles = impl.compiler.compile_count();
  tuner::TunerKernels kernels(impl);
  const std::string mismatch = tuner::DeviceComparer(kernels).compare(dw, stream.get());
  return {{"family", family_name}, {"case", chosen.first}, {"first_call_ms", ms}, {"nvrtc_compiles", compiles},
          {"level", std::string(match_level_name(rt.explain(family_name, problem->signature()).level))},
          {"binaries", no_binaries ? "none" : "user folder and shipped kernels"},
          {"shipped_kernel_folders", impl.shipped_binaries.size()}, {"correct", mismatch.empty()},
          {"error", mismatch}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"jitune_bench: the public cases through the runtime API"};
  std::string json_out, cache;
  bool first_call = false, list = false, no_binaries = false;
  std::vector<std::string> only, names;
  app.add_option("--family", only, "only these families' cases");
  app.add_option("--case", names, "only cases whose name contains this text (repeatable)");
  app.add_option("--json", json_out, "write results here");
  app.add_option("--cache", cache, "user tuning cache file (default: the default cache)");
  app.add_flag("--first-call", first_call, "time only this process's first call, on the first default-suite case of "
                                          "--family (default elementwise: mul_float32_1048576)");
  app.add_flag("--no-binaries", no_binaries, "with --first-call: no binary folders (the user's or the shipped "
                                             "kernels), so the call compiles with NVRTC");
  app.add_flag("--list", list, "print each case as family<TAB>name<TAB>signature (when known) and exit");
  CLI11_PARSE(app, argc, argv);
  auto wanted = [&](const bench::Case& c) {
    return (only.empty() || std::find(only.begin(), only.end(), c.family) != only.end()) &&
           (names.empty() || std::any_of(names.begin(), names.end(), [&](const std::string& n) {
              return c.name.find(n) != std::string::npos;
            }));
  };
  if (list) {
    for (const bench::Case& c : bench::cases())
      if (wanted(c))
        std::printf("%s\t%s\t%s\n", c.family.c_str(), c.name.c_str(), c.signature.c_str());
    return 0;
  }
  try {
    if (device_count() == 0) {
      std::fprintf(stderr, "jitune_bench: no GPU: %s\n", device_unavailable_reason().c_str());
      return 3;
    }
    RuntimeOptions o;
    if (!cache.empty()) o.user_cache = cache;
    if (first_call) {
      if (only.size() > 1) throw InvalidArgument("jitune_bench --first-call: one --family a process (a first call)");
      const json r = first_call_of(only.empty() ? "elementwise" : only.front(), o, no_binaries);
      std::printf("%s\n", r.dump().c_str());
      if (!json_out.empty()) std::ofstream(json_out) << r.dump(2) << "\n";
      return r["correct"].get<bool>() ? 0 : 1;
    }
    Runtime tuned(o);
    RuntimeOptions d;
    d.user_cache = std::filesystem::temp_directory_path() / ("jitune_bench_empty_" + std::to_string(::getpid())) / "t.sqlite";
    d.use_builtin_shipped_caches = false;
    Runtime heuristic(d);
    const double copy = tuner::copy_bandwidth_gbs(tuned);
    json rows = json::array();
    std::uint64_t seed = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
    bench::Context ctx{tuned, heuristic, copy, seed};
    int failures = 0;
    for (const bench::Case& c : bench::cases()) {
      if (!wanted(c)) continue;
      ++ctx.seed;
      json r;
      try {
        r = c.run(ctx);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), e.what());
        ++failures;
        continue;
      }
      r["case"] = c.name;
      rows.push_back(r);
      std::printf("%-40s %9.2f us %8.1f GB/s %6.1f%% copy  [%s, %s]  default %9.2f us  %s\n", c.name.c_str(),
                  r["us"].get<double>(), r["gbs"].get<double>(), r["pct_copy"].get<double>(),
                  r["config"].get<std::string>().c_str(), r["level"].get<std::string>().c_str(),
                  r["default_us"].get<double>(), bench::row_correct(r) ? "correct" : "WRONG");
      if (!bench::row_correct(r)) ++failures;
    }
    const json overhead = bench::host_overhead(tuned);
    for (const json& h : overhead)
      std::printf("host overhead %-20s raw launch %.3f us, op call %.3f us, overhead %.3f us per call\n",
                  h["family"].get<std::string>().c_str(), h["raw_launch_us"].get<double>(),
                  h["api_call_us"].get<double>(), h["overhead_us"].get<double>());
    const json out = {{"device", tuned.device().name}, {"copy_gbs", copy}, {"cases", rows}, {"host_overhead", overhead}};
    std::filesystem::remove_all(d.user_cache.parent_path());
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jitune_bench: %s\n", e.what());
    return 1;
  }
}
