// CandidateRunner: the GPU side of a tuning session (verify one candidate on poisoned outputs against the CPU
// reference, time it, re-time finalists side by side). Two implementations: in this process, or in a worker process
// (jitune-worker) that the session restarts after a fault or a hang, so a candidate that corrupts its CUDA context
// or never finishes costs one verdict, not the run (and never the caller's process).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/compiler.hpp"
#include "tuner/measure.hpp"
#include "tuner/tuner.hpp"

namespace jitune::tuner {

/// A compiled candidate ready for the GPU.
struct Candidate {
  std::size_t index = 0;                           ///< Position in the session's config list.
  Config config;
  std::shared_ptr<const CompiledProgram> program;  ///< The batch program holding its kernel.
  std::size_t module_id = 0;                       ///< Identifies `program` (one module per batch).
  std::string lowered;                             ///< Kernel name inside the module.
};

/// Measurement settings a runner needs (a subset of TuneOptions, sent to workers).
struct RunnerSettings {
  std::uint64_t seed = 0;
  L2Mode l2 = L2Mode::kAuto;
  double min_time_ms = 2.0;
  int min_reps = 5, max_reps = 200, retime_reps = 25;
  double cut_ratio = 1.5;
  double candidate_timeout_s = 20;  ///< Worker runner: a candidate with no verdict by then is killed (timeout).
};

/// A problem's inputs and CPU reference, built on the host (Family::workload and Family::reference).
struct HostWorkload {
  Workload workload;
  std::vector<std::vector<std::byte>> reference;
};

/// Builds the workload and reference of `problem` from `seed` (the work setup() does before it touches the GPU).
HostWorkload build_host_workload(const Family& family, const Problem& problem, std::uint64_t seed);

class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  /// Starts building the workload and reference ahead of setup(), at a low CPU priority and without touching the GPU,
  /// where the runner can (a worker starts its process for it): a suite prepares the next session this way while the
  /// current one times. begin_setup() / setup() then use what it built.
  virtual void prepare() {}
  /// Starts setup() without waiting for it where the runner can (a worker builds the workload and reference in its
  /// own process while the caller compiles); setup() then only collects the result.
  virtual void begin_setup() {}
  /// Builds the workload and reference and uploads them; returns the L2 mode in effect. Throws on failure.
  virtual L2Mode setup() = 0;
  /// Verdict for one candidate: ok / cut (timed), wrong_result, launch_failed, resources_exceeded, timeout.
  /// `best_us` is the best median so far (0 before the first), for the early cut.
  virtual CandidateResult run(const Candidate& candidate, double best_us) = 0;
  /// Side-by-side re-timing, interleaved round by round: per finalist, its time (us) in each round (round r of every
  /// finalist ran one after the other, so drift hits them alike and times of one round compare pairwise).
  virtual std::vector<std::vector<double>> retime(const std::vector<const Candidate*>& finalists) = 0;
  /// How often a worker was (re)started; 0 in process.
  virtual int restarts() const { return 0; }
};

/// Runs candidates on `runtime`'s context in this process. A fault there loses the context: run() then throws.
/// `prepared`: the host workload and reference already built from settings.seed (setup() then only uploads them).
std::unique_ptr<CandidateRunner> make_in_process_runner(Runtime& runtime, const Family& family, const Problem& problem,
                                                        const RunnerSettings& settings,
                                                        std::shared_ptr<HostWorkload> prepared = nullptr);

/// Runs candidates in a jitune-worker process on the same device (`worker` is the executable's path).
std::unique_ptr<CandidateRunner> make_worker_runner(const std::string& worker, int device, const Family& family,
                                                    const Problem& problem, const RunnerSettings& settings);

/// The worker executable: $JITUNE_WORKER, else the build tree's or the install prefix's jitune-worker, else one next
/// to the running program; empty when none exists.
std::string find_worker();

/// The worker's main loop (jitune-worker, and test workers that register extra families first): reads requests on
/// stdin, answers on stdout until EOF or "quit". Returns the process exit code.
int worker_main(int argc, char** argv);

}  // namespace jitune::tuner
