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

#include <jitune/call.hpp>
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
  /// One block an SM where the grid fits the SMs (ready_function pads the dynamic shared memory so that two
  /// blocks do not fit one SM). A programmatic launch's blocks take the places the previous kernel frees as it
  /// drains, and left to the occupancy they doubled up: conv2d's 100-block GEMM after its copy kernel ran 1.4x
  /// slower at two blocks an SM's shared memory than at one (bench/RESULTS.md 2026-11-29, twenty-fifth session).
  bool spread = false;
  /// When > 0, the grid is settled when the kernel is loaded (ready_function): one balanced wave, every block
  /// resident at once (the loaded function's occupancy) and given the same number of these work units,
  /// ceil(units / ceil(units / resident)) blocks. grid.x is the fallback estimate until then.
  std::uint64_t balance_units = 0;
  /// A cooperative launch: every block is resident at once, so blocks may wait for each other (a grid
  /// barrier). The grid is settled when the kernel is loaded (ready_function): grid.x capped at the blocks the
  /// loaded function can keep resident on the device.
  bool cooperative = false;
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

/// A kernel that a call launches besides its config's main kernel (Family::steps): a layout change of an
/// input before the main kernel, of an output after it. Its program is compiled and cached like any
/// instantiation's.
struct StepKernel {
  KernelSource source;
  LaunchShape shape;
  bool after =
      false;  ///< Launched after the main kernel (else before it); steps keep their order, in stream order.
};

/// Kernel parameter storage for cuLaunchKernel without heap allocation (the warm launch path uses it).
class KernelArgs {
 public:
  KernelArgs() = default;
  // pointers() point into this object's storage: a copy would point into the original.
  KernelArgs(const KernelArgs&) = delete;
  KernelArgs& operator=(const KernelArgs&) = delete;
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

/// What a kernel does with a buffer.
enum class BufferRole : std::uint8_t { kIn, kOut, kInOut };

/// One buffer of a call, derived by the family from the problem: the runtime checks the caller's pointer against
/// it (null, element alignment, device memory of `extent_bytes()`, no overlap of an output with another buffer)
/// and derives its alignment class from it.
struct BufferSpec {
  std::string name;                    ///< As the public op names it: "x", "grad_output", "index".
  BufferRole role = BufferRole::kIn;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;     ///< Elements per dimension.
  std::vector<std::int64_t> strides;   ///< Elements per step of each dimension; empty means contiguous.
  bool optional = false;               ///< Absent from some calls (conv2d's bias): then its shape is empty, it
                                       ///< may be null and takes no workload input.
  bool in_place = false;               ///< An output that may be the very memory of an input (never a partial
                                       ///< overlap): elementwise `x = x * y`.
  std::int64_t index_bound = -1;       ///< >= 0 for an index buffer whose values must lie in [0, index_bound).
  std::uint8_t placement = 16;         ///< The alignment class the tuner gives this buffer's pointer (< 16 for a
                                       ///< problem tuned for a misaligned view: Family::with_alignment).

  /// Bytes from the pointer to one past the last element the call touches (0 for an empty buffer).
  std::uint64_t extent_bytes() const noexcept;
  /// The largest power of two (at most 16) dividing every non-unit stride in bytes: row pitches that limit the
  /// vector width as much as the pointer does. 16 for a contiguous 1-D buffer.
  std::uint8_t stride_alignment() const noexcept;
};

/// The alignment class of one buffer: the largest power-of-two byte alignment (at most 16) of its address and of
/// its row pitches.
inline std::uint8_t alignment_class(const void* pointer, std::uint8_t stride_alignment) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer) | 16u | stride_alignment;
  return static_cast<std::uint8_t>(address & (~address + 1));
}

/// Whether a problem may name `cls` as the class of a buffer of `element_size`-byte elements: a power of two from
/// the element size (a pointer off its element is refused before any class is asked for) to 16 bytes.
inline bool valid_alignment_class(std::int64_t cls, std::size_t element_size) noexcept {
  return cls >= static_cast<std::int64_t>(element_size) && cls <= 16 && (cls & (cls - 1)) == 0;
}

/// A call's device memory as a kernel sees it: pointers in buffers() order, their alignment classes, the
/// workspace, and the call's scalars.
struct Bindings {
  std::span<const void* const> pointers;
  std::span<const std::uint8_t> alignment;
  void* workspace = nullptr;
  std::span<const double> scalars;
  /// Buffer `i` as a kernel parameter.
  void* at(std::size_t i) const noexcept { return const_cast<void*>(pointers[i]); }
  /// Scalar `i`, or `fallback` when the call gave fewer.
  double scalar(std::size_t i, double fallback) const noexcept { return i < scalars.size() ? scalars[i] : fallback; }
};

/// Work that replaces a kernel launch.
struct Shortcut {
  enum class Kind : std::uint8_t {
    kNone,     ///< Launch the kernel.
    kNothing,  ///< Nothing to do (an empty problem).
    kCopy,     ///< Copy buffer `from` into buffer `to` (extent of `to`): an identity.
    kZero,     ///< Zero buffer `to` (a reduction over nothing).
  };
  Kind kind = Kind::kNone;
  int from = 0, to = 0;
};

/// What surrounds one launch with a given config.
struct LaunchPrep {
  std::size_t workspace_bytes = 0;      ///< Device scratch memory, allocated in stream order for the launch.
  std::size_t zero_begin = 0;           ///< Byte range of the workspace zeroed before the launch.
  std::size_t zero_end = 0;
  std::uint32_t zero_buffers = 0;       ///< Bit i set: buffer i (an output) is zeroed before the launch.
  /// The kernel leaves [zero_begin, zero_end) zero again when it finishes (the dot's last block resets its block
  /// counter), so a workspace kept for one stream serves that stream's next launch without clearing it again.
  bool rezeroed_by_kernel = false;
};

/// Host data for verifying and timing one problem. Buffers of role kIn take `inputs` in buffers() order; buffers
/// of role kOut / kInOut take the outputs in order.
struct Workload {
  std::vector<std::vector<std::byte>> inputs;   ///< Uploaded in this order.
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
  /// The public op a problem came from, for messages ("index_add", "upsample_nearest2d_backward"): name() unless
  /// the family serves several ops.
  virtual std::string_view op_name(const Problem&) const { return name(); }
  /// Include name of its main template, e.g. "elementwise/elementwise.cuh" (the template hash starts there).
  virtual std::string_view template_name() const = 0;
  /// Every entry template a config's program may include: template_name() and the entry of each kernel kept in a
  /// template of its own. Default: template_name() alone.
  virtual std::vector<std::string_view> templates() const { return {template_name()}; }
  /// The entry template `config`'s program includes (one of templates()). Its hash (with its includes) is the
  /// template hash of the config's records, so a record stays current while its own kernel's code is unchanged:
  /// a kernel added in a template of its own leaves every other config's records current. Default: template_name().
  virtual std::string_view template_of(const Config&) const { return template_name(); }
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
  /// Decodes a call's arguments (as the family's public wrapper packed them) into its problem, validating them;
  /// throws InvalidArgument saying which argument is wrong and why.
  virtual std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const = 0;
  /// The buffers a call of `problem` touches, in the public op's buffer order.
  virtual std::vector<BufferSpec> buffers(const Problem& problem) const = 0;
  /// Work that replaces the kernel for this problem (an empty problem, an identity): nothing by default.
  virtual Shortcut shortcut(const Problem&) const { return {}; }
  /// Families whose best config depends on the pointers' alignment classes tune each class apart: the problem
  /// refined with a call's classes (buffers() order; its signature names them and its buffers() carry them as
  /// `placement`), or null when the classes are all full (16) and the problem serves them as it is. The runtime
  /// decides a refined problem on its own (exact record of that class, else the nearest). Default: null, one
  /// decision serves every alignment (variant() narrows the kernel to the pointers).
  virtual std::unique_ptr<Problem> with_alignment(const Problem&, std::span<const std::uint8_t> /*classes*/) const {
    return nullptr;
  }
  /// Called on every call, so cheap: which kernel variant (slot 0..7 of the call site's remembered kernels) the
  /// buffers allow (their alignment classes, BufferSpec order, 0 for an absent optional buffer; or the pointers'
  /// common offset, for a kernel that peels a scalar head). A variant is the tuned config narrowed to what the
  /// pointers allow (a pack width, a kernel kind). By default one variant, slot 0.
  virtual int variant(const Problem&, const Config& /*tuned*/, const Bindings& /*bindings*/) const { return 0; }
  /// The config of variant `slot` (called once per slot and call site). By default the tuned config.
  virtual Config variant_config(const Problem&, const Config& tuned, int /*slot*/, const DeviceInfo&) const {
    return tuned;
  }
  /// What a launch with `config` needs around it: a zeroed workspace, outputs cleared first. Nothing by default.
  virtual LaunchPrep prep(const Problem&, const Config&) const { return {}; }
  /// The kernels a call with `config` launches before and after its main one, in order, each with parameters
  /// from step_args. None by default: a call is one kernel. A config with steps has a workspace (prep)
  /// through which its kernels pass their data; the tuner times the whole call.
  virtual std::vector<StepKernel> steps(const Problem&, const Config&, const DeviceInfo&) const { return {}; }
  /// Parameters of step `index` (steps() order), from the same bindings as kernel_args.
  virtual void step_args(const Problem&, const Config&, std::size_t /*index*/, const Bindings&,
                         KernelArgs&) const {}
  /// The one place kernel parameters are built: the tuner's harness and the runtime both call it.
  virtual void kernel_args(const Problem& problem, const Config& config, const Bindings& bindings,
                           KernelArgs& args) const = 0;
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

/// template_hash() of each of family.templates(): the hashes a current record of the family may carry.
std::vector<std::string> template_hashes(const Family& family);
/// The template hash of `config`'s records: template_hash(family.template_of(config)).
std::string config_template_hash(const Family& family, const Config& config);
/// Whether a stored record's template hash and config describe this build's code: the config reads, and its entry
/// template's hash is the record's. A record of a changed (or removed) template is stale: kept, never used.
bool record_current(const Family& family, std::string_view template_hash, std::string_view config);

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
/// What is wrong with a tuning record's family, signature and config as the registry sees them (unknown family,
/// a signature its family does not parse or that is not canonical, a config outside the family's space); empty
/// when nothing. The stores' import and merge use it through a validator the runtime builds.
std::string check_tuned_config(std::string_view family, std::string_view signature, std::string_view config);

}  // namespace jitune
