// CompilePool: compiles a family's candidates with NVRTC on all cores, batching the candidates that share one
// program text into a few programs per thread (one front-end pass for many name expressions). A batch that fails
// is split so every failure is attributed to its own config. Results arrive in completion order.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/compiler.hpp"
#include "templates/family.hpp"

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

class CompilePool {
 public:
  /// Starts compiling `configs` of `problem` for `arch` on `threads` threads (0: all cores). The first config (the
  /// heuristic default) is compiled first, on the calling thread: when it fails the problem itself cannot compile
  /// (a malformed expression, say) and CompileError is thrown with NVRTC's log instead of failing every config.
  CompilePool(const Compiler& compiler, const Family& family, const Problem& problem,
              const std::vector<Config>& configs, std::string arch, unsigned threads, bool resource_report);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /// Next finished batch, blocking; nullopt when all are delivered.
  std::optional<CompiledBatch> next();
  /// Summed NVRTC time of all programs so far (seconds).
  double compile_seconds() const;

 private:
  void work();
  void compile_batch(CompiledBatch batch);

  const Compiler& compiler_;
  std::string arch_;
  bool resource_report_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<CompiledBatch> todo_;
  std::deque<CompiledBatch> done_;
  std::size_t outstanding_ = 0;
  double seconds_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace jitune::tuner
