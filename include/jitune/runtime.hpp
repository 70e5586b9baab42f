// The jitune runtime: device, compiler and binary cache, tuning store, and the dispatcher that picks a kernel
// configuration per (family, problem) and launches it on the caller's stream.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <jitune/device.hpp>
#include <jitune/error.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

class Family;
class Problem;
class Runtime;
struct Explanation;
namespace internal {
struct Access;
}  // namespace internal

/// Where a configuration came from, best first.
enum class MatchLevel {
  kExact,             ///< A tuned record for this very problem on this device (user or shipped cache).
  kNearestProblem,    ///< The tuned record of the closest problem of the same family and group on this device.
  kSameArchitecture,  ///< A record tuned on another device of the same compute capability.
  kHeuristic,         ///< No usable record: the family's heuristic default.
};

/// "exact", "nearest_problem", "same_architecture" or "heuristic".
std::string_view match_level_name(MatchLevel level) noexcept;

/// Runs tuning at run time when the dispatcher meets a problem with no exact record. The tuner library provides
/// the implementation (jitune::tuner::tune_on_first_use); the runtime only calls it, so launch-only programs link
/// no tuner code.
class TuningPolicy {
 public:
  virtual ~TuningPolicy() = default;
  /// Tunes `problem` of `family`, stores the result in `runtime`'s user cache, and returns the decision: the
  /// winning config (Explanation::config) and its provenance (level kExact, where it was measured, its time and the
  /// default's). The runtime uses it at once, whether or not the store write worked (a failed write is a note in
  /// it, never a lost winner). nullopt when tuning found no usable config. Must not throw for ordinary tuning
  /// failures.
  virtual std::optional<Explanation> tune(Runtime& runtime, const Family& family, const Problem& problem) = 0;
};

/// Options for a Runtime. Empty paths mean the defaults described on each member.
struct RuntimeOptions {
  /// CUDA device ordinal; the runtime uses that device's primary context (shared with the CUDA runtime API).
  int device = 0;
  /// Tuning database that records are read from and written to. Default: $JITUNE_CACHE_DIR/tuning.sqlite, else
  /// ~/.cache/jitune/tuning.sqlite.
  std::filesystem::path user_cache;
  /// When false no user cache is opened (lookups use the shipped caches and heuristics; nothing is written).
  bool use_user_cache = true;
  /// Extra read-only tuning databases, searched after the user cache and before the built-in shipped caches.
  /// $JITUNE_SHIPPED_CACHES (colon separated) adds more.
  std::vector<std::filesystem::path> shipped_caches;
  /// When false the shipped caches installed with jitune are not consulted.
  bool use_builtin_shipped_caches = true;
  /// Folder for compiled kernel binaries. Default: <folder of the user cache>/kernels. Empty + disk_binary_cache
  /// false keeps binaries in memory only.
  std::filesystem::path binary_cache_dir;
  /// Keep compiled binaries on disk so a new process skips NVRTC.
  bool disk_binary_cache = true;
  /// When false, problems with the caches (unreadable, read-only, newer schema) are printed once to stderr as
  /// "jitune warning: ..."; they are always in Runtime::warnings() and in Explanation::notes.
  bool quiet = false;
  /// Tuning at run time; nullptr never tunes (store lookup, then heuristic).
  std::shared_ptr<TuningPolicy> tuning;
};

/// Why a call uses the configuration it uses.
struct Explanation {
  std::string family;            ///< Kernel family.
  std::string signature;         ///< The problem's canonical signature.
  std::string config;            ///< Configuration that will run, canonical text.
  MatchLevel level = MatchLevel::kHeuristic;  ///< How it was found.
  std::string source;            ///< The cache file the record came from, or "heuristic".
  std::string matched_signature; ///< Signature of the record used (differs from `signature` when nearest).
  std::string matched_device;    ///< Device the record was tuned on.
  double time_us = 0;            ///< Median time stored with the record (0 when heuristic).
  double default_time_us = 0;    ///< Heuristic default's time on the same problem, stored with the record.
  std::string heuristic_config;  ///< What the heuristic would pick.
  std::vector<std::string> notes;  ///< Records skipped and why (stale template, invalid config, ...).
};

/// The files a jitune installation brings, found without a GPU relative to the binary holding jitune's code (or,
/// linked statically, to the CMake package the program was built against), so an install can be moved.
struct InstalledFiles {
  /// Shipped tuning caches, in search order: $JITUNE_SHIPPED_CACHES (colon separated), then the installed ones.
  std::vector<std::filesystem::path> shipped_caches;
  /// The tuner's worker executable ($JITUNE_WORKER overrides); empty when none is found.
  std::filesystem::path worker;
};

/// What this jitune would use from its installation (the jitune CLI prints it with `jitune cache paths`).
InstalledFiles installed_files();

/// Device, compiler, caches and dispatcher. Thread-safe: share one Runtime between threads.
class Runtime {
 public:
  /// Opens the device's primary context (shared with the CUDA runtime API, made current on this thread) and the
  /// tuning caches. Throws NoDevice without a usable GPU. A user cache that cannot be opened for writing is used
  /// read-only, one that cannot be read is skipped (see Explanation::notes); neither is ever modified.
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// The device this runtime launches on.
  const DeviceInfo& device() const noexcept;
  /// The options in effect, defaults resolved.
  const RuntimeOptions& options() const noexcept;
  /// Which configuration a call of `family` on the problem with canonical `signature` would use, and why.
  Explanation explain(std::string_view family, std::string_view signature);
  /// What went wrong opening the caches (each says what to do); empty when all is well.
  const std::vector<std::string>& warnings() const noexcept;
  /// Forgets in-memory decisions (e.g. after the user cache was changed by a tuner in this process).
  void reload();

  struct Impl;

 private:
  friend struct internal::Access;
  std::unique_ptr<Impl> impl_;
};

/// Number of CUDA devices visible through the driver; 0 when there is no driver or no device (never throws).
int device_count() noexcept;

/// Why no device is usable ("libcuda.so.1 not found", "CUDA_ERROR_NO_DEVICE", ...), empty when one is.
std::string device_unavailable_reason();

}  // namespace jitune
