// The tuning session. Compiles run on a thread pool while this thread verifies and times each compiled batch on the
// GPU, one candidate at a time, writing every verdict to the store as soon as it exists.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "cache/store.hpp"
#include "templates/sources.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/guided.hpp"
#include "tuner/measure.hpp"
#include "tuner/runner.hpp"
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

}  // namespace

std::string_view strategy_name(Strategy strategy) {
  switch (strategy) {
    case Strategy::kExhaustive: return "exhaustive";
    case Strategy::kRandom: return "random";
    case Strategy::kGuided: return "guided";
  }
  return "unknown";
}

std::vector<Config> legal_candidates(const Family& family, const Problem& problem, const DeviceInfo& device,
                                     std::size_t& pruned) {
  const Config heuristic = family.heuristic(problem, device);
  std::vector<Config> out;
  pruned = 0;
  if (family.validate(problem, heuristic, device).empty()) out.push_back(heuristic);
  family.space().for_each([&](const Config& c) {
    if (c == heuristic) return;
    if (family.check(problem, c, device).empty()) out.push_back(c);
    else ++pruned;
  });
  return out;
}

namespace {

std::uint64_t session_seed(const TuneOptions& opt) {
  return opt.seed ? opt.seed : static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
}

RunnerSettings runner_settings(const TuneOptions& opt, std::uint64_t seed, double cut_ratio) {
  return RunnerSettings{seed, opt.l2, opt.min_time_ms, opt.min_reps, opt.max_reps, opt.retime_reps,
                        cut_ratio, opt.candidate_timeout_s};
}

// The worker executable for `opt`, empty for in-process runs; throws when a worker is required but missing.
std::string session_worker(const TuneOptions& opt) {
  if (opt.isolation == TuneOptions::Isolation::kInProcess) return {};
  std::string worker = opt.worker.empty() ? find_worker() : opt.worker;
  if (!opt.worker.empty() && ::access(opt.worker.c_str(), X_OK) != 0)
    throw Error("the tuning worker '" + opt.worker + "' is not an executable file; build jitune-worker or leave "
                "TuneOptions::worker empty to find it");
  if (worker.empty() && opt.isolation == TuneOptions::Isolation::kWorker)
    throw Error("tuning in a worker process was requested but jitune-worker was not found; set JITUNE_WORKER to its "
                "path (it is built next to the jitune command)");
  return worker;
}

}  // namespace

PreparedSession::PreparedSession() = default;
PreparedSession::~PreparedSession() = default;

std::shared_ptr<PreparedSession> prepare_session(Runtime& runtime, const Family& family,
                                                 std::shared_ptr<const Problem> problem, const TuneOptions& opt) {
  if (!problem || !opt.only_configs.empty()) return nullptr;
  const std::string worker = session_worker(opt);
  if (worker.empty()) return nullptr;
  auto p = std::make_shared<PreparedSession>();
  p->family = std::string(family.name());
  p->signature = problem->signature();
  p->seed = session_seed(opt);
  p->problem = std::move(problem);
  p->runner = make_worker_runner(worker, internal::impl(runtime).device.ordinal, family, *p->problem,
                                 runner_settings(opt, p->seed, opt.cut_ratio));
  p->runner->prepare();
  return p;
}

namespace {

// One tune() call: the measurement protocol of DESIGN.md as named steps that fill one report, in this order:
// plan the candidates, start the runner and the compile pool, verify and time every compiled candidate (a guided
// search: round after round, each compiled on its own), re-time the finalists side by side, and keep the winner
// (binary cache and store).
class Session {
 public:
  Session(Runtime& runtime, const Family& family, const Problem& problem, const TuneOptions& opt)
      : runtime_(runtime),
        impl_(internal::impl(runtime)),
        device_(impl_.device),
        family_(family),
        problem_(problem),
        opt_(opt) {}

  TuneReport run();

 private:
  void plan_candidates();
  std::uint64_t take_prepared_and_sample();
  void plan_guided();
  std::vector<cache::Record> stored_neighbours() const;
  std::unique_ptr<CandidateRunner> start_runner(std::uint64_t seed);
  void time_candidates(CompilePool& pool, CandidateRunner& runner, std::size_t first);
  void time_batch(const CompiledBatch& batch, std::size_t first, CandidateRunner& runner);
  void search(CandidateRunner& runner);
  void report_progress();
  void finish(std::size_t i);
  std::vector<const Candidate*> pick_finalists();
  const Candidate* retime(CandidateRunner& runner, const std::vector<const Candidate*>& finalists);
  void cache_binaries(const std::vector<const Candidate*>& finalists, const Candidate* winner);
  void store_winner();

  const Clock::time_point start_ = Clock::now();
  Runtime& runtime_;
  Runtime::Impl& impl_;
  const DeviceInfo& device_;
  const Family& family_;
  const Problem& problem_;
  const TuneOptions& opt_;
  TuneReport report_;
  std::vector<Config> configs_;  // the candidates so far; a guided search appends each round
  std::size_t planned_ = 0;      // candidates the progress reports count towards
  std::unique_ptr<GuidedSearch> guided_;  // the guided strategy's plan; null for the others
  double cut_ratio_ = 0;
  int retime_top_ = 0;
  std::shared_ptr<PreparedSession> prepared_;
  cache::Store* store_ = nullptr;                  // null: results are not written (any more)
  std::vector<std::unique_ptr<Candidate>> timed_;  // verified and timed, for the re-timing
  double best_us_ = 0;
  std::size_t done_ = 0;
  std::size_t module_id_ = 0;  // one per compiled batch, across rounds
};

TuneReport Session::run() {
  driver::make_current(impl_.context);
  plan_candidates();
  const std::uint64_t seed = take_prepared_and_sample();
  if (opt_.strategy == Strategy::kGuided) plan_guided();
  planned_ = opt_.strategy == Strategy::kGuided ? report_.budget : configs_.size();
  // The workload and CPU reference are built (in the worker, or here) while NVRTC works: a worker starts on them
  // before the compile pool's probe (a prepared one started even earlier), and the wait for them that is left is
  // reference_s.
  std::unique_ptr<CandidateRunner> runner = start_runner(seed);
  runner->begin_setup();
  CompilePool pool(impl_.compiler, family_, problem_, configs_, device_.arch(), opt_.compile_threads,
                   opt_.reject_spills, opt_.compile_memo.get());
  const auto t_ref = Clock::now();
  report_.l2 = runner->setup();
  report_.reference_s = seconds_since(t_ref);

  store_ = opt_.store && impl_.user_store && !impl_.user_store->read_only() ? impl_.user_store.get() : nullptr;
  time_candidates(pool, *runner, 0);
  report_.compile_reused = pool.reused();
  if (guided_) search(*runner);
  const std::vector<const Candidate*> finalists = pick_finalists();
  const Candidate* winner = retime(*runner, finalists);
  cache_binaries(finalists, winner);
  store_winner();
  report_.wall_s = seconds_since(start_);
  return std::move(report_);
}

// The legal candidates, or with TuneOptions::only_configs just those and the default, all timed in full.
void Session::plan_candidates() {
  report_.family = std::string(family_.name());
  report_.signature = problem_.signature();
  report_.heuristic = family_.heuristic(problem_, device_);
  report_.bytes = problem_.bytes_moved();
  report_.space_size = family_.space().size();
  report_.strategy = opt_.strategy;
  if (opt_.time_budget_s > 0 && opt_.strategy != Strategy::kGuided)
    throw InvalidArgument("TuneOptions::time_budget_s bounds the rounds of the guided search; the " +
                          std::string(strategy_name(opt_.strategy)) +
                          " strategy times its whole list. Use Strategy::kGuided or leave time_budget_s at 0");
  if (opt_.strategy == Strategy::kGuided && !opt_.only_configs.empty())
    throw InvalidArgument("TuneOptions::only_configs times exactly the listed configs, which leaves the guided "
                          "search nothing to choose; use Strategy::kExhaustive with it");

  configs_ = legal_candidates(family_, problem_, device_, report_.pruned);
  cut_ratio_ = opt_.cut_ratio;
  retime_top_ = opt_.retime_top;
  if (!opt_.only_configs.empty()) {
    std::vector<Config> chosen{report_.heuristic};
    for (const Config& c : opt_.only_configs) {
      const std::string why = family_.validate(problem_, c, device_);
      if (!why.empty())
        throw InvalidArgument("config " + c.text() + " cannot run " + report_.signature + ": " + why);
      if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
    }
    report_.pruned = configs_.size() - std::min(configs_.size(), chosen.size());
    configs_ = std::move(chosen);
    cut_ratio_ = 1e30;  // every listed config is timed in full (finite: the settings travel to the worker as JSON)
    retime_top_ = static_cast<int>(configs_.size());
  }
  if (configs_.empty())
    throw InvalidArgument("no configuration of " + report_.family + " is legal for " + report_.signature);
  report_.legal = configs_.size();
}

// Takes over TuneOptions::prepared when it fits, and returns the session's seed; with the random strategy and a
// budget, keeps the default and a random sample of the other candidates.
std::uint64_t Session::take_prepared_and_sample() {
  // A prepared session is used only for what it was prepared for (and never with a config list: its settings
  // differ).
  prepared_ = opt_.prepared;
  if (prepared_ && (prepared_->family != report_.family || prepared_->signature != report_.signature ||
                    !prepared_->runner || !opt_.only_configs.empty()))
    prepared_.reset();
  const std::uint64_t seed = prepared_ ? prepared_->seed : session_seed(opt_);
  if (opt_.strategy == Strategy::kRandom && opt_.budget > 0 && configs_.size() > opt_.budget) {
    report_.budget = opt_.budget;
    const bool has_default = configs_.front() == report_.heuristic;
    std::mt19937_64 rng(seed);
    std::shuffle(configs_.begin() + (has_default ? 1 : 0), configs_.end(), rng);
    configs_.resize(std::max<std::size_t>(opt_.budget, 1));
  }
  return seed;
}

// Round 0 of the guided search: the first legal config (the heuristic default when it is legal) and the best few
// stored winners of nearby problems (rank_seeds), within the budget. The legal configs stay for the later rounds.
void Session::plan_guided() {
  const std::set<Config> legal(configs_.begin(), configs_.end());
  guided_ = std::make_unique<GuidedSearch>(
      family_.space(), configs_, opt_.budget, opt_.time_budget_s,
      rank_seeds(stored_neighbours(), report_.signature, problem_.features(), device_.name, legal));
  report_.budget = guided_->budget();
  for (const Seed& s : guided_->seeds()) {
    if (s.other_device) ++report_.seeds.other_devices;
    else if (s.same_signature) ++report_.seeds.this_problem;
    else ++report_.seeds.nearby_shapes;
  }
  configs_ = guided_->first_round();
}

// Stored winners of this family, template and group: on this device (nearby shapes, or this problem tuned before)
// and on other devices of this compute capability, from the user cache and the shipped ones.
std::vector<cache::Record> Session::stored_neighbours() const {
  const std::vector<std::string> hashes = template_hashes(family_);
  const std::string group = problem_.group();
  std::vector<const cache::Store*> stores;
  if (impl_.user_store) stores.push_back(impl_.user_store.get());
  for (const auto& s : impl_.shipped_stores) stores.push_back(s.get());
  std::vector<cache::Record> out;
  for (const cache::Store* s : stores) {
    try {
      std::vector<cache::Record> found = s->find_group(std::string(family_.name()), hashes, group, device_.name,
                                                       device_.cc(), device_.sm_count);
      for (auto& r : s->find_same_arch(std::string(family_.name()), hashes, group, device_.cc(), device_.name))
        found.push_back(std::move(r));
      for (auto& r : found)
        if (record_current(family_, r.key.template_hash, r.config)) out.push_back(std::move(r));
    } catch (const Error&) {
      // A store that cannot be read only costs the seeds it held: the search still starts from the default.
    }
  }
  return out;
}

// The prepared session's runner, a new worker, or this process.
std::unique_ptr<CandidateRunner> Session::start_runner(std::uint64_t seed) {
  const RunnerSettings settings = runner_settings(opt_, seed, cut_ratio_);
  const std::string worker = prepared_ ? std::string() : session_worker(opt_);
  report_.isolated = prepared_ || !worker.empty();
  if (prepared_) return std::move(prepared_->runner);
  if (report_.isolated) return make_worker_runner(worker, device_.ordinal, family_, problem_, settings);
  return make_in_process_runner(runtime_, family_, problem_, settings);
}

// Verifies and times candidates [first, configs_.size()) batch by batch, as NVRTC delivers them; `pool` compiles
// exactly those, and its batches count from `first`.
void Session::time_candidates(CompilePool& pool, CandidateRunner& runner, std::size_t first) {
  report_.candidates.resize(configs_.size());
  for (std::size_t i = first; i < configs_.size(); ++i) report_.candidates[i].config = configs_[i];
  auto t_wait = Clock::now();
  while (auto batch = pool.next()) {
    report_.wait_compile_s += seconds_since(t_wait);
    time_batch(*batch, first, runner);
    t_wait = Clock::now();
  }
  report_.wait_compile_s += seconds_since(t_wait);
  report_.compile_s += pool.compile_seconds();
}

void Session::time_batch(const CompiledBatch& batch, std::size_t first, CandidateRunner& runner) {
  const auto& out = batch.output;
  const std::size_t module_id = ++module_id_;
  for (std::size_t b = 0; b < batch.candidates.size(); ++b) {
    const std::size_t i = first + batch.candidates[b];
    CandidateResult& c = report_.candidates[i];
    if (!out->ok) {
      c.status = "compile_failed";
      c.reason = out->log;
      finish(i);
      continue;
    }
    c.resources = out->resources.at(batch.unit[b]);
    if (opt_.reject_spills && c.resources.spills()) {
      c.status = "resources_exceeded";
      c.reason = "spills " + std::to_string(c.resources.spill_store_bytes) + " bytes to local memory";
      finish(i);
      continue;
    }
    auto cand =
        std::make_unique<Candidate>(Candidate{i, configs_[i], out, module_id, out->lowered.at(batch.unit[b])});
    const KernelResources resources = c.resources;
    const auto t_run = Clock::now();
    // The heuristic default is never cut: its full time is what the winner is compared with and stored against.
    // (Candidates arrive in compile order, and kernels an earlier session compiled come first, so the default is
    // not always the first one timed.)
    c = runner.run(*cand, configs_[i] == report_.heuristic ? 0.0 : best_us_);
    report_.timing_s += seconds_since(t_run);
    c.resources = resources;
    if (c.status == "ok" && (best_us_ == 0 || c.time_us < best_us_)) best_us_ = c.time_us;
    if (c.status == "ok") timed_.push_back(std::move(cand));
    finish(i);
  }
}

// The guided search's later rounds (GuidedSearch::next_round), each compiled on its own and timed like the first.
void Session::search(CandidateRunner& runner) {
  while (true) {
    const std::vector<Config> round = guided_->next_round(seconds_since(start_));
    if (round.empty()) break;
    const std::size_t first = configs_.size();
    configs_.insert(configs_.end(), round.begin(), round.end());
    CompilePool pool(impl_.compiler, family_, problem_, round, device_.arch(), opt_.compile_threads,
                     opt_.reject_spills, opt_.compile_memo.get(), /*probe_first=*/false);
    time_candidates(pool, runner, first);
    report_.compile_reused += pool.reused();
  }
  report_.round_sizes = guided_->round_sizes();
  report_.stopped = guided_->stopped();
  // The search ended short of its plan: a last report with the total it reached, so a progress bar completes.
  if (done_ < planned_) {
    planned_ = done_;
    report_progress();
  }
}

// Candidate i has its verdict: write it to the store at once and report progress.
void Session::finish(std::size_t i) {
  const CandidateResult& c = report_.candidates[i];
  ++done_;
  if (guided_) guided_->record(c.config, c.status, c.time_us);
  if (store_) {
    cache::Measurement m{impl_.record_key(family_, problem_, c.config),
                         c.config.text(),
                         c.status,
                         clip(c.reason),
                         c.time_us,
                         c.spread,
                         c.reps,
                         cache::utc_now()};
    try {
      store_->put(m);
    } catch (const StoreError& e) {
      // Disk full or the file became read-only: keep tuning, stop writing, and say so.
      report_.store_error = e.what();
      store_ = nullptr;
    }
  }
  report_progress();
}

void Session::report_progress() {
  if (!opt_.on_progress) return;
  const std::size_t total = std::max(planned_, done_);
  Progress p{done_, total, best_us_, seconds_since(start_), 0};
  if (done_ > 0) p.eta_s = p.elapsed_s / static_cast<double>(done_) * static_cast<double>(total - done_);
  opt_.on_progress(p);
}

// The fastest few and the heuristic default; throws, with the first failure, when nothing verified.
std::vector<const Candidate*> Session::pick_finalists() {
  std::sort(timed_.begin(), timed_.end(), [&](const auto& a, const auto& b) {
    return report_.candidates[a->index].time_us < report_.candidates[b->index].time_us;
  });
  std::vector<const Candidate*> finalists;
  for (const auto& t : timed_)
    if (static_cast<int>(finalists.size()) < retime_top_ || t->config == report_.heuristic)
      finalists.push_back(t.get());
  if (!finalists.empty()) return finalists;
  std::string first_reason;
  for (const auto& c : report_.candidates)
    if (!c.reason.empty()) {
      first_reason = c.config.text() + ": " + clip(c.reason, 2000);
      break;
    }
  throw Error("tuning " + report_.family + " " + report_.signature + ": no candidate compiled and verified (" +
              status_counts(report_.candidates) + " ). First failure: " + first_reason);
}

// Why the default is kept over a winner that beat it only within the timing noise; empty when the gain is real.
// The rounds are paired (the default and the winner ran one after the other in each), so the default stays unless
// the median of default / winner per round exceeds 1 by more than that ratio's own noise (its interquartile range,
// at least 0.5%): a clock dip or a busy neighbour in a few rounds slows both and leaves the ratio alone. Kernels
// under 10 us are bound by the launch rate as much as by the kernel: there the same two binaries re-timed in
// another process moved by 2-4% (stability runs of the suite on the H100), so under 2% is not claimed either.
std::string default_kept_reason(const std::vector<double>& winner_rounds, const std::vector<double>& default_rounds,
                                double default_us, const Config& winner) {
  std::vector<double> ratio;
  for (std::size_t r = 0; r < std::min(winner_rounds.size(), default_rounds.size()); ++r)
    if (winner_rounds[r] > 0) ratio.push_back(default_rounds[r] / winner_rounds[r]);
  std::sort(ratio.begin(), ratio.end());
  const double gain = ratio.empty() ? 0.0 : median_spread(ratio).first - 1.0;
  const double iqr = ratio.empty() ? 0.0 : quantile_of_sorted(ratio, 0.75) - quantile_of_sorted(ratio, 0.25);
  constexpr double kShortKernelUs = 10.0, kShortKernelNoise = 0.02;
  const double noise = std::max({0.005, iqr, default_us < kShortKernelUs ? kShortKernelNoise : 0.0});
  if (gain > noise) return {};
  return winner.text() + " was only " + std::to_string(100.0 * gain) +
         "% faster (median of the per-round ratios), within the timing noise of " + std::to_string(100.0 * noise) +
         "%";
}

// Side by side: the finalists interleaved round by round so drift hits all alike; returns the winner.
const Candidate* Session::retime(CandidateRunner& runner, const std::vector<const Candidate*>& finalists) {
  const auto t_retime = Clock::now();
  const auto rounds = runner.retime(finalists);
  report_.timing_s += seconds_since(t_retime);
  // Counted after the re-timing: a worker that died on the last candidate is restarted there.
  report_.worker_restarts = runner.restarts();
  const Candidate* winner = nullptr;
  const Candidate* default_candidate = nullptr;
  std::size_t winner_at = 0, default_at = 0;
  double default_spread = 0;
  for (std::size_t f = 0; f < finalists.size(); ++f) {
    const auto [med, spread] = median_spread(rounds.at(f));
    report_.retimed.emplace_back(finalists[f]->config, med);
    if (finalists[f]->config == report_.heuristic) {
      report_.default_us = med;
      default_candidate = finalists[f];
      default_at = f;
      default_spread = spread;
    }
    if (!winner || med < report_.best_us) {
      winner = finalists[f];
      winner_at = f;
      report_.best_us = med;
      report_.best_spread = spread;
      report_.best_reps = opt_.retime_reps;
    }
  }
  if (default_candidate && winner != default_candidate) {
    report_.kept_default =
        default_kept_reason(rounds.at(winner_at), rounds.at(default_at), report_.default_us, winner->config);
    if (!report_.kept_default.empty()) {
      winner = default_candidate;
      report_.best_us = report_.default_us;
      report_.best_spread = default_spread;
    }
  }
  report_.best = winner->config;
  return winner;
}

// The winner's (and the default's) binaries go to the binary cache under their single-kernel keys, so the first
// call of a new process loads them without NVRTC.
void Session::cache_binaries(const std::vector<const Candidate*>& finalists, const Candidate* winner) {
  for (const Candidate* f : finalists)
    if (f == winner || f->config == report_.heuristic) {
      const KernelSource src = family_.source(problem_, f->config);
      impl_.binaries.put(impl_.compiler.binary_key(src.program, src.name_expression, device_.arch()),
                         CachedBinary{f->program->cubin, f->lowered});
    }
}

void Session::store_winner() {
  if (!store_) return;
  cache::Record rec;
  rec.key = impl_.record_key(family_, problem_, report_.best);
  rec.group = problem_.group();
  rec.features = problem_.features();
  rec.config = report_.best.text();
  rec.time_us = report_.best_us;
  rec.spread = report_.best_spread;
  rec.reps = report_.best_reps;
  rec.default_time_us = report_.default_us;
  rec.default_config = report_.heuristic.text();
  rec.jitune_version = JITUNE_VERSION;
  rec.driver_version = device_.driver_version;
  rec.created_at = cache::utc_now();
  rec.memory_mb = static_cast<int>(std::min<std::int64_t>(device_.global_memory_bytes >> 20, INT32_MAX));
  rec.sm_clock_mhz = device_.sm_clock_mhz;
  rec.memory_clock_mhz = device_.memory_clock_mhz;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) rec.host = host;
  rec.shard = opt_.shard;
  try {
    store_->put(rec);
    report_.stored = true;
  } catch (const StoreError& e) {
    report_.store_error = e.what();
  }
}

}  // namespace

std::string status_counts(const std::vector<CandidateResult>& candidates) {
  std::map<std::string, int> counts;
  for (const auto& c : candidates) ++counts[c.status];
  std::string summary;
  for (const auto& [status, n] : counts) summary += " " + status + "=" + std::to_string(n);
  return summary;
}

TuneReport tune(Runtime& runtime, const Family& family, const Problem& problem, const TuneOptions& opt) {
  return Session(runtime, family, problem, opt).run();
}

DryRunReport dry_run(const Compiler& compiler, const Family& family, const Problem& problem,
                     const DeviceInfo& device, unsigned threads, std::size_t budget, std::uint64_t seed) {
  const auto t0 = Clock::now();
  DryRunReport r;
  r.space_size = family.space().size();
  std::vector<Config> configs = legal_candidates(family, problem, device, r.pruned);
  if (budget > 0 && configs.size() > budget) {
    // The heuristic default (first) always stays; the rest is a random sample.
    std::mt19937_64 rng(seed ? seed : static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()));
    std::shuffle(configs.begin() + 1, configs.end(), rng);
    r.sampled_from = configs.size();
    configs.resize(budget);
  }
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
