// CompilePool: compiles a family's candidates with NVRTC on all cores, batching the candidates that share one
// program text into a few programs per thread (one front-end pass for many name expressions). A batch that fails
// is split so every failure is attributed to its own config. Results arrive in completion order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "runtime/compiler.hpp"
#include "templates/family.hpp"
#include "tuner/shared_compiles.hpp"

namespace jitune::tuner {

/// One compiled program and the candidates it holds. Candidates with the same instantiation (configs that differ
/// only in host-side launch parameters) share one name expression and are compiled once.
struct CompiledBatch {
  std::vector<std::size_t> candidates;        ///< Indices into the config list given to the pool.
  std::vector<std::string> name_expressions;  ///< Per candidate.
  std::vector<std::size_t> unit;              ///< Per candidate: index of its name in the compiled program.
  std::string program;                        ///< Program text (shared by the batch).
  std::shared_ptr<const CompiledProgram> output;
};

/// Compiled instantiations kept across the tuning sessions of one process (a suite): a unit compiled for one problem
/// is reused when another problem instantiates the same program text and name expression for the same architecture
/// and NVRTC (the key is Compiler::binary_key). Failed compiles are not kept. When the kept programs pass `max_bytes`
/// the memo is emptied and starts again.
///
/// The memo also knows which units are being compiled now (in flight: by the prefetch or by a session's pool), so
/// one unit is not compiled twice at once in this process: the prefetch skips units in flight, and a pool that
/// starts while the prefetch compiles some of its units waits for them (`await`) instead of compiling them again.
class CompileMemo {
 public:
  explicit CompileMemo(std::size_t max_bytes = std::size_t{512} << 20) : max_bytes_(max_bytes) {}
  struct Hit {
    std::shared_ptr<const CompiledProgram> program;
    std::size_t unit = 0;  ///< Index of the name expression in `program`.
  };
  std::optional<Hit> find(const std::string& key) const;
  /// Marks the keys that are neither kept nor in flight as in flight and returns them (the caller compiles those and
  /// must call `landed` for each, whatever the outcome).
  std::vector<std::string> claim(const std::vector<std::string>& keys);
  /// Whether `key` is being compiled now.
  bool in_flight(const std::string& key) const;
  /// The compile of `keys` has ended (kept by `add` before, or failed): waiting pools look again.
  void landed(const std::vector<std::string>& keys);
  /// Waits while `key` is in flight, then looks it up: nullopt when its compile failed (or the memo started again).
  std::optional<Hit> await(const std::string& key) const;
  /// Bytes of the programs kept now, and the cap at which the memo starts again.
  std::size_t bytes() const;
  std::size_t max_bytes() const noexcept { return max_bytes_; }
  /// Keeps every unit of a successfully compiled program; `keys[u]` is unit u's key.
  void add(const std::vector<std::string>& keys, std::shared_ptr<const CompiledProgram> program);
  std::size_t units() const;
  /// Programs compiled by the pools and prefetch that use this memo also go through `shared` (other processes of
  /// the run read them back instead of compiling them again; `jitune tune --devices`). Set before use.
  void share(std::shared_ptr<SharedCompiles> shared) { shared_ = std::move(shared); }
  SharedCompiles* shared() const noexcept { return shared_.get(); }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable landed_;
  std::map<std::string, Hit> units_;
  std::set<std::string> in_flight_;
  std::size_t bytes_ = 0, max_bytes_;
  std::shared_ptr<SharedCompiles> shared_;
};

/// Compiles the candidates of sessions still to come (the rest of a suite) into a CompileMemo, in session order, on
/// threads that run at a low CPU priority (nice 10): the running session's compiles, CPU references and timing
/// loop come first, and what is left of the machine compiles ahead. A session that starts calls starting(): the
/// prefetch then drops that session and every earlier one (its own pool compiles what is still missing). Programs
/// that fail are dropped (the session's pool compiles them again and reports each failure). Stops adding when the
/// memo is three quarters full, so it never forces the memo to start again. Units in flight in the memo (a session's
/// pool compiles them) are not compiled again here.
class CompilePrefetch {
 public:
  struct Job {
    const Family* family = nullptr;
    std::shared_ptr<const Problem> problem;
  };
  /// `device` gives the legal candidates (Family::check) and `arch`; `resource_report` must match the sessions'
  /// (TuneOptions::reject_spills), so a kept program carries the register report the session needs. Jobs before
  /// `first_job` are never compiled (the session that starts at once compiles its own). `skip`, when given, is asked
  /// (on a prefetch thread) before a job is expanded: true leaves the job alone (another process tunes it).
  CompilePrefetch(const Compiler& compiler, const DeviceInfo& device, CompileMemo& memo, std::vector<Job> jobs,
                  unsigned threads, bool resource_report, std::size_t first_job = 0,
                  std::function<bool(std::size_t job)> skip = {});
  ~CompilePrefetch();
  CompilePrefetch(const CompilePrefetch&) = delete;
  CompilePrefetch& operator=(const CompilePrefetch&) = delete;

  /// Session `job` starts: drop it and every earlier one.
  void starting(std::size_t job);
  /// Blocks until every job left is compiled (or the memo is three quarters full).
  void wait();
  /// Summed NVRTC time of the prefetched programs (seconds) and how many units they held.
  double compile_seconds() const;
  std::size_t units() const;

 private:
  struct Batch {
    std::size_t job = 0;
    std::string program;
    std::vector<std::string> names;
  };
  void work();
  bool expand_next(std::unique_lock<std::mutex>& lock);

  const Compiler& compiler_;
  const DeviceInfo& device_;
  std::string arch_;
  CompileMemo& memo_;
  std::vector<Job> jobs_;
  bool resource_report_;
  std::function<bool(std::size_t)> skip_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> todo_;
  std::size_t next_job_ = 0;   // next job to expand into batches
  std::size_t first_job_ = 0;  // jobs before this one are dropped
  bool expanding_ = false, stop_ = false, full_ = false;
  std::size_t compiling_ = 0;  // batches being compiled now
  double seconds_ = 0;
  std::size_t units_ = 0;
  std::vector<std::thread> threads_;
};

class CompilePool {
 public:
  /// Starts compiling `configs` of `problem` for `arch` on `threads` threads (0: all cores). The first config (the
  /// heuristic default) is compiled first, on the calling thread: when it fails the problem itself cannot compile
  /// (a malformed expression, say) and CompileError is thrown with NVRTC's log instead of failing every config.
  /// With a `memo`, units compiled by earlier pools of this process are taken from it (delivered first, no NVRTC)
  /// and new ones are added to it; units the memo has in flight (the prefetch compiles them now) are waited for,
  /// after this pool's own compiles, and compiled here only when theirs failed. `probe_first` false: configs[0] is
  /// not the default (a later round of a guided search) and is compiled like the others, its failure a verdict like
  /// theirs.
  CompilePool(const Compiler& compiler, const Family& family, const Problem& problem,
              const std::vector<Config>& configs, std::string arch, unsigned threads, bool resource_report,
              CompileMemo* memo = nullptr, bool probe_first = true);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /// Next finished batch, blocking; nullopt when all are delivered.
  std::optional<CompiledBatch> next();
  /// Summed NVRTC time of all programs so far (seconds).
  double compile_seconds() const;
  /// Candidates whose compiled unit came from the memo (kept, or waited for): final once every batch is delivered.
  std::size_t reused() const noexcept { return reused_.load(); }

 private:
  struct Work {
    CompiledBatch batch;
    bool await = false;  ///< The memo has its units in flight: wait for them, compile only what failed.
  };
  void work();
  void compile_batch(CompiledBatch batch);
  void await_batch(CompiledBatch batch);

  const Compiler& compiler_;
  std::string arch_;
  bool resource_report_;
  CompileMemo* memo_;
  std::atomic<std::size_t> reused_{0};
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Work> todo_;
  std::deque<CompiledBatch> done_;
  std::size_t outstanding_ = 0;
  double seconds_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace jitune::tuner
