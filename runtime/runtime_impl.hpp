// Runtime::Impl: device and context, compiler and binary cache, tuning stores, and the dispatcher's memory of
// decisions and loaded kernels. Internal to jitune's modules (runtime, tuner, CLI).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <jitune/runtime.hpp>

#include "cache/store.hpp"
#include "runtime/binary_cache.hpp"
#include "runtime/compiler.hpp"
#include "runtime/driver.hpp"
#include "runtime/stores.hpp"
#include "templates/family.hpp"

namespace jitune {

/// A loaded step of a call (Family::steps): launched before or after the main kernel.
struct KernelStep {
  CUfunction function = nullptr;
  LaunchShape shape;
  bool after = false;
};

/// A loaded instantiation, ready for cuLaunchKernel.
struct Kernel {
  CUfunction function = nullptr;
  LaunchShape shape;
  Config config;
  LaunchPrep prep;  ///< What each launch needs around it (Family::prep).
  std::vector<KernelStep> steps;  ///< Family::steps, loaded; empty for a call of one kernel.
};

/// One kernel launch of a call, with its parameters.
struct CallLaunch {
  CUfunction function = nullptr;
  const LaunchShape* shape = nullptr;
  void** args = nullptr;
};

/// A call's launches in the order they run (the steps before, the main kernel, the steps after), each with its
/// parameters from the family over `bindings`: what the dispatcher launches and the tuner times. Holds the
/// parameters the launches point to, so it is neither copied nor moved; `kernel` must outlive it.
class CallLaunches {
 public:
  CallLaunches(const Family& family, const Problem& problem, const Kernel& kernel, const Bindings& bindings);
  CallLaunches(const CallLaunches&) = delete;
  CallLaunches& operator=(const CallLaunches&) = delete;
  std::span<const CallLaunch> launches() const noexcept { return launches_; }

 private:
  KernelArgs main_args_;
  std::vector<KernelArgs> step_args_;
  std::vector<CallLaunch> launches_;
};

class CallSites;

/// The dispatcher's decision for one (family, problem): which config and why.
struct Decision {
  Config config;
  Explanation explanation;
};

/// The dispatcher's search, without a GPU: `stores` in order (user cache first, then shipped), each asked for an
/// exact record; then the nearest tuned problem of the same group on this device; then the same architecture on
/// other devices; then the family's heuristic. Stale records (record_current) are never used; stored configs that
/// are no longer legal are skipped with a note.
Decision lookup_decision(const Family& family, const Problem& problem, const DeviceInfo& device,
                         const std::string& nvrtc_version, const std::vector<const cache::Store*>& stores);
/// Euclidean distance between two problems' features (Problem::features()); infinity when their lengths differ.
/// What "nearest tuned problem" means, for the dispatcher and for the guided search's seeds.
double feature_distance(const std::vector<double>& a, const std::vector<double>& b);
/// The store key of `problem` tuned to `config` on `device` (its template hash: config_template_hash).
cache::RecordKey record_key(const Family& family, const Problem& problem, const Config& config,
                            const DeviceInfo& device, const std::string& nvrtc_version);

/// Reads device facts through the driver.
DeviceInfo query_device(CUdevice device);

struct Runtime::Impl {
  Impl(Runtime& owner, RuntimeOptions opts);
  ~Impl();

  Runtime& self;
  RuntimeOptions options;
  CUdevice cu_device = 0;
  CUcontext context = nullptr;
  DeviceInfo device;
  Compiler compiler;
  BinaryCache binaries;
  /// Read-only kernel folders shipped beside the shipped caches (`<their folder>/kernels`, filled at build time by
  /// `jitune warmup --suite default --all-devices`): looked in after `binaries`, never written.
  std::vector<std::unique_ptr<BinaryCache>> shipped_binaries;
  std::unique_ptr<cache::Store> user_store;   ///< nullptr when it could not be opened (see store_notes).
  std::vector<std::unique_ptr<cache::Store>> shipped_stores;
  std::vector<std::string> store_notes;       ///< Why a cache is unused or read-only.

  /// The configuration for (family, problem): remembered after the first call. May run the tuning policy, except
  /// `in_capture` (the caller's stream is being captured into a CUDA graph): then a decision that would tune throws
  /// InvalidArgument (refuse_in_capture) instead.
  const Decision& decide(const Family& family, const Problem& problem, bool in_capture = false);
  /// Makes a tuning policy's result the decision, once its config is readable and legal here (else a note).
  void adopt_tuned(const Family& family, const Problem& problem, Explanation tuned, Decision& decision) const;
  /// The store search behind decide(), uncached and without tuning.
  Decision lookup(const Family& family, const Problem& problem) const;
  /// Loads (compiling if needed) the instantiation; remembered. Throws CompileError on NVRTC failure, and
  /// InvalidArgument (refuse_in_capture) when it is not loaded yet and `in_capture`.
  const Kernel& kernel(const Family& family, const Problem& problem, const Config& config, bool in_capture = false);
  /// Compiled image for one instantiation: the binary cache, the shipped kernels, else NVRTC (and stored in the
  /// binary cache). `fresh`: NVRTC whatever the caches hold (after a cached image failed to load). `cached` (if
  /// given) says whether the image came from a cache.
  CachedBinary binary(const Family& family, const Problem& problem, const Config& config, bool fresh = false,
                      bool* cached = nullptr);
  /// binary() for one program (a step's): `family` and `config` name it in a compile error.
  CachedBinary binary_of(const KernelSource& source, const Family& family, const Config& config,
                         bool fresh = false, bool* cached = nullptr);
  /// Loads `binary` as a module kept for this runtime's life under `key` (compiling `source` afresh when the
  /// driver refuses a cached image) and returns its function.
  CUfunction load_function(const std::string& key, CachedBinary binary, bool cached,
                           const KernelSource& source, const Family& family, const Config& config);
  /// Compiles (or takes from the binary caches) and loads `kernel`'s steps for `problem` (Family::steps of
  /// kernel.config) into kernel.steps, each module kept under `key` and the step's index. Needs kernel.prep.
  void load_steps(const Family& family, const Problem& problem, Kernel& kernel, const std::string& key);
  /// Launches on `stream` with the primary context current.
  void launch(const Kernel& kernel, KernelArgs& args, CUstream stream);
  /// Launches a whole call on `stream` (CallLaunches: the steps and the main kernel, parameters over `bindings`).
  void launch_call(const Family& family, const Problem& problem, const Kernel& kernel, const Bindings& bindings,
                   CUstream stream);
  /// Throws InvalidArgument unless [ptr, ptr + bytes) lies inside one allocation of device memory (or managed
  /// memory) usable on this runtime's device; `what` names the argument ("input 1") in the message.
  void check_device_range(const void* ptr, std::size_t bytes, const std::string& what) const;
  /// Forgets decisions (the loaded kernels stay).
  void forget_decisions();
  /// The store key of `problem` tuned to `config` on this device.
  cache::RecordKey record_key(const Family& family, const Problem& problem, const Config& config) const;

  /// The generic dispatch's call sites, keyed by the raw call arguments (runtime/dispatch.hpp).
  std::unique_ptr<CallSites> call_sites;

  /// A workspace kept for one stream (runtime/dispatch.cpp, stream_scratch): launches whose kernel leaves the
  /// zeroed range zero (LaunchPrep::rezeroed_by_kernel) reuse it on that stream without a memset per call.
  struct Scratch {
    CUstream stream;
    std::size_t bytes, zero_begin, zero_end;
    CUdeviceptr ptr;
  };
  /// Kept workspaces (one per stream and workspace shape: a split-K conv2d keeps a few MB of partial tiles per
  /// problem); past these counts and sizes a launch takes a stream-ordered workspace from workspace_pool (allocated
  /// and its zeroed range cleared per call).
  static constexpr std::size_t kMaxScratches = 32;
  static constexpr std::size_t kMaxScratchBytes = std::size_t{64} << 20;   ///< Larger workspaces are never kept.
  static constexpr std::size_t kMaxScratchTotal = std::size_t{256} << 20;  ///< All kept workspaces together.
  /// Bytes the workspace pool keeps reserved across synchronisations. The device's default pool keeps none: it
  /// returned a partitioned index_add's 128 MB workspace to the system at every synchronisation, and mapping it
  /// again cost about 180 us a call on the H100.
  static constexpr std::uint64_t kPoolKeepBytes = std::uint64_t{1} << 30;
  /// jitune's own memory pool for stream-ordered workspaces (created on first use, under scratch_mutex; null
  /// when the driver refused one: the default pool then). Not used inside a capture (the graph's allocation
  /// node takes the default pool).
  CUmemoryPool workspace_pool = nullptr;
  bool workspace_pool_tried = false;
  std::size_t scratch_total = 0;  ///< Bytes of `scratches` (under scratch_mutex).
  std::mutex scratch_mutex;
  std::vector<Scratch> scratches;  ///< Freed by ~Impl, after the context's work is done.

 private:
  std::shared_mutex mutex_;
  std::mutex tune_mutex_;
  std::unordered_map<std::string, std::unique_ptr<Decision>> decisions_;
  std::vector<std::unique_ptr<Decision>> retired_decisions_;
  std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels_;
  std::unordered_map<std::string, std::unique_ptr<driver::Module>> modules_;
  std::vector<std::unique_ptr<driver::Module>> retired_modules_;  ///< Loaded again by a racing thread; kept.
};

namespace internal {
/// The runtime's state, for jitune's own modules (dispatch, tuner, CLI, bench, tests); not an installed header.
struct Access {
  static Runtime::Impl& impl(Runtime& runtime) noexcept { return *runtime.impl_; }
};
inline Runtime::Impl& impl(Runtime& runtime) noexcept { return Access::impl(runtime); }
}  // namespace internal

/// True when work on `stream` is being captured into a CUDA graph, or when `stream` is the legacy default stream
/// and another stream's capture forbids using it. The context must be current; the capture is left untouched.
bool stream_capturing(CUstream stream);

/// Throws InvalidArgument: `op` on `signature` would `what` (compile, load, tune, synchronize) inside a CUDA graph
/// capture, which would invalidate it; run the op once before capturing. Nothing was enqueued.
[[noreturn]] void refuse_in_capture(const std::string& op, const std::string& signature, const std::string& what);

/// Launches `function` as `shape` says on `stream` (the caller makes the context current): cuLaunchKernel, or
/// cuLaunchKernelEx with programmatic stream serialization (shape.programmatic) and / or as a cooperative launch
/// (shape.cooperative).
CUresult launch_kernel(CUfunction function, const LaunchShape& shape, CUstream stream, void** args);

/// Readies a loaded function for launches as `shape` (the context current): pads the shared memory of a spread
/// launch (LaunchShape::spread), opts into dynamic shared memory over 48 KiB, and settles a balanced grid
/// (LaunchShape::balance_units) or a cooperative one (at most the resident blocks) from the function's
/// occupancy.
void ready_function(CUfunction function, LaunchShape& shape, const DeviceInfo& device);

}  // namespace jitune
