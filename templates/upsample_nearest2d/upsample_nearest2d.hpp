// The upsample_nearest2d family (forward and backward): PyTorch's index rules on the host, the problem type, the
// kernel choice by rule, kernel parameters and the family object.
#pragma once

#include <cstdint>
#include <optional>

#include <jitune/ops/upsample_nearest2d.hpp>

#include "templates/family.hpp"

namespace jitune::templates::upsample_nearest2d {

enum class Direction : std::uint8_t { kForward, kBackward };

/// Which kernel runs (the `kernel` parameter): chosen by rule, never tuned.
enum class KernelKind : std::int64_t {
  kGeneral = 0,   ///< Any scale: forward gather; backward gather or scatter (the `strategy` parameter).
  kPacked2x = 1,  ///< Exact 2x in both dimensions: OneFlow's packed kernels.
};

/// The general backward's `strategy` parameter.
enum class Strategy : std::int64_t { kGather = 0, kScatter = 1 };

/// The backward gather's unrolled windows (`window` = 1): fixed f x f windows where the scale is uniform
/// (UpsampleProblem::uniform_window, f in [3, 4]; exact 2x is the packed kernel's), else windows bounded by the
/// longest one where that is at most kMaxUnrolledWindow; longer windows keep the loops.
inline constexpr std::int64_t kMinUniformWindow = 3, kMaxUniformWindow = 4, kMaxUnrolledWindow = 4;

// PyTorch's rules, one dimension at a time (the host mirror of the device code; also the CPU reference's).
/// Forward float step: float(1 / scale_factor) when a factor is given, else float(in) / float(out).
float forward_step(std::int64_t in, std::int64_t out, std::optional<double> scale_factor) noexcept;
/// Backward float step: float(scale_factor) when given, else float(out) / float(in).
float backward_step(std::int64_t in, std::int64_t out, std::optional<double> scale_factor) noexcept;
/// Forward source index of output index `dst`: min(floor(dst * step), in - 1), nearest-exact (dst + 0.5) * step.
std::int64_t source_index(std::int64_t dst, float step, std::int64_t in, NearestMode mode) noexcept;
/// Backward window start of input index `i`: min(ceil(i * step), out), nearest-exact ceil(fma(i, step, -0.5)).
std::int64_t window_start(std::int64_t i, float step, std::int64_t out, NearestMode mode) noexcept;
/// The output size PyTorch derives from a scale factor: (int64)(in * scale_factor).
std::int64_t derived_size(std::int64_t in, double scale_factor) noexcept;

/// One call: direction, dtype, layout, mode, shapes and scale factors, validated and resolved; and, for a packed 2x
/// forward whose input is a view off the 16-byte alignment, the input's alignment class (2, 4 or 8 bytes; 16 when
/// aligned): the kernel realigns such an input in registers, and the class is tuned apart from the aligned problem.
class UpsampleProblem final : public Problem {
 public:
  /// Throws InvalidArgument for non-positive sizes or scales, a missing size and scale, an output size of 0 or one
  /// beyond 2^31 - 1, an unsupported dtype, a tensor over 2^62 elements, or a source class that is not a power of two
  /// from the element size to 8 bytes, or that is given for a problem other than a packed 2x forward.
  UpsampleProblem(Direction direction, const UpsampleNearest2d& shape, std::uint8_t src_align = 16);

  Direction direction() const noexcept { return direction_; }
  bool backward() const noexcept { return direction_ == Direction::kBackward; }
  const UpsampleNearest2d& shape() const noexcept { return shape_; }  ///< out_h / out_w resolved.
  DType dtype() const noexcept { return shape_.dtype; }
  ImageLayout layout() const noexcept { return shape_.layout; }
  NearestMode mode() const noexcept { return shape_.mode; }
  std::int64_t in_numel() const noexcept { return shape_.n * shape_.c * shape_.in_h * shape_.in_w; }
  std::int64_t out_numel() const noexcept { return shape_.n * shape_.c * shape_.out_h * shape_.out_w; }
  /// Elements the kernel reads (input / grad_output) and writes (output / grad_input).
  std::int64_t src_numel() const noexcept { return backward() ? out_numel() : in_numel(); }
  std::int64_t dst_numel() const noexcept { return backward() ? in_numel() : out_numel(); }
  bool empty() const noexcept { return shape_.n == 0 || shape_.c == 0; }
  /// Input and output have the same size: PyTorch copies (both directions).
  bool copy() const noexcept { return shape_.in_h == shape_.out_h && shape_.in_w == shape_.out_w; }
  /// The index rule is exactly "x2" in both dimensions (2x kernel applies).
  bool packed_2x() const noexcept { return packed_2x_; }
  /// PyTorch's float steps (forward: source step; backward: window step) for height and width.
  float step_h() const noexcept { return step_h_; }
  float step_w() const noexcept { return step_w_; }
  /// Longest backward window along height / width (0 forward): 1 means no element receives two contributions.
  std::int64_t max_window_h() const noexcept { return max_window_h_; }
  std::int64_t max_window_w() const noexcept { return max_window_w_; }
  /// Backward: f when every window is f x f at (f i, f j) (out = f in along both dimensions, PyTorch's rule
  /// giving exactly those windows), for f in [kMinUniformWindow, kMaxUniformWindow]; 0 otherwise and forward.
  std::int64_t uniform_window() const noexcept { return uniform_window_; }
  /// The input's (forward source's) alignment class in bytes: 16 unless the problem names a misaligned view.
  std::uint8_t src_align() const noexcept { return src_align_; }
  /// True when the kernels need 64-bit indices.
  bool index64() const noexcept;

  std::string signature() const override;
  std::string group() const override;             ///< "float32|nchw|forward|2x" (or "general").
  std::vector<double> features() const override;  ///< {log2(n c + 1), log2(in_h in_w), log2(out_h out_w)}
  double bytes_moved() const override;            ///< Input once and output once (either direction).

 private:
  Direction direction_;
  UpsampleNearest2d shape_;
  float step_h_ = 1, step_w_ = 1;
  bool packed_2x_ = false;
  std::int64_t max_window_h_ = 0, max_window_w_ = 0;
  std::int64_t uniform_window_ = 0;
  std::uint8_t src_align_ = 16;
};

/// Host mirror of the kernels' templates::upsample_nearest2d::Params (upsample_nearest2d.cuh): keep the two identical.
struct Params {
  const void* src;
  void* dst;
  long long n, c;
  long long in_h, in_w;
  long long out_h, out_w;
  long long units;
  long long dst_numel;
  float scale_h, scale_w;
  int identity_h, identity_w;
  int src_shift;
};
static_assert(sizeof(Params) == 104, "templates::upsample_nearest2d::Params must match the device struct");

/// Elements per work unit's vector access for `kernel` / `strategy` (see the .cuh): the dimension `pack` must divide.
std::int64_t pack_extent(const UpsampleProblem& problem, KernelKind kernel, Strategy strategy) noexcept;
/// The widest pack <= max_pack that the shape and both pointers allow for this kernel; 0 when none does (the 2x
/// kernels need their pair accesses aligned, except the 2x forward's source, which it realigns in registers; the
/// general ones always allow 1).
int usable_pack(const UpsampleProblem& problem, KernelKind kernel, Strategy strategy, int max_pack, const void* src,
                const void* dst) noexcept;
/// Kernel parameters for one launch.
Params make_params(const UpsampleProblem& problem, KernelKind kernel, Strategy strategy, int pack, const void* src,
                   void* dst) noexcept;

/// Random (never zero) source tensor of `problem` (input, or grad_output) from `seed`.
std::vector<std::byte> random_source(const UpsampleProblem& problem, std::uint64_t seed);
/// The CPU reference of the destination (output, or grad_input) for source `src`.
std::vector<std::byte> reference_output(const UpsampleProblem& problem, const std::vector<std::byte>& src);

/// The registered family object ("upsample_nearest2d").
const Family& upsample_nearest2d_family();

}  // namespace jitune::templates::upsample_nearest2d

namespace jitune {
using templates::upsample_nearest2d::upsample_nearest2d_family;
}  // namespace jitune
