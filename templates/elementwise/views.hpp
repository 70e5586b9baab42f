// Elementwise over views (issue 21, item 2), the host half: from each operand's shape and strides (in elements)
// to the problem a kernel runs. PyTorch's broadcasting rules give the output shape; size-1 dims are dropped; dims
// are put in the output's memory order and merged wherever every operand allows; what is left is classified into
// the layout class the tuner keys on. views.cuh holds the kernels (gather for any layout, rows for dense or
// constant inner dims, tiled transpose-in-load for inner_transpose) and view_source instantiates them;
// view_reference is the CPU reference; views_family.cpp is the elementwise_view family (jitune::elementwise_view,
// also reached through jitune_call, jitune.elementwise and jitune.torch.elementwise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <jitune/tensor.hpp>

#include "templates/config.hpp"
#include "templates/elementwise/expression.hpp"
#include "templates/family.hpp"

namespace jitune::templates::elementwise {

/// One operand as the caller sees it: shape and strides in elements (same length; a stride may be 0 for a
/// broadcast dim, never negative).
struct View {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

/// How the operands lie in memory after merging, best first (what the kernel variant and the tuner key on). The
/// output is written in its memory order; "inner" is its fastest dim after merging.
enum class LayoutClass {
  kContiguous,       ///< One dim: output dense, every input dense or a broadcast scalar (stride 0).
  kRows,             ///< Two or more dims, every operand dense along the inner dim or a scalar: a bias row
                     ///< broadcast over rows (outer stride 0), sliced rows (`a[:, 1:]`), padded rows. Vector loads
                     ///< along each row.
  kBroadcastColumn,  ///< Output dense along the inner dim; each input dense there or constant along it (inner
                     ///< stride 0, outer not: one value per row, e.g. a (rows, 1) column), at least one such.
  kInnerTranspose,   ///< Output dense along the inner dim; some input strided there but dense along another dim
                     ///< (a permuted input): a tiled transpose-in-load pays.
  kGeneral,          ///< Anything else: a strided gather per element.
};

/// "contiguous", "rows", "broadcast_column", "inner_transpose", "general".
std::string_view layout_class_name(LayoutClass layout) noexcept;

/// The planned problem: merged shape (outermost first, output memory order) and one stride list per operand
/// (output first, then the inputs in order), each as long as `shape`.
struct ViewPlan {
  std::vector<std::int64_t> shape;
  std::vector<std::vector<std::int64_t>> strides;
  LayoutClass layout = LayoutClass::kGeneral;
  std::int64_t elements = 0;  ///< Output elements (product of shape; 0 for an empty problem).
  /// Canonical text of the layout for signatures: "layout=<class>;shape=a,b;strides=o:s,s|i0:s,s|..."
  std::string key() const;
};

/// Plans an elementwise call whose inputs broadcast to `output`'s shape. Throws InvalidArgument, saying which
/// operand and dim and what to do, for: shapes and strides of different lengths, a negative size or stride, shapes
/// that do not broadcast (PyTorch's rule: right-aligned, each dim equal or 1), an output whose shape is not the
/// broadcast shape, or an output whose elements overlap (a 0 stride on a dim of size > 1, or strides that make
/// two indices meet).
ViewPlan plan_views(std::span<const View> inputs, const View& output);

/// The broadcast shape of `shapes` under PyTorch's rule; InvalidArgument naming the first conflict.
std::vector<std::int64_t> broadcast_shape(std::span<const std::vector<std::int64_t>> shapes);

/// Row-major strides of a dense tensor of `shape`.
std::vector<std::int64_t> dense_strides(std::span<const std::int64_t> shape);

/// Which kernel of views.cuh a plan runs: `rows` for the rows and broadcast_column classes with rows of 128
/// elements or more (or `flat` over the same plans, by config key flat), `tiled` for inner_transpose, `gather`
/// otherwise.
enum class ViewKernel { kGather, kRows, kTiled };
ViewKernel view_kernel(const ViewPlan& plan) noexcept;

/// For the tiled kernel: the outer dim along which the first transposed input (strided along the inner dim) is
/// dense; -1 when no input is.
int view_transposed_dim(const ViewPlan& plan) noexcept;

/// For the rows kernel with `pack`: true when some input read along the rows steps from row to row by a pitch
/// that differs from the output's modulo the pack, so its rows and the output's are aligned differently.
bool views_rows_mixed(const ViewPlan& plan, std::int64_t pack) noexcept;

/// For the tiled kernel: bit a set when input a is read through the tile (dense along view_transposed_dim,
/// strided along the inner dim); 0 when no input is.
unsigned view_transposed_inputs(const ViewPlan& plan) noexcept;

/// Per operand (output first), the largest element offset the plan reaches + 1: the least elements its buffer
/// must hold (0 for an empty plan).
std::vector<std::int64_t> view_extents(const ViewPlan& plan);

/// True when an element index or an operand's offset may pass 2^31 (the kernels then index in 64 bits).
bool views_need_index64(const ViewPlan& plan);

/// The program and kernel name for `plan` (at most 8 merged dims): config keys block and unroll, pack for the
/// rows and tiled kernels, flat (1: the flat kernel instead of rows), tile for the tiled kernel (its edge; it takes
/// unroll 1). Bit a of `scalars` makes input a a scalar the
/// call passes by value (planned as a 0-d view). Throws InvalidArgument for more than 8 dims or inputs.
KernelSource view_source(const Expression& expression, DType dtype, const ViewPlan& plan, const Config& config,
                         unsigned scalars = 0);

/// The CPU reference: evaluates `expression` for every output element of `plan`, reading each input at its
/// offset in `inputs` (each input's elements, view_extents' sizes) and writing `out` (the output's extent) at the
/// output's offsets, computed in double and rounded once through float, as the kernels compute.
/// Scalar inputs (bit a of `scalars`) take values[a] instead of memory (their `inputs` entry may be null); like the
/// kernel, the value is rounded to float.
void view_reference(const Expression& expression, DType dtype, const ViewPlan& plan,
                    std::span<const std::byte* const> inputs, std::vector<std::byte>& out, unsigned scalars = 0,
                    std::span<const double> values = {});

/// The registered elementwise_view family (views_family.cpp): the problem is the expression, the dtype and the
/// plan (its layout class, merged shape and strides); jitune::elementwise_view is its op.
const Family& elementwise_view_family();

}  // namespace jitune::templates::elementwise
