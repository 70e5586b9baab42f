// Implementations of the jitune CLI commands.
#include "tuner/cli/commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include <jitune/runtime.hpp>

#include "cache/jsonl.hpp"
#include "cache/store.hpp"
#include "runtime/binary_cache.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/stores.hpp"
#include "templates/sources.hpp"
#include "tuner/shard.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/runner.hpp"
#include "tuner/tuner.hpp"

namespace jitune::cli {
namespace {

using nlohmann::json;

RuntimeOptions runtime_options(const Common& c) {
  RuntimeOptions o;
  o.device = c.device;
  if (!c.cache.empty()) o.user_cache = c.cache;
  o.use_builtin_shipped_caches = !c.no_shipped;
  return o;
}

std::unique_ptr<Problem> make_problem(const Family& f, const std::map<std::string, std::string>& options,
                                      const std::string& signature) {
  if (!signature.empty()) return f.parse_problem(signature);
  return f.make_problem(options);
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Progress bar with ETA on a terminal; a plain line per tenth otherwise (logs stay readable).
struct ProgressPrinter {
  std::string label;
  bool tty = isatty(STDERR_FILENO) != 0;
  std::size_t last_tenth = 0;
  void operator()(const tuner::Progress& p) {
    if (tty) {
      const int width = 30;
      const int filled = static_cast<int>(width * p.done / std::max<std::size_t>(p.total, 1));
      std::fprintf(stderr, "\r%-28.28s [%s%s] %zu/%zu best %.2f us ETA %.1fs   ", label.c_str(),
                   std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), p.done, p.total,
                   p.best_us, p.eta_s);
      if (p.done == p.total) std::fprintf(stderr, "\n");
    } else {
      const std::size_t tenth = p.done * 10 / std::max<std::size_t>(p.total, 1);
      if (tenth != last_tenth || p.done == p.total) {
        last_tenth = tenth;
        std::fprintf(stderr, "%s: %zu/%zu candidates, best %.2f us, %.1fs elapsed\n", label.c_str(), p.done, p.total,
                     p.best_us, p.elapsed_s);
      }
    }
  }
};

json candidate_json(const tuner::CandidateResult& c) {
  return {{"config", c.config.text()}, {"status", c.status},      {"reason", c.reason},
          {"time_us", c.time_us},      {"spread", c.spread},      {"reps", c.reps},
          {"registers", c.resources.registers}, {"spill_bytes", c.resources.spill_store_bytes}};
}

struct SuiteRow {
  std::string name, family, signature, config, heuristic;
  double best_us = 0, default_us = 0, bytes = 0, wall_s = 0, wait_compile_s = 0, timing_s = 0, reference_s = 0;
  std::size_t candidates = 0, reused = 0, legal = 0;
};

// The suite's summary table and where its wall time went.
void print_suite_table(std::FILE* to, const std::string& suite, const std::string& strategy, const std::string& device,
                       double copy_gbs, double wall, const std::vector<SuiteRow>& rows, std::size_t ahead_units,
                       double ahead_s) {
  std::fprintf(to, "\nsuite %s on %s (device copy %.1f GB/s), %.1fs wall\n", suite.c_str(), device.c_str(), copy_gbs,
               wall);
  std::fprintf(to, "%-36s %-40s %10s %9s %8s %10s %8s %7s\n", "case", "config", "time us", "GB/s", "% copy",
               "default us", "speedup", "wall s");
  double waits = 0, timing = 0, refs = 0;
  std::size_t candidates = 0, reused = 0, legal = 0;
  for (const SuiteRow& r : rows) {
    const double gbs = r.bytes / (r.best_us * 1e3);
    std::fprintf(to, "%-36s %-40s %10.2f %9.1f %7.1f%% %10.2f %7.3fx %7.1f\n", r.name.c_str(), r.config.c_str(),
                 r.best_us, gbs, 100 * gbs / copy_gbs, r.default_us, r.default_us / r.best_us, r.wall_s);
    waits += r.wait_compile_s;
    timing += r.timing_s;
    refs += r.reference_s;
    candidates += r.candidates;
    reused += r.reused;
    legal += r.legal;
  }
  std::fprintf(to,
               "where the %.1fs of tuning went: %.1fs verifying and timing on the GPU, %.1fs waiting for NVRTC, %.1fs "
               "building workloads and CPU references, %.1fs other (copy bandwidth, stores, setup)\n",
               wall, timing, waits, refs, wall - timing - waits - refs);
  std::fprintf(to,
               "%zu candidates (%s, of %zu legal), %zu of them on a kernel compiled ahead in the background or for an "
               "earlier case (background: %zu kernels, %.1f CPU-s of NVRTC at low priority)\n",
               candidates, strategy.c_str(), legal, reused, ahead_units, ahead_s);
}

// Compiles each job's space (or a sample); with --claims only the jobs this process claims (jobs[own...] belong to
// other shards), each marked done after its compile.
int run_dry(const Common& common, const TuneArgs& args, const std::vector<std::pair<const Family*, std::string>>& jobs,
            std::size_t own) {
  Compiler compiler;
  DeviceInfo device = nominal_device(std::stoi(args.arch.substr(3)));
  json out = json::array();
  int failures = 0;
  std::unique_ptr<tuner::WorkClaims> claims;
  if (!args.claims.empty()) claims = std::make_unique<tuner::WorkClaims>(args.claims);
  std::size_t own_done = 0, others_done = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const auto& [f, signature] = jobs[j];
    if (claims && !claims->claim(std::string(f->name()), signature)) continue;
    ++(j < own ? own_done : others_done);
    auto problem = f->parse_problem(signature);
    auto r = tuner::dry_run(compiler, *f, *problem, device, args.threads,
                            args.strategy == "random" ? args.budget : 0, args.seed);
    std::size_t ok = 0, spills = 0;
    for (const auto& c : r.candidates) {
      ok += c.status == "ok";
      spills += c.resources.spills();
    }
    failures += static_cast<int>(r.candidates.size() - ok);
    if (common.json) {
      json cands = json::array();
      for (const auto& c : r.candidates) cands.push_back(candidate_json(c));
      out.push_back({{"family", f->name()}, {"signature", signature}, {"arch", args.arch}, {"legal", r.sampled_from ? r.sampled_from : r.candidates.size()},
                     {"compiled", r.candidates.size()}, {"pruned", r.pruned}, {"compile_s", r.compile_s}, {"wall_s", r.wall_s}, {"candidates", cands}});
      if (claims) claims->done(std::string(f->name()), signature);
      continue;
    }
    std::printf("%s %s on %s: %zu legal configs%s (%zu pruned by constraints), %zu compiled, %zu spill, %.1fs "
                "wall (%.1fs NVRTC)\n",
                std::string(f->name()).c_str(), signature.c_str(), args.arch.c_str(),
                r.sampled_from ? r.sampled_from : r.candidates.size(),
                r.sampled_from ? (", a random " + std::to_string(r.candidates.size()) + " of them").c_str() : "",
                r.pruned, ok, spills, r.wall_s, r.compile_s);
    std::printf("  %-40s %-15s %5s %6s %6s\n", "config", "status", "regs", "stack", "spill");
    for (const auto& c : r.candidates)
      std::printf("  %-40s %-15s %5d %6d %6d\n", c.config.text().c_str(), c.status.c_str(), c.resources.registers,
                  c.resources.stack_bytes, c.resources.spill_store_bytes);
    for (const auto& c : r.candidates)
      if (c.status != "ok") std::printf("  first failure (%s):\n%s\n", c.config.text().c_str(), c.reason.c_str());
    if (claims) claims->done(std::string(f->name()), signature);
  }
  if (claims)
    std::fprintf(stderr, "work claims (%s): %zu of this shard's %zu items compiled here, %zu of other shards'\n",
                 claims->dir().c_str(), own_done, own, others_done);
  if (common.json) std::cout << out.dump(2) << "\n";
  return failures ? kExitError : 0;
}

using TuneJob = std::pair<const Family*, std::string>;  // family, problem signature

// The cases of a tune run and their names: the suite's (families whose kernels compile slowly last), or the one
// problem given on the command line, named by its signature.
std::vector<TuneJob> tune_jobs(const TuneArgs& args, std::vector<std::string>& names) {
  std::vector<TuneJob> jobs;
  if (args.suite.empty()) {
    const Family& f = family(args.family);
    jobs.emplace_back(&f, make_problem(f, args.problem, args.signature)->signature());
    names.push_back(jobs.back().second);
    return jobs;
  }
  // Families whose kernels compile slowly go last: their compiles then run in the background (CompilePrefetch)
  // while the other families time.
  std::vector<const Family*> order = families();
  std::stable_partition(order.begin(), order.end(), [](const Family* f) { return !f->slow_compiles(); });
  for (const Family* f : order) {
    if (!args.only_families.empty() &&
        std::find(args.only_families.begin(), args.only_families.end(), f->name()) == args.only_families.end())
      continue;
    for (const auto& [name, signature] : f->default_suite()) {
      jobs.emplace_back(f, signature);
      names.push_back(name);
    }
  }
  for (const std::string& fam : args.only_families) family(fam);  // unknown names are an error
  return jobs;
}

// The options every session of a tune run shares.
tuner::TuneOptions tune_options(const TuneArgs& args, const std::shared_ptr<tuner::CompileMemo>& memo) {
  tuner::TuneOptions opt;
  opt.strategy = args.strategy == "random"   ? tuner::Strategy::kRandom
                 : args.strategy == "guided" ? tuner::Strategy::kGuided
                                             : tuner::Strategy::kExhaustive;
  opt.budget = args.budget;
  opt.time_budget_s = args.time_s;
  opt.seed = args.seed;
  opt.min_time_ms = args.min_time_ms;
  opt.compile_threads = args.threads;
  opt.store = !args.no_store;
  opt.compile_memo = memo;
  if (args.in_process) opt.isolation = tuner::TuneOptions::Isolation::kInProcess;
  for (std::string_view rest = args.configs; !rest.empty();) {
    const std::size_t semi = rest.find(';');
    if (semi != 0) opt.only_configs.push_back(Config::parse(rest.substr(0, semi)));
    if (semi == std::string_view::npos) break;
    rest.remove_prefix(semi + 1);
  }
  opt.l2 = tuner::parse_l2_mode(args.l2);
  if (!args.shard.empty()) {  // provenance of the records this run stores (apply_shard has checked the text)
    const tuner::ShardSpec shard = tuner::parse_shard(args.shard, [](const char* n) { return std::getenv(n); });
    if (shard.count > 1) opt.shard = std::to_string(shard.index) + "/" + std::to_string(shard.count);
  }
  return opt;
}

// How a session chose its candidates, in words ("guided: 37 of 148 legal candidates in 4 rounds (budget spent),
// seeds: 3 from other devices, 2 nearby shapes"); empty for an exhaustive session (it tried every legal config).
std::string search_summary(const tuner::TuneReport& r) {
  if (r.strategy == tuner::Strategy::kExhaustive) return {};
  std::string out = std::string(tuner::strategy_name(r.strategy)) + ": " + std::to_string(r.candidates.size()) +
                    " of " + std::to_string(r.legal) + " legal candidates";
  if (r.strategy != tuner::Strategy::kGuided) return out;
  const std::size_t rounds = r.round_sizes.size();
  out += " in " + std::to_string(rounds) + (rounds == 1 ? " round" : " rounds");
  if (r.stopped == "budget") out += " (budget spent)";
  else if (r.stopped == "time") out += " (time limit reached)";
  else if (!r.stopped.empty()) out += " (" + r.stopped + " left)";
  std::string seeds;
  const auto add = [&](std::size_t n, const char* what) {
    if (n) seeds += (seeds.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(r.seeds.other_devices, "from other devices");
  add(r.seeds.this_problem, "from an earlier tuning here");
  add(r.seeds.nearby_shapes, "nearby shapes");
  return out + ", seeds: " + (seeds.empty() ? "none" : seeds);
}

// A session's report in the --json output.
json report_json(const std::string& name, const tuner::TuneReport& r, const std::string& device) {
  json cands = json::array();
  for (const auto& c : r.candidates) cands.push_back(candidate_json(c));
  json retimed = json::array();
  for (const auto& [c, us] : r.retimed) retimed.push_back({{"config", c.text()}, {"us", us}});
  return {{"case", name},
          {"family", r.family},
          {"signature", r.signature},
          {"device", device},
          {"best", r.best.text()},
          {"best_us", r.best_us},
          {"best_spread", r.best_spread},
          {"heuristic", r.heuristic.text()},
          {"default_us", r.default_us},
          {"speedup_over_default", r.speedup()},
          {"retimed", retimed},
          {"bytes", r.bytes},
          {"strategy", tuner::strategy_name(r.strategy)},
          {"search", search_summary(r)},
          {"legal", r.legal},
          {"tried", r.candidates.size()},
          {"budget", r.budget},
          {"rounds", r.round_sizes.size()},
          {"round_sizes", r.round_sizes},
          {"seeds",
           {{"other_devices", r.seeds.other_devices},
            {"this_problem", r.seeds.this_problem},
            {"nearby_shapes", r.seeds.nearby_shapes}}},
          {"stopped", r.stopped},
          {"pruned", r.pruned},
          {"wall_s", r.wall_s},
          {"compile_s", r.compile_s},
          {"wait_compile_s", r.wait_compile_s},
          {"timing_s", r.timing_s},
          {"compile_reused", r.compile_reused},
          {"reference_s", r.reference_s},
          {"l2_mode", tuner::l2_mode_name(r.l2)},
          {"stored", r.stored},
          {"store_error", r.store_error},
          {"kept_default", r.kept_default},
          {"candidates", cands}};
}

// A single problem's report as text.
void print_report(const tuner::TuneReport& r, const std::string& device) {
  const std::string summary = tuner::status_counts(r.candidates);
  std::printf("%s %s on %s\n  best    %s  %.2f us (spread %.1f%%, %d reps)  %.1f GB/s\n"
              "  default %s  %.2f us  -> tuned is %.3fx the default\n"
              "  %zu candidates (%zu pruned):%s; %.2fs wall, %.2fs NVRTC (summed over threads), %.2fs CPU "
              "reference; timed %s%s\n",
              r.family.c_str(), r.signature.c_str(), device.c_str(), r.best.text().c_str(), r.best_us,
              r.best_spread * 100, r.best_reps, r.bytes / (r.best_us * 1e3), r.heuristic.text().c_str(),
              r.default_us, r.speedup(), r.candidates.size(), r.pruned, summary.c_str(), r.wall_s, r.compile_s,
              r.reference_s, std::string(tuner::l2_mode_name(r.l2)).c_str(), r.stored ? "; stored" : "");
  if (const std::string search = search_summary(r); !search.empty()) std::printf("  %s\n", search.c_str());
  if (!r.store_error.empty()) std::printf("  NOT STORED: %s\n", r.store_error.c_str());
  if (!r.kept_default.empty()) std::printf("  default kept: %s\n", r.kept_default.c_str());
}

// What a tune run produced so far: the suite table's rows, the JSON results, and the failed cases.
struct TuneOutput {
  std::vector<SuiteRow> rows;
  json results = json::array();
  int failures = 0;
};

// Tunes one case and records its report; false when the device context is lost (the run ends; stored results
// stay).
bool tune_case(const Common& common, const TuneArgs& args, Runtime& rt, const TuneJob& job, const Problem& problem,
               const std::string& name, tuner::TuneOptions opt, TuneOutput& output) {
  const auto& [f, signature] = job;
  ProgressPrinter progress{name};
  opt.on_progress = std::ref(progress);
  try {
    tuner::TuneReport r = tuner::tune(rt, *f, problem, opt);
    output.rows.push_back({name, std::string(f->name()), signature, r.best.text(), r.heuristic.text(), r.best_us,
                           r.default_us, r.bytes, r.wall_s, r.wait_compile_s, r.timing_s, r.reference_s,
                           r.candidates.size(), r.compile_reused, r.legal});
    if (common.json) {
      output.results.push_back(report_json(name, r, rt.device().name));
    } else if (args.suite.empty()) {
      print_report(r, rt.device().name);
    }
  } catch (const Error& e) {
    ++output.failures;
    std::fprintf(stderr, "jitune tune %s: %s\n", name.c_str(), e.what());
    if (dynamic_cast<const CudaError*>(&e)) return false;
  }
  return true;
}

// Several sessions: while one times, the next one's kernels compile (CompilePrefetch) at a low CPU priority.
// Whether this build can serve `r`: its family is known and its template hash is its config's template's now (a
// record of a changed template is stale: ignored by lookups, listed as such, left out of `cache export --current`).
bool current_template(const cache::Record& r) {
  const Family* f = find_family(r.key.family);
  return f != nullptr && record_current(*f, r.key.template_hash, r.config);
}

// The template hashes whose measurements belong with record `r`: its own and its family's current ones.
std::vector<std::string> measured_templates(const cache::Record& r) {
  std::vector<std::string> hashes{r.key.template_hash};
  if (const Family* f = find_family(r.key.family))
    for (std::string& h : template_hashes(*f)) hashes.push_back(std::move(h));
  return hashes;
}

// Keeps the suite cases the caches do not serve exactly on the device (--missing); defined with Explainer below.
void keep_missing(const Common& common, std::vector<TuneJob>& jobs, std::vector<std::string>& names);

// With work claims (`claims` set), jobs[own...] are other shards' cases, and this process tunes only those nobody
// has claimed when its own shard is done: the prefetch compiles its own shard's cases and skips any another process
// has claimed (two --devices workers compiling each other's cases cost the host's NVRTC a fifth more CPU time:
// bench/RESULTS.md, 2026-11-28, seventeenth session).
std::unique_ptr<tuner::CompilePrefetch> start_prefetch(Runtime& rt, const TuneArgs& args,
                                                       const std::vector<TuneJob>& jobs,
                                                       const std::vector<std::shared_ptr<const Problem>>& problems,
                                                       const std::shared_ptr<tuner::CompileMemo>& memo,
                                                       const std::shared_ptr<const tuner::WorkClaims>& claims,
                                                       std::size_t own) {
  // A sample or a guided search compiles a small part of each space: compiling every space ahead would be waste.
  if (jobs.size() <= 1 || !args.configs.empty() || args.strategy != "exhaustive") return nullptr;
  std::vector<tuner::CompilePrefetch::Job> ahead;
  for (std::size_t j = 0; j < jobs.size(); ++j) ahead.push_back({jobs[j].first, problems[j]});
  std::function<bool(std::size_t)> skip;
  if (claims)
    skip = [claims, own, jobs](std::size_t j) {
      return j >= own || claims->claimed(std::string(jobs[j].first->name()), jobs[j].second);
    };
  return std::make_unique<tuner::CompilePrefetch>(internal::impl(rt).compiler, internal::impl(rt).device, *memo,
                                                  std::move(ahead), args.threads,
                                                  tune_options(args, memo).reject_spills, 1, std::move(skip));
}

}  // namespace

std::filesystem::path cache_path(const Common& c) {
  return c.cache.empty() ? default_cache_dir() / "tuning.sqlite" : std::filesystem::path(c.cache);
}

int devices(const Common& common) {
  const int n = device_count();
  json out = json::array();
  if (n == 0) {
    const std::string why = device_unavailable_reason();
    if (common.json) std::cout << json{{"devices", out}, {"reason", why}}.dump(2) << "\n";
    else std::printf("no CUDA device: %s\n", why.c_str());
    return kExitNoDevice;
  }
  for (int i = 0; i < n; ++i) {
    RuntimeOptions o = runtime_options(common);
    o.device = i;
    Runtime rt(o);
    const DeviceInfo& d = rt.device();
    if (common.json) {
      out.push_back({{"ordinal", i}, {"name", d.name}, {"arch", d.arch()}, {"sm_count", d.sm_count},
                     {"l2_bytes", d.l2_bytes}, {"memory_bytes", d.global_memory_bytes},
                     {"sm_clock_mhz", d.sm_clock_mhz}, {"memory_clock_mhz", d.memory_clock_mhz},
                     {"max_shared_per_block_optin", d.max_shared_per_block_optin},
                     {"driver_version", d.driver_version}, {"nvrtc_version", internal::impl(rt).compiler.nvrtc_version()}});
    } else {
      std::printf("%d: %s  %s  %d SMs  L2 %lld MiB  memory %.1f GiB  smem/block %d KiB  driver %d.%d  NVRTC %s\n", i,
                  d.name.c_str(), d.arch().c_str(), d.sm_count, static_cast<long long>(d.l2_bytes >> 20),
                  static_cast<double>(d.global_memory_bytes) / (1 << 30), d.max_shared_per_block_optin / 1024,
                  d.driver_version / 1000, d.driver_version % 1000 / 10, internal::impl(rt).compiler.nvrtc_version().c_str());
    }
  }
  if (common.json) std::cout << json{{"devices", out}}.dump(2) << "\n";
  return 0;
}

// Keeps the jobs (and names) of this process's shard; with --plan prints them and returns an exit code. With
// --claims the other shards' jobs follow this shard's `own` ones, in the order a thief takes them (claim_order).
std::optional<int> apply_shard(const Common& common, const TuneArgs& args, std::vector<TuneJob>& jobs,
                               std::vector<std::string>& names, std::size_t& own) {
  own = jobs.size();
  if (args.shard.empty() && !args.plan) return std::nullopt;
  const tuner::ShardSpec shard = args.shard.empty()
                                     ? tuner::ShardSpec{0, 1, "no --shard: the whole suite"}
                                     : tuner::parse_shard(args.shard, [](const char* n) { return std::getenv(n); });
  std::vector<tuner::WorkItem> items(jobs.size());
  // Each item's cost walks its family's whole space through check() (conv2d: about half a million configs a
  // case), so the host's cores share the items; the result does not depend on the order.
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(jobs.size());
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      try {
        const auto problem = jobs[i].first->parse_problem(jobs[i].second);
        items[i] = {std::string(jobs[i].first->name()), names[i], jobs[i].second,
                    tuner::estimated_cost(*jobs[i].first, *problem),
                    tuner::compile_affinity(*jobs[i].first, *problem)};
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::thread> pool;
    const std::size_t n =
        std::min<std::size_t>(jobs.size(), std::max(1u, std::thread::hardware_concurrency()));
    for (std::size_t t = 1; t < n; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  const std::vector<int> assigned = tuner::assign_shards(items, shard.count);
  std::vector<TuneJob> kept_jobs;
  std::vector<std::string> kept_names;
  json listed = json::array();
  double total = 0, mine = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    total += items[i].cost;
    if (assigned[i] != shard.index) continue;
    mine += items[i].cost;
    kept_jobs.push_back(jobs[i]);
    kept_names.push_back(names[i]);
    listed.push_back({{"family", items[i].family}, {"name", items[i].name}, {"signature", items[i].signature},
                      {"cost", items[i].cost}, {"affinity", hex64(hash64(items[i].affinity))}});
  }
  own = kept_jobs.size();
  if (!args.claims.empty() && !args.plan) {
    kept_jobs.clear();
    kept_names.clear();
    for (std::size_t i : tuner::claim_order(assigned, shard.index)) {
      kept_jobs.push_back(jobs[i]);
      kept_names.push_back(names[i]);
    }
  }
  jobs = std::move(kept_jobs);
  names = std::move(kept_names);
  char summary[512];
  std::snprintf(summary, sizeof summary, "shard %d of %d (%s): %zu of %zu work items, %.1f%% of the estimated cost\n",
                shard.index, shard.count, shard.source.c_str(), own, items.size(),
                total > 0 ? 100 * mine / total : 0.0);
  if (!args.plan) {
    std::fputs(summary, stderr);
    return std::nullopt;
  }
  if (common.json) {
    std::cout << json{{"shard", shard.index}, {"shards", shard.count}, {"source", shard.source},
                      {"items", listed},      {"total_items", items.size()}, {"cost", mine},
                      {"total_cost", total}}
                     .dump(2)
              << "\n";
  } else {
    std::fputs(summary, stdout);
    for (const auto& item : listed)
      std::printf("  %-18s %-46s cost %10.0f\n", item["family"].get<std::string>().c_str(),
                  item["name"].get<std::string>().c_str(), item["cost"].get<double>());
  }
  return 0;
}

int tune(const Common& common, const TuneArgs& args) {
  if (!args.devices.empty()) return tune_devices(common, args);
  std::vector<std::string> names;
  std::vector<TuneJob> jobs = tune_jobs(args, names);
  if (args.missing) {
    keep_missing(common, jobs, names);
    if (jobs.empty() && !args.plan) return 0;  // said why; nothing to tune
  }
  std::size_t own = 0;  // jobs[own...] belong to other shards: tuned only where this worker claims them
  if (const auto planned = apply_shard(common, args, jobs, names, own)) return *planned;
  if (!args.claims.empty() && args.shard.empty())
    throw InvalidArgument("jitune tune: --claims shares the work of several --shard processes; give --shard i/N too");
  if (args.dry_run) return run_dry(common, args, jobs, own);
  if (device_count() == 0) {
    std::fprintf(stderr,
                 "jitune tune: no GPU here (%s). Tuning needs a CUDA device; 'jitune tune ... --dry-run' compiles the "
                 "whole space with NVRTC and reports registers and spills instead.\n",
                 device_unavailable_reason().c_str());
    return kExitNoDevice;
  }
  Runtime rt(runtime_options(common));
  const auto t0 = std::chrono::steady_clock::now();
  const double copy_gbs = args.suite.empty() ? 0.0 : tuner::copy_bandwidth_gbs(rt);
  TuneOutput output;
  // Problems of one family often instantiate the same kernels (the shape is a launch argument): compile them once.
  auto memo = std::make_shared<tuner::CompileMemo>();
  if (!args.compile_share.empty()) memo->share(std::make_shared<tuner::SharedCompiles>(args.compile_share));
  std::vector<std::shared_ptr<const Problem>> problems;
  for (const auto& [f, signature] : jobs) problems.push_back(f->parse_problem(signature));
  std::shared_ptr<tuner::WorkClaims> claims;
  if (!args.claims.empty()) claims = std::make_shared<tuner::WorkClaims>(args.claims);
  std::unique_ptr<tuner::CompilePrefetch> prefetch = start_prefetch(rt, args, jobs, problems, memo, claims, own);
  // While one session times, the next one's worker builds the workload and reference (prepare_session).
  std::shared_ptr<tuner::PreparedSession> prepared;
  std::size_t own_tuned = 0, others_tuned = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const std::string family(jobs[j].first->name());
    if (claims && !claims->claim(family, jobs[j].second)) {
      prepared.reset();  // it was built for this job, which another worker tunes
      continue;
    }
    ++(j < own ? own_tuned : others_tuned);
    tuner::TuneOptions opt = tune_options(args, memo);
    if (prefetch) prefetch->starting(j);
    opt.prepared = std::move(prepared);
    if (j + 1 < jobs.size() &&
        !(claims && claims->claimed(std::string(jobs[j + 1].first->name()), jobs[j + 1].second))) {
      try {
        prepared = tuner::prepare_session(rt, *jobs[j + 1].first, problems[j + 1], tune_options(args, memo));
      } catch (const Error&) {
        prepared.reset();  // the session itself starts its worker, and reports what is wrong
      }
    }
    const bool go_on = tune_case(common, args, rt, jobs[j], *problems[j], names[j], std::move(opt), output);
    if (claims) claims->done(family, jobs[j].second);
    if (!go_on) break;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::size_t ahead_units = prefetch ? prefetch->units() : 0;
  const double ahead_s = prefetch ? prefetch->compile_seconds() : 0.0;
  prefetch.reset();
  const std::string& device = rt.device().name;
  json shared = nullptr;
  if (const tuner::SharedCompiles* s = memo->shared()) {
    shared = {{"compiled_here", s->compiled()}, {"read_back", s->read_back()}};
    std::fprintf(stderr, "shared compiles (%s): %zu programs compiled here, %zu read back (compiled by another worker)\n",
                 s->dir().c_str(), s->compiled(), s->read_back());
  }
  json claimed = nullptr;
  if (claims) {
    claimed = {{"own_items", own}, {"own_tuned", own_tuned}, {"others_tuned", others_tuned},
               {"taken_over", claims->taken_over()}};
    std::fprintf(stderr,
                 "work claims (%s): %zu of this shard's %zu items tuned here, %zu of other shards'; %zu claims taken "
                 "over from a worker that died\n",
                 claims->dir().c_str(), own_tuned, own, others_tuned, claims->taken_over());
  }
  if (common.json) {
    std::cout << json{{"device", device},           {"copy_gbs", copy_gbs},        {"wall_s", wall},
                      {"ahead_units", ahead_units}, {"ahead_nvrtc_s", ahead_s}, {"results", output.results},
                      {"shared_compiles", shared},  {"claims", claimed}}
                     .dump(2)
              << "\n";
    // The JSON owns stdout; the people watching still get the table.
    if (!args.suite.empty())
      print_suite_table(stderr, args.suite, args.strategy, device, copy_gbs, wall, output.rows, ahead_units, ahead_s);
  } else if (!args.suite.empty()) {
    print_suite_table(stdout, args.suite, args.strategy, device, copy_gbs, wall, output.rows, ahead_units, ahead_s);
  }
  return output.failures ? kExitError : 0;
}

namespace {

// The caches a runtime would read, opened read-only: the user cache when it exists, then the shipped ones (unless
// --no-shipped). A cache that does not exist yet is a note, not an error (a fresh machine has none).
struct ReadOnlyStores {
  std::vector<std::unique_ptr<cache::Store>> owned;
  std::vector<const cache::Store*> view;
  std::vector<std::string> notes;
};

ReadOnlyStores open_read_only_stores(const Common& common) {
  ReadOnlyStores s;
  const std::filesystem::path user = cache_path(common);
  std::error_code ec;
  if (std::filesystem::exists(user, ec)) s.owned.push_back(std::make_unique<cache::Store>(user, cache::OpenMode::kReadOnly));
  else s.notes.push_back("user cache " + user.string() + ": none yet (jitune tune writes it)");
  if (!common.no_shipped)
    for (const auto& p : builtin_shipped_caches()) {
      try {
        s.owned.push_back(std::make_unique<cache::Store>(p, cache::OpenMode::kReadOnly));
      } catch (const StoreError& e) {
        s.notes.push_back(std::string("shipped cache skipped: ") + e.what());
      }
    }
  for (const auto& store : s.owned) s.view.push_back(store.get());
  return s;
}

// Without a GPU: the device --device-name names (or the only one the caches hold), with the compute capability and
// SM count of its records on nominal figures of its architecture.
DeviceInfo offline_device(const Common& common, const std::vector<const cache::Store*>& stores) {
  std::map<std::string, std::pair<int, int>> devices;  // name -> (cc, sm_count)
  for (const cache::Store* store : stores)
    for (const auto& r : store->records()) devices.emplace(r.key.device_name, std::make_pair(r.key.cc, r.key.sm_count));
  std::string names;
  for (const auto& [name, facts] : devices) names += (names.empty() ? "'" : ", '") + name + "'";
  std::string name = common.device_name;
  if (name.empty()) {
    if (devices.size() != 1)
      throw InvalidArgument(devices.empty()
                                ? "no GPU and no tuned records to explain from; run on a GPU, or import records"
                                : "no GPU: name the device to explain for with --device-name (the caches hold " +
                                      names + ")");
    name = devices.begin()->first;
  }
  const auto found = devices.find(name);
  if (found == devices.end())
    throw InvalidArgument("no tuned record for device '" + name + "' in the caches" +
                          (names.empty() ? std::string() : " (they hold " + names + ")"));
  DeviceInfo device = nominal_device(found->second.first);
  device.name = name;
  device.sm_count = found->second.second;
  device.ordinal = -1;
  return device;
}

// explain's answers: the runtime's on a GPU; without one (or with --device-name) the dispatcher's own search over
// the caches, for the named device.
class Explainer {
 public:
  explicit Explainer(const Common& common) {
    if (common.device_name.empty() && device_count() > 0) {
      runtime_ = std::make_unique<Runtime>(runtime_options(common));
      device_ = runtime_->device().name;
      return;
    }
    stores_ = open_read_only_stores(common);
    device_info_ = offline_device(common, stores_.view);
    compiler_ = std::make_unique<Compiler>();  // only offline: a runtime has its own
    device_ = device_info_.name + " (from its tuned records, without a GPU)";
  }
  Explanation explain(const Family& family, const std::string& signature) {
    if (runtime_) return runtime_->explain(family.name(), signature);
    const auto problem = family.parse_problem(signature);
    Explanation x =
        lookup_decision(family, *problem, device_info_, compiler_->nvrtc_version(), stores_.view).explanation;
    x.notes.insert(x.notes.begin(), stores_.notes.begin(), stores_.notes.end());
    return x;
  }
  const std::string& device() const noexcept { return device_; }
  /// The architecture kernels are compiled for ("sm_90").
  std::string arch() const { return runtime_ ? runtime_->device().arch() : device_info_.arch(); }
  /// The device's facts: the GPU's, or without one those of the named device's records.
  DeviceInfo device_info() const { return runtime_ ? runtime_->device() : device_info_; }
  /// Where a runtime keeps compiled kernels: its binary folder (on a GPU), else <user cache folder>/kernels.
  std::filesystem::path binary_folder(const Common& common) const {
    if (runtime_) return runtime_->options().binary_cache_dir;
    return cache_path(common).parent_path() / "kernels";
  }

 private:
  std::unique_ptr<Runtime> runtime_;
  ReadOnlyStores stores_;
  DeviceInfo device_info_;
  std::unique_ptr<Compiler> compiler_;  // offline: NVRTC's version is part of a record's key
  std::string device_;
};

void keep_missing(const Common& common, std::vector<TuneJob>& jobs, std::vector<std::string>& names) {
  if (common.device_name.empty() && device_count() == 0)
    throw NoDevice("jitune tune --missing: which cases are missing depends on the GPU, and there is none here (" +
                   device_unavailable_reason() + "); run it on the GPU, or list them for a device with --plan "
                   "--device-name NAME");
  Explainer explainer(common);
  std::vector<TuneJob> kept_jobs;
  std::vector<std::string> kept_names;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (explainer.explain(*jobs[i].first, jobs[i].second).level == MatchLevel::kExact) continue;
    kept_jobs.push_back(jobs[i]);
    kept_names.push_back(names[i]);
  }
  std::fprintf(stderr, "--missing: %zu of %zu cases are not served exactly on %s%s\n", kept_jobs.size(), jobs.size(),
               explainer.device().c_str(), kept_jobs.empty() ? ": nothing to tune" : "");
  jobs = std::move(kept_jobs);
  names = std::move(kept_names);
}

}  // namespace

int explain(const Common& common, const std::string& family_name, const std::map<std::string, std::string>& options,
            const std::string& signature) {
  const Family& f = family(family_name);
  const std::string sig = make_problem(f, options, signature)->signature();
  Explainer explainer(common);
  Explanation x = explainer.explain(f, sig);
  if (common.json) {
    std::cout << json{{"family", x.family}, {"signature", x.signature}, {"config", x.config},
                      {"level", match_level_name(x.level)}, {"source", x.source},
                      {"matched_signature", x.matched_signature}, {"matched_device", x.matched_device},
                      {"time_us", x.time_us}, {"default_time_us", x.default_time_us},
                      {"heuristic_config", x.heuristic_config}, {"device", explainer.device()}, {"notes", x.notes}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("%s %s on %s\n  config    %s\n  level     %s\n  source    %s\n", x.family.c_str(), x.signature.c_str(),
              explainer.device().c_str(), x.config.c_str(), std::string(match_level_name(x.level)).c_str(),
              x.source.c_str());
  if (x.level != MatchLevel::kHeuristic) {
    std::printf("  matched   %s on %s\n", x.matched_signature.c_str(), x.matched_device.c_str());
    std::printf("  time      %.2f us (heuristic default %s: %.2f us, %.3fx)\n", x.time_us, x.heuristic_config.c_str(),
                x.default_time_us, x.time_us > 0 ? x.default_time_us / x.time_us : 0.0);
  }
  for (const auto& n : x.notes) std::printf("  note      %s\n", n.c_str());
  return 0;
}

int explain_suite(const Common& common) {
  Explainer explainer(common);
  json out = json::array();
  std::map<std::string, int> levels;
  if (!common.json)
    std::printf("%-42s %-18s %-44s %s\n", "case", "level", "config", "source");
  for (const Family* f : families())
    for (const auto& [name, signature] : f->default_suite()) {
      Explanation x = explainer.explain(*f, signature);
      ++levels[std::string(match_level_name(x.level))];
      if (common.json)
        out.push_back({{"case", name}, {"family", x.family}, {"signature", x.signature}, {"config", x.config},
                       {"level", match_level_name(x.level)}, {"source", x.source}, {"time_us", x.time_us}});
      else
        std::printf("%-42s %-18s %-44s %s\n", name.c_str(), std::string(match_level_name(x.level)).c_str(),
                    x.config.c_str(), x.source.c_str());
    }
  if (common.json) {
    std::cout << json{{"device", explainer.device()}, {"cases", out}}.dump(2) << "\n";
  } else {
    std::string summary;
    for (auto& [level, n] : levels) summary += " " + level + "=" + std::to_string(n);
    std::printf("%s:%s\n", explainer.device().c_str(), summary.c_str());
  }
  return 0;
}

namespace {

// One kernel warmup compiles: a suite case's decided config, for one architecture.
struct WarmupJob {
  std::string case_name, family, config, level, arch, key;
  KernelSource source;
  bool cached = false;   // already in the folder
  double seconds = 0;    // NVRTC
  std::string error;
};

// Every device the caches name, each as a Common that explains for it without a GPU.
std::vector<Common> offline_devices(const Common& common) {
  const ReadOnlyStores stores = open_read_only_stores(common);
  std::set<std::string> names;
  for (const cache::Store* store : stores.view)
    for (const auto& r : store->records()) names.insert(r.key.device_name);
  if (names.empty()) throw InvalidArgument("jitune warmup --all-devices: the caches hold no tuned records");
  std::vector<Common> out;
  for (const std::string& name : names) {
    Common c = common;
    c.device_name = name;
    out.push_back(c);
  }
  return out;
}

}  // namespace

int warmup(const Common& common, const WarmupArgs& args) {
  for (const std::string& name : args.only_families) family(name);  // an unknown name: the family list
  std::vector<Common> targets = args.all_devices ? offline_devices(common) : std::vector<Common>{common};
  std::vector<WarmupJob> jobs;
  std::filesystem::path folder = args.into;
  std::set<std::string> keys;
  Compiler compiler;
  for (const Common& target : targets) {
    Explainer explainer(target);
    if (folder.empty()) folder = explainer.binary_folder(target);
    for (const Family* f : families()) {
      if (!args.only_families.empty() &&
          std::find(args.only_families.begin(), args.only_families.end(), f->name()) == args.only_families.end())
        continue;
      for (const auto& [name, signature] : f->default_suite()) {
        const Explanation x = explainer.explain(*f, signature);
        WarmupJob job;
        job.case_name = name;
        job.family = f->name();
        job.config = x.config;
        job.level = match_level_name(x.level);
        job.arch = explainer.arch();
        const auto problem = f->parse_problem(signature);
        const Config config = Config::parse(x.config);
        // The steps of a call of several kernels (Family::steps) are warmed with it, as "<case> step <i>".
        std::vector<StepKernel> steps = f->steps(*problem, config, explainer.device_info());
        job.source = f->source(*problem, config);
        for (std::size_t i = 0; i <= steps.size(); ++i) {
          WarmupJob one = job;
          if (i > 0) {
            one.case_name += " step " + std::to_string(i - 1);
            one.source = std::move(steps[i - 1].source);
          }
          one.key = compiler.binary_key(one.source.program, one.source.name_expression, one.arch);
          if (keys.insert(one.key).second)
            jobs.push_back(std::move(one));  // two cases, one kernel: compiled once
        }
      }
    }
  }
  BinaryCache binaries(folder);
  if (std::string note = binaries.untrusted_note(); !note.empty())
    throw InvalidArgument("jitune warmup: " + note);
  for (WarmupJob& job : jobs) job.cached = binaries.get(job.key).has_value();
  // NVRTC on every core (it is thread-safe); each thread takes the next job.
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < jobs.size(); i = next++) {
      WarmupJob& job = jobs[i];
      if (job.cached) continue;
      try {
        CompiledProgram out = compiler.compile(job.source.program, {job.source.name_expression}, job.arch, false);
        job.seconds = out.seconds;
        if (!out.ok) {
          job.error = "NVRTC could not compile it: " + out.log;
          continue;
        }
        binaries.put(job.key, CachedBinary{std::move(out.cubin), out.lowered.at(0)});
      } catch (const std::exception& e) {
        job.error = e.what();
      }
    }
  };
  const unsigned threads = args.threads ? args.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  std::size_t compiled = 0, cached = 0, failed = 0;
  double nvrtc = 0;
  json out = json::array();
  for (const WarmupJob& job : jobs) {
    (job.cached ? cached : job.error.empty() ? compiled : failed) += 1;
    nvrtc += job.seconds;
    const std::string state = job.cached ? "cached" : job.error.empty() ? "compiled" : "failed";
    if (common.json)
      out.push_back({{"case", job.case_name}, {"family", job.family}, {"config", job.config}, {"level", job.level},
                     {"arch", job.arch}, {"state", state}, {"nvrtc_s", job.seconds}, {"error", job.error}});
    else if (!args.quiet || !job.error.empty())
      std::printf("%-42s %-7s %-9s %-8s %6.0f ms  %s%s\n", job.case_name.c_str(), job.arch.c_str(), job.level.c_str(),
                  state.c_str(), job.seconds * 1000.0, job.config.c_str(),
                  job.error.empty() ? "" : ("\n  " + job.error).c_str());
  }
  const std::string write_error = binaries.last_write_error();
  if (common.json) {
    std::cout << json{{"folder", folder.string()}, {"kernels", out}, {"compiled", compiled}, {"cached", cached},
                      {"failed", failed}, {"nvrtc_s", nvrtc}, {"write_error", write_error}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%zu kernels in %s: %zu compiled (%.1f s of NVRTC), %zu already there, %zu failed\n", jobs.size(),
                folder.c_str(), compiled, nvrtc, cached, failed);
    if (!write_error.empty()) std::printf("  not written: %s\n", write_error.c_str());
  }
  return failed == 0 && write_error.empty() ? 0 : kExitError;
}

namespace {

json record_json(const cache::Record& r) { return json::parse(cache::to_json_line(r)); }

void print_report(const cache::ImportReport& rep, const Common& common) {
  if (common.json) {
    json issues = json::array();
    for (const auto& i : rep.issues) issues.push_back({{"line", i.line}, {"message", i.message}});
    std::cout << json{{"added", rep.added}, {"replaced", rep.replaced}, {"kept", rep.kept}, {"rejected", rep.rejected},
                      {"issues", issues}}
                     .dump(2)
              << "\n";
    return;
  }
  std::printf("%zu added, %zu replaced by faster records, %zu kept (the stored record stays), %zu rejected\n",
              rep.added, rep.replaced, rep.kept, rep.rejected);
  for (const auto& i : rep.issues) std::printf("  %s\n", i.message.c_str());  // each starts "line N: " where it has one
}

}  // namespace

int cache_list(const Common& common, const std::string& family_name) {
  // What a runtime reads: the user cache (when it exists) and the shipped caches (unless --no-shipped).
  const ReadOnlyStores stores = open_read_only_stores(common);
  json out = json::array();
  for (const std::string& note : stores.notes)
    if (!common.json) std::printf("# %s\n", note.c_str());
  for (const cache::Store* store : stores.view) {
    if (!common.json) {
      std::printf("# %s\n%-12s %-48s %-26s %-36s %10s %8s\n", store->path().c_str(), "family", "signature", "device",
                  "config", "time us", "speedup");
    }
    for (const auto& r : store->records()) {
      if (!family_name.empty() && r.key.family != family_name) continue;
      const bool stale = find_family(r.key.family) && !current_template(r);
      if (common.json) {
        json j = record_json(r);
        j["stale"] = stale;
        j["source"] = store->path().string();
        out.push_back(j);
      } else {
        std::printf("%-12s %-48s %-26s %-36s %10.2f %7.3fx%s\n", r.key.family.c_str(), r.key.signature.c_str(),
                    r.key.device_name.c_str(), r.config.c_str(), r.time_us,
                    r.time_us > 0 ? r.default_time_us / r.time_us : 0.0, stale ? "  (stale template: ignored)" : "");
      }
    }
  }
  if (common.json) std::cout << out.dump(2) << "\n";
  return 0;
}

int cache_show(const Common& common, const std::string& family_name, const std::map<std::string, std::string>& options,
               const std::string& signature) {
  const Family& f = family(family_name);
  const std::string sig = make_problem(f, options, signature)->signature();
  cache::Store store(cache_path(common), cache::OpenMode::kReadOnly);
  json out = json::array();
  for (const auto& r : store.records()) {
    if (r.key.family != family_name || r.key.signature != sig) continue;
    auto ms = store.measurements(r.key, measured_templates(r));
    if (common.json) {
      json j = record_json(r);
      json mj = json::array();
      for (const auto& m : ms)
        mj.push_back({{"config", m.config}, {"status", m.status}, {"reason", m.reason}, {"time_us", m.time_us},
                      {"spread", m.spread}, {"reps", m.reps}});
      j["measurements"] = mj;
      out.push_back(j);
      continue;
    }
    std::printf("%s %s on %s (sm_%d, %d SMs, NVRTC %s, template %s)\n  winner %s %.2f us, default %s %.2f us, tuned "
                "%s by jitune %s\n",
                r.key.family.c_str(), r.key.signature.c_str(), r.key.device_name.c_str(), r.key.cc, r.key.sm_count,
                r.key.nvrtc_version.c_str(), r.key.template_hash.c_str(), r.config.c_str(), r.time_us,
                r.default_config.c_str(), r.default_time_us, r.created_at.c_str(), r.jitune_version.c_str());
    if (!r.host.empty() || !r.shard.empty() || r.memory_mb > 0)
      std::printf("  tuned on %s%s; that GPU: %s MiB, SM clock %s MHz, memory clock %s MHz\n",
                  r.host.empty() ? "an unrecorded host" : r.host.c_str(),
                  r.shard.empty() ? "" : (" as shard " + r.shard).c_str(),
                  r.memory_mb > 0 ? std::to_string(r.memory_mb).c_str() : "?",
                  r.sm_clock_mhz > 0 ? std::to_string(r.sm_clock_mhz).c_str() : "?",
                  r.memory_clock_mhz > 0 ? std::to_string(r.memory_clock_mhz).c_str() : "?");
    for (const auto& m : ms)
      std::printf("  %-40s %-18s %10s %s\n", m.config.c_str(), m.status.c_str(),
                  m.time_us > 0 ? fmt("%.2f", m.time_us).c_str() : "-",
                  m.reason.substr(0, m.reason.find('\n')).substr(0, 100).c_str());
  }
  if (common.json) std::cout << out.dump(2) << "\n";
  else if (out.empty() && store.records().empty()) std::printf("no records in %s\n", store.path().c_str());
  return 0;
}

int cache_export(const Common& common, const std::string& file, bool replace_symlink, bool current_only) {
  cache::Store store(cache_path(common), cache::OpenMode::kReadOnly);
  std::vector<cache::Record> records = store.records();
  const std::size_t all = records.size();
  if (current_only)
    records.erase(std::remove_if(records.begin(), records.end(), [](const cache::Record& r) { return !current_template(r); }),
                  records.end());
  cache::write_jsonl(file, records, replace_symlink);
  const std::size_t left_out = all - records.size();
  if (common.json)
    std::cout << json{{"exported", records.size()}, {"left_out_stale", left_out}, {"from", store.path().string()},
                      {"to", file}}
                     .dump(2)
              << "\n";
  else
    std::printf("exported %zu records from %s to %s%s\n", records.size(), store.path().c_str(), file.c_str(),
                current_only ? (" (" + std::to_string(left_out) + " of a changed template or an unknown family left "
                                "out)").c_str()
                             : "");
  return 0;
}

int cache_import(const Common& common, const std::string& file, bool trust) {
  cache::Store store(cache_path(common), cache::OpenMode::kReadWrite);
  auto rep = store.import_jsonl(file, check_with_registry, trust);
  print_report(rep, common);
  return rep.rejected ? kExitError : 0;
}

namespace {

// A private scratch folder (mkdtemp, removed with everything in it).
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::error_code ec;
    std::string pattern = (std::filesystem::temp_directory_path(ec) / "jitune-import-XXXXXX").string();
    if (ec || ::mkdtemp(pattern.data()) == nullptr)
      throw StoreError("jitune cache import --verify: cannot make a scratch folder in the temp directory (" +
                       std::string(std::strerror(errno)) + "); set TMPDIR to a writable folder");
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

bool same_device(const cache::RecordKey& key, const DeviceInfo& dev) {
  return key.device_name == dev.name && key.cc == dev.cc() && key.sm_count == dev.sm_count;
}

// Measured against claimed: a claim this much faster than what this GPU does is reported as not reproduced.
constexpr double kClaimTolerance = 1.25;

}  // namespace

int cache_import_verified(const Common& common, const std::string& file) {
  Runtime rt(runtime_options(common));
  Runtime::Impl& impl = internal::impl(rt);
  if (!impl.user_store || impl.user_store->read_only())
    throw StoreError("jitune cache import --verify needs a writable user cache (" +
                     impl.options.user_cache.string() + ")");
  const DeviceInfo& dev = rt.device();
  // The file goes through the plain import's checks and limits into a scratch store first.
  ScratchDir scratch;
  cache::Store incoming(scratch.path / "incoming.sqlite", cache::OpenMode::kReadWrite);
  cache::ImportReport rep = incoming.import_jsonl(file, check_with_registry, /*trust=*/true);
  cache::Store others(scratch.path / "others.sqlite", cache::OpenMode::kReadWrite);
  json verified = json::array();
  int retimed = 0, not_reproduced = 0, failed = 0;
  for (const cache::Record& r : incoming.records()) {
    const Family& f = *find_family(r.key.family);  // check_with_registry accepted it: the family exists
    // Tuned on another GPU, or for another version of the family's template (a stale record: its signature and
    // config belong to that version): not re-timed here; the plain policy below decides.
    if (!same_device(r.key, dev) || !current_template(r)) {
      others.put(r);
      continue;
    }
    auto problem = f.parse_problem(r.key.signature);
    // The incoming config, side by side with the stored winner (if any) and the heuristic default, timed here.
    tuner::TuneOptions opt;
    opt.only_configs.push_back(Config::parse(r.config));
    const auto stored = impl.user_store->find_exact(r.key.family, template_hashes(f), r.key.signature,
                                                    r.key.device_name, r.key.cc, r.key.sm_count,
                                                    r.key.nvrtc_version);
    if (stored && stored->config != r.config && f.validate(*problem, Config::parse(stored->config), dev).empty())
      opt.only_configs.push_back(Config::parse(stored->config));
    try {
      const tuner::TuneReport t = tuner::tune(rt, f, *problem, opt);
      double incoming_us = 0;
      for (const auto& [c, us] : t.retimed)
        if (c.text() == r.config) incoming_us = us;
      const bool reproduced = incoming_us > 0 && incoming_us <= r.time_us * kClaimTolerance;
      ++retimed;
      not_reproduced += !reproduced;
      if (common.json) {
        verified.push_back({{"family", r.key.family}, {"signature", r.key.signature}, {"config", r.config},
                            {"claimed_us", r.time_us}, {"measured_us", incoming_us}, {"reproduced", reproduced},
                            {"stored_config", stored ? stored->config : ""}, {"winner", t.best.text()},
                            {"winner_us", t.best_us}, {"stored", t.stored}});
      } else {
        std::printf("%-12s %-44s %s claimed %.2f us, measured %.2f us%s -> %s %.2f us%s\n", r.key.family.c_str(),
                    r.key.signature.c_str(), r.config.c_str(), r.time_us, incoming_us,
                    reproduced ? "" : "  (claim not reproduced)", t.best.text().c_str(), t.best_us,
                    t.stored ? ", stored" : "");
      }
    } catch (const Error& e) {
      ++failed;
      std::fprintf(stderr, "jitune cache import --verify %s %s: %s\n", r.key.family.c_str(), r.key.signature.c_str(),
                   e.what());
    }
  }
  const cache::ImportReport rest = impl.user_store->merge_from(others, check_with_registry, /*trust=*/false);
  rep.added = rest.added;
  rep.replaced = rest.replaced;
  rep.kept = rest.kept;
  rep.issues.insert(rep.issues.end(), rest.issues.begin(), rest.issues.end());
  if (common.json) {
    json issues = json::array();
    for (const auto& i : rep.issues) issues.push_back({{"line", i.line}, {"message", i.message}});
    std::cout << json{{"verified", verified}, {"retimed", retimed}, {"not_reproduced", not_reproduced}, {"failed", failed},
                      {"device", dev.name}, {"other_devices", {{"added", rep.added}, {"kept", rep.kept}}},
                      {"rejected", rep.rejected}, {"issues", issues}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%d records of %s re-timed here (%d claims not reproduced, %d failed); records of other devices: ",
                retimed, dev.name.c_str(), not_reproduced, failed);
    std::printf("%zu added, %zu kept (the stored record stays); %zu rejected\n", rep.added, rep.kept, rep.rejected);
    for (const auto& i : rep.issues) std::printf("  %s\n", i.message.c_str());
  }
  return rep.rejected || failed ? kExitError : 0;
}

int cache_merge(const Common& common, const std::vector<std::string>& files, bool trust, double majority_noise) {
  std::vector<std::unique_ptr<cache::Store>> others;
  for (const std::string& file : files) others.push_back(std::make_unique<cache::Store>(file, cache::OpenMode::kReadOnly));
  cache::Store store(cache_path(common), cache::OpenMode::kReadWrite);
  cache::ImportReport rep;
  if (majority_noise >= 0) {
    std::vector<const cache::Store*> views;
    for (const auto& other : others) views.push_back(other.get());
    rep = store.merge_majority(views, check_with_registry, majority_noise);
  } else {
    for (const auto& other : others) {
      const cache::ImportReport one = store.merge_from(*other, check_with_registry, trust);
      rep.added += one.added, rep.replaced += one.replaced, rep.kept += one.kept, rep.rejected += one.rejected;
      rep.issues.insert(rep.issues.end(), one.issues.begin(), one.issues.end());
    }
  }
  print_report(rep, common);
  return rep.rejected ? kExitError : 0;
}

int cache_revalidate(const Common& common, const std::string& family_name, int runners_up) {
  Runtime rt(runtime_options(common));
  Runtime::Impl& impl = internal::impl(rt);
  if (!impl.user_store || impl.user_store->read_only())
    throw StoreError("jitune cache revalidate needs a writable user cache (" +
                     impl.options.user_cache.string() + ")");
  const DeviceInfo& dev = rt.device();
  json out = json::array();
  int changed = 0, checked = 0, skipped = 0, failed = 0;
  for (const cache::Record& r : impl.user_store->records()) {
    if (!family_name.empty() && r.key.family != family_name) continue;
    const Family* f = find_family(r.key.family);
    if (!f || r.key.device_name != dev.name || r.key.cc != dev.cc() || r.key.sm_count != dev.sm_count) {
      ++skipped;
      continue;
    }
    // A record this build cannot read any more (an old signature or config form) is reported and skipped: one
    // bad record never stops the others.
    try {
      ++checked;
      auto problem = f->parse_problem(r.key.signature);
      // The stored winner and the best runners-up measured with it, re-timed side by side with the default.
      tuner::TuneOptions opt;
      opt.only_configs.push_back(Config::parse(r.config));
      for (const cache::Measurement& m : impl.user_store->measurements(r.key, measured_templates(r))) {
        if (static_cast<int>(opt.only_configs.size()) > runners_up) break;
        if (m.status != "ok") continue;
        Config c = Config::parse(m.config);
        if (std::find(opt.only_configs.begin(), opt.only_configs.end(), c) == opt.only_configs.end() &&
            f->validate(*problem, c, dev).empty())
          opt.only_configs.push_back(c);
      }
      tuner::TuneReport t = tuner::tune(rt, *f, *problem, opt);
      const bool winner_changed = t.best.text() != r.config;
      changed += winner_changed;
      const bool stale = !current_template(r);
      if (common.json) {
        out.push_back({{"family", r.key.family}, {"signature", r.key.signature}, {"old_config", r.config},
                       {"old_us", r.time_us}, {"old_nvrtc", r.key.nvrtc_version}, {"new_config", t.best.text()},
                       {"new_us", t.best_us}, {"changed", winner_changed}, {"stale_template", stale}});
      } else {
        std::printf("%-12s %-50s %s %.2f us (NVRTC %s%s) -> %s %.2f us%s\n", r.key.family.c_str(),
                    r.key.signature.c_str(), r.config.c_str(), r.time_us, r.key.nvrtc_version.c_str(),
                    stale ? ", stale template" : "", t.best.text().c_str(), t.best_us,
                    winner_changed ? "  WINNER CHANGED" : "");
      }
    } catch (const Error& e) {
      ++failed;
      std::fprintf(stderr, "jitune cache revalidate %s %s: %s\n", r.key.family.c_str(),
                   r.key.signature.c_str(), e.what());
    }
  }
  if (common.json)
    std::cout << out.dump(2) << "\n";
  else
    std::printf(
        "%d records re-timed on %s (winner + up to %d runners-up each), %d winners changed, %d records of "
        "other devices left alone, %d could not be re-timed (above)\n",
        checked - failed, dev.name.c_str(), runners_up, changed, skipped, failed);
  return 0;
}

int cache_paths(const Common& common) {
  const std::filesystem::path user = cache_path(common);
  const InstalledFiles files = installed_files();
  std::vector<std::string> shipped, kernels;
  if (!common.no_shipped)
    for (const auto& p : files.shipped_caches) {
      shipped.push_back(p.string());
      std::error_code ec;
      const std::string dir = (p.parent_path() / "kernels").string();
      if (std::filesystem::is_directory(dir, ec) && std::find(kernels.begin(), kernels.end(), dir) == kernels.end())
        kernels.push_back(dir);
    }
  const std::string worker = files.worker.string(), note = default_cache_dir_note();
  if (common.json) {
    json out = {{"user_cache", user.string()}, {"shipped_caches", shipped}, {"shipped_kernels", kernels},
                {"worker", worker}};
    if (!note.empty()) out["note"] = note;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("user cache     %s\n", user.c_str());
  if (!note.empty()) std::printf("               (%s)\n", note.c_str());
  if (shipped.empty()) std::printf("shipped caches none found%s\n", common.no_shipped ? " (--no-shipped)" : "");
  for (std::size_t i = 0; i < shipped.size(); ++i)
    std::printf("%s%s\n", i == 0 ? "shipped caches " : "               ", shipped[i].c_str());
  for (std::size_t i = 0; i < kernels.size(); ++i)
    std::printf("%s%s\n", i == 0 ? "shipped kernels " : "                ", kernels[i].c_str());
  std::printf("worker         %s\n", worker.empty() ? "not found (tuning measures in-process only with --in-process)"
                                                     : worker.c_str());
  return 0;
}

}  // namespace jitune::cli
