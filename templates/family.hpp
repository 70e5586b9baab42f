// Family: the interface every kernel family implements (space, heuristic default, instantiation, launch geometry,
// kernel arguments, random workload and CPU reference). The tuner, runtime and CLI are generic over it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <jitune/device.hpp>
#include <jitune/error.hpp>
#include <jitune/tensor.hpp>

#include "templates/config.hpp"
#include "templates/space.hpp"

namespace jitune {

/// One call's description (dtype, shapes, expression, ...), family specific.
class Problem {
 public:
  virtual ~Problem() = default;
  /// Exact key, canonical "name=value;name=value" text with names sorted; Family::parse_problem inverts it.
  virtual std::string signature() const = 0;
  /// Problems of one group may borrow each other's tuned configs (nearest-problem fallback), e.g. "float16|arity=2".
  virtual std::string group() const = 0;
  /// Numbers for the nearest-problem distance (log2 sizes and the like); same length within a group.
  virtual std::vector<double> features() const = 0;
  /// Bytes that must move through device memory: each input read once, each output written once.
  virtual double bytes_moved() const = 0;
  /// Floating-point operations, 0 for data movement kernels.
  virtual double flops() const { return 0; }
};

/// Grid or block extent.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  std::uint64_t volume() const noexcept { return std::uint64_t{x} * y * z; }
};

/// How one instantiation is launched.
struct LaunchShape {
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0;  ///< Dynamic shared memory.
  /// Programmatic dependent launch (sm_90+): the kernel may be scheduled while the stream's previous kernel
  /// drains, which hides the launch gap between back-to-back kernels. Only for kernels that execute
  /// griddepcontrol.wait before their first global memory access (it returns once the previous kernel has
  /// finished and its writes are visible).
  bool programmatic = false;
  /// When > 0, the grid is settled when the kernel is loaded (ready_function): one balanced wave, every block
  /// resident at once (the loaded function's occupancy) and given the same number of these work units,
  /// ceil(units / ceil(units / resident)) blocks. grid.x is the fallback estimate until then.
  std::uint64_t balance_units = 0;
};

/// Blocks of `block` threads resident on the whole device at once (at least 1): one "wave".
inline std::int64_t resident_blocks(const DeviceInfo& device, std::int64_t block) {
  return std::max<std::int64_t>(1, std::int64_t{device.sm_count} *
                                       std::max<std::int64_t>(1, device.max_threads_per_sm / block));
}

/// A 1-D grid-stride launch: enough blocks of `block` threads for `units` units at `units_per_block` each (at least
/// one block), capped at `waves` waves.
inline LaunchShape grid_stride_shape(std::int64_t units, std::int64_t block, std::int64_t units_per_block,
                                     std::int64_t waves, const DeviceInfo& device) {
  const std::int64_t needed = std::max<std::int64_t>(1, (units + units_per_block - 1) / units_per_block);
  LaunchShape s;
  s.grid.x = static_cast<unsigned>(std::min(needed, resident_blocks(device, block) * waves));
  s.block.x = static_cast<unsigned>(block);
  return s;
}

/// What NVRTC compiles for one (problem, config): the program text and the name expression of the instantiation.
struct KernelSource {
  std::string program;          ///< Includes the family's template from the embedded header list.
  std::string name_expression;  ///< e.g. "jitune::ew::elementwise<Op, float, 2, 4, 256, 1, int>".
};

/// Kernel parameter storage for cuLaunchKernel without heap allocation (the warm launch path uses it).
class KernelArgs {
 public:
  /// Appends one kernel parameter (trivially copyable, passed by value).
  template <class T>
  void push(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::size_t offset = (used_ + alignof(T) - 1) / alignof(T) * alignof(T);
    if (offset + sizeof(T) > sizeof(storage_) || count_ == kMaxArgs)
      throw Error("jitune internal error: kernel parameters exceed KernelArgs capacity");
    std::memcpy(storage_ + offset, &value, sizeof(T));
    pointers_[count_++] = storage_ + offset;
    used_ = offset + sizeof(T);
  }
  /// Appends one parameter given as raw bytes (a struct whose layout is built at run time).
  void push_raw(const void* data, std::size_t size, std::size_t align) {
    std::size_t offset = (used_ + align - 1) / align * align;
    if (offset + size > sizeof(storage_) || count_ == kMaxArgs)
      throw Error("jitune internal error: kernel parameters exceed KernelArgs capacity");
    std::memcpy(storage_ + offset, data, size);
    pointers_[count_++] = storage_ + offset;
    used_ = offset + size;
  }
  void** pointers() noexcept { return pointers_; }
  std::size_t count() const noexcept { return count_; }
  void clear() noexcept { used_ = count_ = 0; }

 private:
  static constexpr std::size_t kMaxArgs = 32;
  alignas(16) unsigned char storage_[2048];
  void* pointers_[kMaxArgs];
  std::size_t used_ = 0, count_ = 0;
};

/// Host data for verifying and timing one problem.
struct Workload {
  std::vector<std::vector<std::byte>> inputs;   ///< Uploaded in this order; kernel_args receives their pointers.
  std::vector<std::size_t> output_bytes;        ///< Outputs to allocate.
  /// Initial output contents (accumulating kernels); an empty vector means "poison before each run".
  std::vector<std::vector<std::byte>> initial_outputs;
};

/// Element-wise comparison rule for one output: |got - expected| <= atol + rtol * |expected|; NaN and infinities
/// must match exactly; a poisoned (unwritten) element fails.
struct OutputCheck {
  DType dtype = DType::kFloat32;
  double rtol = 1e-5;
  double atol = 1e-6;
};

/// Result of comparing one output on the host or the device.
struct CompareResult {
  std::uint64_t mismatches = 0;     ///< Elements outside the tolerance.
  std::uint64_t first_index = 0;    ///< First mismatching element (valid when mismatches > 0).
  double got = 0, expected = 0;     ///< Values at first_index.
  double max_rel_error = 0;         ///< Largest |got - expected| / max(|expected|, atol / rtol) seen.
  bool ok() const noexcept { return mismatches == 0; }
  /// "3 of 4097 elements differ; first at 17: got nan, expected 1.25 (rtol 1e-05, atol 1e-06)".
  std::string describe(std::uint64_t count, const OutputCheck& check) const;
};

/// Host comparison of `count` elements of check.dtype (the CPU path, used by tests and small outputs).
CompareResult compare_host(const OutputCheck& check, const void* got, const void* expected, std::uint64_t count);

/// A problem option the CLI offers for this family (`--expr`, `--n`, `--dtype`).
struct ProblemOption {
  std::string name;
  std::string help;
};

/// The interface every kernel family implements.
class Family {
 public:
  virtual ~Family() = default;
  /// Registry name, e.g. "elementwise".
  virtual std::string_view name() const = 0;
  /// Include name of its main template, e.g. "elementwise/elementwise.cuh" (the template hash starts there).
  virtual std::string_view template_name() const = 0;
  /// Tunable parameters and their candidate values.
  virtual const Space& space() const = 0;
  /// Options that describe a problem; make_problem takes them by name.
  virtual std::vector<ProblemOption> problem_options() const = 0;
  /// Builds a problem from named option values; throws InvalidArgument saying which value is wrong and why.
  virtual std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const = 0;
  /// The configuration used when no tuned record fits: a good default by rule.
  virtual Config heuristic(const Problem& problem, const DeviceInfo& device) const = 0;
  /// Why `config` cannot run `problem` on `device` (alignment, divisibility, shared memory, threads), empty if it can.
  /// Callers check Space::contains first.
  virtual std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const = 0;
  /// Program text and name expression for NVRTC.
  virtual KernelSource source(const Problem& problem, const Config& config) const = 0;
  /// Grid, block and dynamic shared memory.
  virtual LaunchShape launch_shape(const Problem& problem, const Config& config, const DeviceInfo& device) const = 0;
  /// Kernel parameters for device buffers laid out as workload() describes them.
  virtual void kernel_args(const Problem& problem, const Config& config, std::span<void* const> inputs,
                           std::span<void* const> outputs, KernelArgs& args) const = 0;
  /// Random (never zero) inputs from `seed`.
  virtual Workload workload(const Problem& problem, std::uint64_t seed) const = 0;
  /// The expected outputs, computed on the CPU.
  virtual std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& workload) const = 0;
  /// How output `index` is compared with the reference (element type and tolerance).
  virtual OutputCheck output_check(const Problem& problem, std::size_t index) const = 0;
  /// Signatures of this family's public benchmark cases (`jitune tune --suite default`), with short names.
  virtual std::vector<std::pair<std::string, std::string>> default_suite() const = 0;
  /// True when a candidate takes NVRTC about a second or more (heavily unrolled kernels). A suite tunes such
  /// families last, so their compiles run in the background while the other families time on the GPU.
  virtual bool slow_compiles() const { return false; }

  /// Inverse of Problem::signature: "a=1;b=2" -> make_problem({{"a","1"},{"b","2"}}).
  std::unique_ptr<Problem> parse_problem(std::string_view signature) const;
  /// Space::contains plus check(); empty when `config` is a legal configuration for the problem and device.
  std::string validate(const Problem& problem, const Config& config, const DeviceInfo& device) const;
};

/// Splits "a=1;b=x y" into a map; a value may contain '='. Throws InvalidArgument on an item without '='.
std::map<std::string, std::string> split_signature(std::string_view signature);
/// Joins a map into canonical "a=1;b=2" text (std::map order).
std::string join_signature(const std::map<std::string, std::string>& items);

/// All registered families, in registration order.
const std::vector<const Family*>& families();
/// Adds a family outside the library's list (tests' fault-injection families, plugins). Call before any tuning or
/// lookup starts (e.g. from a static initializer); not thread-safe with concurrent lookups.
void register_family(const Family& family);
/// The family called `name`; throws InvalidArgument listing the registered names.
const Family& family(std::string_view name);
/// The family called `name`, or nullptr.
const Family* find_family(std::string_view name) noexcept;

}  // namespace jitune
