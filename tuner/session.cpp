// The tuning session. Compiles run on a thread pool while this thread verifies and times each compiled batch on the
// GPU, one candidate at a time, writing every verdict to the store as soon as it exists.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include "cache/store.hpp"
#include "templates/sources.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/measure.hpp"
#include "tuner/tuner.hpp"

#ifndef JITUNE_VERSION
#define JITUNE_VERSION "0.0.0"
#endif

namespace jitune::tuner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string clip(const std::string& text, std::size_t limit = 4000) {
  return text.size() <= limit ? text : text.substr(0, limit) + "\n[... log truncated]";
}

// A candidate that compiled and loaded, kept for the side-by-side re-timing.
struct Loaded {
  std::size_t index = 0;
  CUfunction function = nullptr;
  LaunchShape shape;
  std::shared_ptr<const CompiledProgram> program;
  std::string program_text, name_expression, lowered;
};

}  // namespace

std::vector<Config> legal_candidates(const Family& family, const Problem& problem, const DeviceInfo& device,
                                     std::size_t& pruned) {
  const Config heuristic = family.heuristic(problem, device);
  std::vector<Config> out;
  pruned = 0;
  if (family.validate(problem, heuristic, device).empty()) out.push_back(heuristic);
  for (Config& c : family.space().enumerate()) {
    if (c == heuristic) continue;
    if (family.check(problem, c, device).empty()) out.push_back(std::move(c));
    else ++pruned;
  }
  return out;
}

TuneReport tune(Runtime& runtime, const Family& family, const Problem& problem, const TuneOptions& opt) {
  const auto t_start = Clock::now();
  Runtime::Impl& impl = runtime.impl();
  const DeviceInfo& device = impl.device;
  driver::make_current(impl.context);

  TuneReport report;
  report.family = std::string(family.name());
  report.signature = problem.signature();
  report.heuristic = family.heuristic(problem, device);
  report.bytes = problem.bytes_moved();
  report.space_size = family.space().size();

  std::vector<Config> configs = legal_candidates(family, problem, device, report.pruned);
  if (configs.empty()) throw InvalidArgument("no configuration of " + report.family + " is legal for " + report.signature);
  const std::uint64_t seed = opt.seed ? opt.seed : static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  if (opt.strategy == Strategy::kRandom && opt.budget > 0 && configs.size() > opt.budget) {
    const bool has_default = configs.front() == report.heuristic;
    std::mt19937_64 rng(seed);
    std::shuffle(configs.begin() + (has_default ? 1 : 0), configs.end(), rng);
    configs.resize(std::max<std::size_t>(opt.budget, 1));
  }
  const bool reports_resources = opt.reject_spills;
  CompilePool pool(impl.compiler, family, problem, configs, device.arch(), opt.compile_threads, reports_resources);

  // The CPU reference runs while NVRTC works.
  const auto t_ref = Clock::now();
  const Workload host = family.workload(problem, seed);
  const auto reference = family.reference(problem, host);
  report.reference_s = seconds_since(t_ref);
  const DeviceWorkload work(family, problem, host, reference);
  TunerKernels tuner_kernels(impl);
  DeviceComparer comparer(tuner_kernels);
  driver::StreamHandle stream;
  LaunchTimer timer(tuner_kernels, device, problem.bytes_moved(), std::max(opt.max_reps, opt.retime_reps), opt.l2,
                    stream.get());
  report.l2 = timer.mode();

  cache::RecordKey key = impl.record_key(family, problem);
  cache::Store* store = opt.store && impl.user_store && !impl.user_store->read_only() ? impl.user_store.get() : nullptr;

  report.candidates.resize(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) report.candidates[i].config = configs[i];
  std::vector<std::unique_ptr<driver::Module>> modules;
  std::vector<Loaded> loaded;
  double best_us = 0;
  std::size_t done = 0;

  auto finish = [&](std::size_t i) {
    CandidateResult& c = report.candidates[i];
    ++done;
    if (store) {
      cache::Measurement m{key, c.config.text(), c.status, clip(c.reason), c.time_us, c.spread, c.reps, cache::utc_now()};
      store->put(m);
    }
    if (opt.on_progress) {
      Progress p{done, configs.size(), best_us, seconds_since(t_start), 0};
      p.eta_s = p.elapsed_s / static_cast<double>(done) * static_cast<double>(configs.size() - done);
      opt.on_progress(p);
    }
  };

  while (auto batch = pool.next()) {
    const CompiledProgram& out = *batch->output;
    if (!out.ok) {
      for (std::size_t i : batch->candidates) {
        report.candidates[i].status = "compile_failed";
        report.candidates[i].reason = out.log;
        finish(i);
      }
      continue;
    }
    modules.push_back(std::make_unique<driver::Module>(out.cubin.data()));
    for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
      const std::size_t i = batch->candidates[b];
      CandidateResult& c = report.candidates[i];
      c.resources = out.resources.at(batch->unit[b]);
      if (opt.reject_spills && c.resources.spills()) {
        c.status = "resources_exceeded";
        c.reason = "spills " + std::to_string(c.resources.spill_store_bytes) + " bytes to local memory";
        finish(i);
        continue;
      }
      const std::string& lowered = out.lowered.at(batch->unit[b]);
      Loaded l{i, modules.back()->function(lowered), family.launch_shape(problem, configs[i], device),
               batch->output, batch->program, batch->name_expressions[b], lowered};
      int max_threads = 0;
      JITUNE_CU_CHECK(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, l.function));
      if (l.shape.block.volume() > static_cast<std::uint64_t>(max_threads)) {
        c.status = "resources_exceeded";
        c.reason = "block of " + std::to_string(l.shape.block.volume()) + " threads, kernel allows " +
                   std::to_string(max_threads) + " (registers: " + std::to_string(c.resources.registers) + ")";
        finish(i);
        continue;
      }
      if (l.shape.shared_bytes > 48 * 1024)
        JITUNE_CU_CHECK(cuFuncSetAttribute(l.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           static_cast<int>(l.shape.shared_bytes)));
      KernelArgs args;
      family.kernel_args(problem, configs[i], work.inputs(), work.outputs(), args);
      // Correct first: one run on poisoned outputs, compared with the CPU reference.
      work.reset_outputs(stream.get());
      const CUresult launched = driver::api().cuLaunchKernel(
          l.function, l.shape.grid.x, l.shape.grid.y, l.shape.grid.z, l.shape.block.x, l.shape.block.y,
          l.shape.block.z, l.shape.shared_bytes, stream.get(), args.pointers(), nullptr);
      const CUresult synced = launched == CUDA_SUCCESS ? driver::api().cuStreamSynchronize(stream.get()) : launched;
      if (synced != CUDA_SUCCESS) {
        c.status = "launch_failed";
        c.reason = driver::error_text(synced);
        finish(i);
        if (launched == CUDA_SUCCESS)  // a fault during execution leaves the context unusable
          throw CudaError("candidate " + configs[i].text() + " of " + report.family + " faulted (" + c.reason +
                              "); the CUDA context is lost. Results measured so far are stored.",
                          synced);
        continue;
      }
      c.reason = comparer.compare(work, stream.get());
      if (!c.reason.empty()) {
        c.status = "wrong_result";
        finish(i);
        continue;
      }
      // Timing: 3 reps, cut if far behind the best, else enough reps for the time budget.
      std::vector<double> samples = timer.time(l.function, l.shape, args, 3);
      double med = median_spread(samples).first;
      if (best_us > 0 && med > opt.cut_ratio * best_us) {
        c.status = "cut";
        c.reason = "median of 3 runs " + std::to_string(med) + " us > " + std::to_string(opt.cut_ratio) +
                   " x best " + std::to_string(best_us) + " us";
      } else {
        const double per_sample_us = std::max(med, 0.1) * timer.launches_per_sample(med);
        const int want = std::clamp(static_cast<int>(std::ceil(opt.min_time_ms * 1000.0 / per_sample_us)),
                                    opt.min_reps, opt.max_reps);
        if (want > 3) {
          auto more = timer.time(l.function, l.shape, args, want - 3);
          samples.insert(samples.end(), more.begin(), more.end());
        }
        c.status = "ok";
      }
      std::tie(c.time_us, c.spread) = median_spread(samples);
      c.reps = static_cast<int>(samples.size());
      if (c.status == "ok" && (best_us == 0 || c.time_us < best_us)) best_us = c.time_us;
      loaded.push_back(std::move(l));
      finish(i);
    }
  }
  report.compile_s = pool.compile_seconds();

  // Side by side: the fastest few and the heuristic default, interleaved round by round so drift hits all alike.
  std::vector<const Loaded*> finalists;
  {
    std::vector<const Loaded*> ok;
    for (const Loaded& l : loaded)
      if (report.candidates[l.index].status == "ok") ok.push_back(&l);
    std::sort(ok.begin(), ok.end(), [&](const Loaded* a, const Loaded* b) {
      return report.candidates[a->index].time_us < report.candidates[b->index].time_us;
    });
    for (std::size_t k = 0; k < ok.size() && static_cast<int>(k) < opt.retime_top; ++k) finalists.push_back(ok[k]);
    for (const Loaded* l : ok)
      if (configs[l->index] == report.heuristic &&
          std::find(finalists.begin(), finalists.end(), l) == finalists.end())
        finalists.push_back(l);
  }
  if (finalists.empty()) {
    std::map<std::string, int> counts;
    for (const auto& c : report.candidates) ++counts[c.status];
    std::string summary;
    for (auto& [s, n] : counts) summary += " " + s + "=" + std::to_string(n);
    std::string first_reason;
    for (const auto& c : report.candidates)
      if (!c.reason.empty()) {
        first_reason = c.config.text() + ": " + clip(c.reason, 2000);
        break;
      }
    throw Error("tuning " + report.family + " " + report.signature + ": no candidate compiled and verified (" +
                summary + " ). First failure: " + first_reason);
  }
  std::vector<std::vector<double>> rounds(finalists.size());
  for (int r = 0; r < opt.retime_reps; ++r)
    for (std::size_t f = 0; f < finalists.size(); ++f) {
      KernelArgs args;
      family.kernel_args(problem, configs[finalists[f]->index], work.inputs(), work.outputs(), args);
      rounds[f].push_back(timer.time(finalists[f]->function, finalists[f]->shape, args, 1).at(0));
    }
  const Loaded* winner = nullptr;
  for (std::size_t f = 0; f < finalists.size(); ++f) {
    auto [med, spread] = median_spread(rounds[f]);
    const Config& c = configs[finalists[f]->index];
    if (c == report.heuristic) report.default_us = med;
    if (!winner || med < report.best_us) {
      winner = finalists[f];
      report.best_us = med;
      report.best_spread = spread;
      report.best_reps = static_cast<int>(rounds[f].size());
    }
  }
  report.best = configs[winner->index];

  // The winner's (and the default's) binaries go to the binary cache under their single-kernel keys, so the first
  // call of a new process loads them without NVRTC.
  for (const Loaded* l : finalists)
    if (l == winner || configs[l->index] == report.heuristic)
      impl.binaries.put(impl.compiler.binary_key(l->program_text, l->name_expression, device.arch()),
                        CachedBinary{l->program->cubin, l->lowered});

  if (store) {
    cache::Record rec;
    rec.key = key;
    rec.group = problem.group();
    rec.features = problem.features();
    rec.config = report.best.text();
    rec.time_us = report.best_us;
    rec.spread = report.best_spread;
    rec.reps = report.best_reps;
    rec.default_time_us = report.default_us;
    rec.default_config = report.heuristic.text();
    rec.jitune_version = JITUNE_VERSION;
    rec.driver_version = device.driver_version;
    rec.created_at = cache::utc_now();
    store->put(rec);
    report.stored = true;
  }
  report.wall_s = seconds_since(t_start);
  return report;
}

DryRunReport dry_run(const Compiler& compiler, const Family& family, const Problem& problem,
                     const DeviceInfo& device, unsigned threads) {
  const auto t0 = Clock::now();
  DryRunReport r;
  r.space_size = family.space().size();
  std::vector<Config> configs = legal_candidates(family, problem, device, r.pruned);
  r.candidates.resize(configs.size());
  CompilePool pool(compiler, family, problem, configs, device.arch(), threads, true);
  while (auto batch = pool.next()) {
    for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
      CandidateResult& c = r.candidates[batch->candidates[b]];
      c.config = configs[batch->candidates[b]];
      if (batch->output->ok) {
        c.status = "ok";
        c.resources = batch->output->resources.at(batch->unit[b]);
      } else {
        c.status = "compile_failed";
        c.reason = batch->output->log;
      }
    }
  }
  r.compile_s = pool.compile_seconds();
  r.wall_s = seconds_since(t0);
  return r;
}

}  // namespace jitune::tuner
