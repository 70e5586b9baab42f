// The tuning session: family + problem + strategy -> verified, measured candidates written to the store as they
// come, the top few re-timed side by side, the winner stored with the heuristic default's time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <jitune/runtime.hpp>

#include "runtime/compiler.hpp"
#include "tuner/measure.hpp"
#include "templates/family.hpp"

namespace jitune::tuner {

/// How a session picks the candidates it times. kExhaustive: every legal config. kRandom: the heuristic default and
/// a random sample (TuneOptions::budget). kGuided: rounds that learn from what was timed: the default and seeds from
/// the stores (the same problem on other devices, nearby shapes), then the neighbours of the fastest so far
/// (tuner/guided.hpp), until the budget or TuneOptions::time_budget_s is spent or no untried neighbour is left.
enum class Strategy { kExhaustive, kRandom, kGuided };

/// "exhaustive", "random" or "guided".
std::string_view strategy_name(Strategy strategy);

class CompileMemo;      // tuner/compile_pool.hpp
class CandidateRunner;  // tuner/runner.hpp
struct PreparedSession;

/// Progress of a session, reported after each candidate.
struct Progress {
  std::size_t done = 0;       ///< Candidates finished (any status).
  std::size_t total = 0;      ///< Candidates to try.
  double best_us = 0;         ///< Best median so far (0 before the first).
  double elapsed_s = 0;
  double eta_s = 0;           ///< Estimated seconds left.
};

/// Measurement protocol settings (defaults follow DESIGN.md).
struct TuneOptions {
  Strategy strategy = Strategy::kExhaustive;
  /// kRandom and kGuided: candidates to try, the heuristic default included (0: kRandom tries all, kGuided
  /// default_guided_budget(legal count), a quarter of the legal configs and at least 8).
  std::size_t budget = 0;
  /// kGuided only (tune() throws InvalidArgument with another strategy): when > 0, no new round starts once the
  /// session has run this many seconds; the round under way finishes.
  double time_budget_s = 0;
  std::uint64_t seed = 0;          ///< Inputs and sampling; 0 draws a fresh seed.
  double min_time_ms = 2.0;        ///< Minimum summed kernel time per candidate.
  int min_reps = 5;
  int max_reps = 200;
  double cut_ratio = 1.5;          ///< After 3 reps, a candidate this much slower than the best is cut.
  int retime_top = 3;              ///< Fastest candidates re-timed side by side (with the default) at the end.
  int retime_reps = 25;            ///< Rounds of the side-by-side re-timing.
  unsigned compile_threads = 0;    ///< 0: all cores.
  bool reject_spills = true;       ///< Candidates whose kernel spills registers are rejected.
  L2Mode l2 = L2Mode::kAuto;       ///< How repetitions see the L2 (see L2Mode).
  /// Where candidates run: kAuto uses a worker process when the jitune-worker executable is found, so a candidate
  /// that faults or hangs costs one verdict instead of the run; kInProcess uses the caller's context (a fault there
  /// ends the session); kWorker requires the worker.
  enum class Isolation { kAuto, kInProcess, kWorker } isolation = Isolation::kAuto;
  double candidate_timeout_s = 20;  ///< Worker only: a candidate without a verdict by then is killed ("timeout").
  std::string worker;               ///< Worker executable; empty: find_worker().
  /// When not empty, only these configs (plus the heuristic default) are tried, all timed (no early cut) and
  /// re-timed side by side: for revalidating stored winners and comparing two tunings.
  std::vector<Config> only_configs;
  bool store = true;               ///< Write measurements and the winner to the user cache.
  std::string shard;               ///< Provenance for the stored record: "k/N" of a sharded run, else empty.
  /// Shared by the sessions of a suite: instantiations an earlier problem compiled (same program text and name
  /// expression) are reused instead of compiled again. Null: every session compiles its own.
  std::shared_ptr<CompileMemo> compile_memo;
  /// A session started ahead by prepare_session() for this family and problem with these options: tune() takes over
  /// its worker (and seed) instead of starting one. Ignored (and dropped) when it was made for something else.
  std::shared_ptr<PreparedSession> prepared;
  std::function<void(const Progress&)> on_progress;
};

/// A session's worker process started ahead of time: it builds the workload and CPU reference at a low CPU priority,
/// without touching the GPU, while the session before it still times. A suite prepares session n+1 while session n
/// runs, so the next case's setup is mostly done when it starts.
struct PreparedSession {
  std::string family, signature;
  std::uint64_t seed = 0;
  std::shared_ptr<const Problem> problem;   ///< Kept alive for the runner.
  std::unique_ptr<CandidateRunner> runner;  ///< Taken by tune().
  PreparedSession();
  ~PreparedSession();
};

/// Starts the worker for a later tune(runtime, family, *problem, options) and has it build the workload and
/// reference. Null when there is nothing to gain: candidates run in process, or options.only_configs is set.
std::shared_ptr<PreparedSession> prepare_session(Runtime& runtime, const Family& family,
                                                 std::shared_ptr<const Problem> problem, const TuneOptions& options);

/// One candidate's verdict.
struct CandidateResult {
  Config config;
  std::string status;   ///< ok, cut, compile_failed, wrong_result, launch_failed, resources_exceeded, invalid
  std::string reason;
  double time_us = 0;   ///< Median of its repetitions.
  double spread = 0;    ///< (p90 - p10) / median.
  int reps = 0;
  KernelResources resources;
};

/// What a session found.
struct TuneReport {
  std::string family, signature;
  Config best, heuristic;
  double best_us = 0, default_us = 0;   ///< From the side-by-side re-timing.
  double best_spread = 0;
  int best_reps = 0;
  double bytes = 0;                     ///< Problem::bytes_moved().
  std::vector<std::pair<Config, double>> retimed;  ///< Every finalist's side-by-side median.
  std::string kept_default;             ///< Why the default was kept over a faster-within-noise winner, if so.
  std::vector<CandidateResult> candidates;  ///< Every candidate tried, in the order they were planned.
  std::size_t space_size = 0, pruned = 0;
  Strategy strategy = Strategy::kExhaustive;
  std::size_t legal = 0;                   ///< Legal configs (with only_configs: those listed and the default).
  std::size_t budget = 0;                  ///< kRandom / kGuided: the candidate budget in effect (0: none).
  std::vector<std::size_t> round_sizes;    ///< kGuided: candidates per round, in order (round 0: default, seeds).
  /// kGuided: where the seeds came from (the default is no seed): the same or a nearby problem tuned on another
  /// device of this compute capability; an earlier tuning of this problem here; nearby shapes tuned here.
  struct SeedCounts {
    std::size_t other_devices = 0, this_problem = 0, nearby_shapes = 0;
  } seeds;
  std::string stopped;                     ///< kGuided: why it ended: "budget", "time" or "no untried neighbour".
  double wall_s = 0, compile_s = 0, reference_s = 0;
  double wait_compile_s = 0;            ///< Wall time the GPU side waited for NVRTC (compile-bound when large).
  double timing_s = 0;                  ///< Wall time spent verifying and timing candidates, re-timing included.
  std::size_t compile_reused = 0;       ///< Candidates whose compiled kernel came from TuneOptions::compile_memo.
  L2Mode l2 = L2Mode::kAuto;            ///< The mode the timings were taken in (never kAuto after tuning).
  bool isolated = false;                ///< Candidates ran in a worker process.
  int worker_restarts = 0;              ///< Workers restarted after a fault or a hang.
  bool stored = false;
  std::string store_error;              ///< Why results could not be written (disk full, read-only), if so.
  /// Default time / best time (>= 1 when tuning helped).
  double speedup() const { return best_us > 0 ? default_us / best_us : 0; }
};

/// Tunes `problem` on `runtime`'s device. Throws when nothing verifies (every candidate failed) or the device
/// context broke; ordinary candidate failures are values in the report.
TuneReport tune(Runtime& runtime, const Family& family, const Problem& problem, const TuneOptions& options);

/// How many candidates ended with each status, in status order, each as " status=count" (" cut=3 ok=12").
std::string status_counts(const std::vector<CandidateResult>& candidates);

/// Compile-only report of the whole legal space (no GPU needed).
struct DryRunReport {
  std::vector<CandidateResult> candidates;  ///< status ok / compile_failed, resources from ptxas.
  std::size_t space_size = 0, pruned = 0;
  std::size_t sampled_from = 0;             ///< Legal configs the sample was drawn from (0: all were compiled).
  double wall_s = 0, compile_s = 0;
};
/// `budget` > 0 compiles the heuristic default plus a random sample of that many configs in all.
DryRunReport dry_run(const Compiler& compiler, const Family& family, const Problem& problem,
                     const DeviceInfo& device, unsigned threads, std::size_t budget = 0, std::uint64_t seed = 0);

/// The legal candidates: the space filtered by Family::validate, heuristic default first; `pruned` counts the rest.
std::vector<Config> legal_candidates(const Family& family, const Problem& problem, const DeviceInfo& device,
                                     std::size_t& pruned);

}  // namespace jitune::tuner

namespace jitune::tuner {
/// Device-to-device copy bandwidth (GB/s, bytes read + bytes written) of `bytes` on `runtime`'s device:
/// CUDA events, warm-up, median of `reps` copies. The physical limit bandwidth figures are reported against.
double copy_bandwidth_gbs(Runtime& runtime, std::size_t bytes = std::size_t{1} << 30, int reps = 20);
}  // namespace jitune::tuner
