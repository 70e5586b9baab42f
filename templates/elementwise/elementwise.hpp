// The elementwise family: problem type, alignment rule and the family object.
#pragma once

#include <span>

#include <jitune/tensor.hpp>

#include "templates/elementwise/expression.hpp"
#include "templates/family.hpp"

namespace jitune::templates::elementwise {

/// One elementwise call: expression, dtype, element count, and the pointers' alignment classes when the call's
/// views are misaligned (a class each for the inputs in order and the output; empty: all 16-byte aligned).
class ElementwiseProblem final : public Problem {
 public:
  /// Throws InvalidArgument for dtypes other than float32/float16/bfloat16, a negative count, or alignment
  /// classes that are not one per buffer, powers of two up to 16 and at least the element size.
  ElementwiseProblem(Expression expression, DType dtype, std::int64_t n, std::vector<std::uint8_t> align = {});
  const Expression& expression() const noexcept { return expression_; }
  DType dtype() const noexcept { return dtype_; }
  std::int64_t n() const noexcept { return n_; }
  int arity() const noexcept { return static_cast<int>(expression_.inputs.size()); }
  /// Alignment classes (inputs, then the output); empty when every pointer is 16-byte aligned.
  const std::vector<std::uint8_t>& align() const noexcept { return align_; }

  /// "dtype=float32;expr=z = x * y;n=1024", or "align=4,16,16;dtype=float32;..." for a misaligned class.
  std::string signature() const override;
  std::string group() const override;       ///< "float32|arity=2"
  std::vector<double> features() const override;  ///< {log2(n), log2(smallest alignment class)}
  double bytes_moved() const override;

 private:
  Expression expression_;
  DType dtype_;
  std::int64_t n_;
  std::vector<std::uint8_t> align_;
};

/// The alignment classes of an "align" problem option ("2,16,16"): throws InvalidArgument on anything else.
std::vector<std::uint8_t> parse_align(const std::string& text);

/// How the kernel covers n elements with packs of `pack` elements for these pointers (inputs in order, then the
/// output): `head` elements first and the ones from `head + packs * pack` on go through the scalar path; in between
/// the output's packs are aligned, and input a, whose address at `head` lies `shift(a)` elements past a pack
/// boundary, is read as two aligned packs realigned in registers. No access of the vector region leaves a buffer
/// (a shifted input's region ends one pack early). A pointer that is not element-aligned leaves everything scalar.
struct VectorPlan {
  std::int64_t head = 0;
  std::int64_t packs = 0;
  std::uint64_t shifts = 0;  ///< 4 bits per input, input 0 lowest.
  int shift(std::size_t input) const noexcept { return static_cast<int>((shifts >> (4 * input)) & 15u); }
};
VectorPlan plan_vectors(std::span<const void* const> inputs, const void* out, std::size_t element_size, int pack,
                        std::int64_t n) noexcept;

/// The device functor `jitune_ew_op` evaluating `expression` in float over its inputs (`float operator()(const
/// float* v)`, inputs in Expression::inputs order), the expression under `#line 1 "expression"` so NVRTC's messages
/// point into it. Shared by the contiguous kernel and the view kernels.
std::string op_functor_source(const Expression& expression);

/// The tolerance of an expression's result in `dtype`: float math rounded once to the element type.
OutputCheck expression_output_check(DType dtype) noexcept;

/// True when the kernel needs 64-bit indices for n elements.
bool needs_index64(std::int64_t n) noexcept;

/// The registered family object.
const Family& elementwise_family();

}  // namespace jitune::templates::elementwise

namespace jitune {
using templates::elementwise::elementwise_family;
}  // namespace jitune
