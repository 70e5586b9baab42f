// The reduce_rows family: sum / max over the last dimension of a contiguous rows x cols tensor. The problem
// type, its limits and the family object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <jitune/ops/reduce_rows.hpp>
#include <jitune/tensor.hpp>

#include "templates/family.hpp"
#include "templates/reduce_rows/reduce_rows_params.cuh"

namespace jitune::templates::reduce_rows {

/// Largest cols a problem may have (pack indices stay 32-bit in the kernels).
constexpr std::int64_t kMaxCols = std::int64_t{1} << 30;
/// Largest rows a problem may have.
constexpr std::int64_t kMaxRows = (std::int64_t{1} << 31) - 1;

/// One reduce_rows call: dtype (x and y), op, rows and cols, and x's alignment class where the call's x is a view
/// off the 16-byte alignment whose rows all start at the same offset (one row, or a row pitch of a multiple of 16
/// bytes): 2, 4 or 8 bytes, tuned apart from the aligned problem (16: aligned).
class ReduceRowsProblem final : public Problem {
 public:
  /// Throws InvalidArgument for a dtype other than float32 / float16 / bfloat16, negative or too large sizes,
  /// kMax over rows of no elements (torch.amax refuses them), or an alignment class that is not a power of two
  /// from the element size to 8 bytes, or that the rows' pitch makes meaningless (rows start at different offsets).
  ReduceRowsProblem(DType dtype, ReduceOp op, std::int64_t rows, std::int64_t cols, std::uint8_t align = 16);
  DType dtype() const noexcept { return dtype_; }
  ReduceOp op() const noexcept { return op_; }
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  /// x's alignment class in bytes (16: aligned).
  std::uint8_t align() const noexcept { return align_; }
  int element_size() const noexcept { return static_cast<int>(dtype_size(dtype_)); }
  /// The widest pack (elements): 16 bytes. Any row reads in it (its misaligned head and tail one by one).
  int max_pack() const noexcept;

  /// "cols=4096;dtype=float16;op=sum;rows=4096", or "align=2;cols=4096;..." for a misaligned class.
  std::string signature() const override;
  std::string group() const override;             ///< "float16|op=sum"
  /// {log2(rows + 1), log2(cols + 1)}: a class's nearest problem is its aligned twin, whose record serves it where
  /// that config is legal for the class (peel 1, or a pack no wider than the class).
  std::vector<double> features() const override;
  double bytes_moved() const override;            ///< x read once, y written once.

 private:
  DType dtype_;
  ReduceOp op_;
  std::int64_t rows_, cols_;
  std::uint8_t align_;
};

/// Whether x's alignment class is a property of every row: one row, or rows whose pitch is a multiple of 16
/// bytes (rows of another pitch start at every offset whatever x's alignment, and peel 1 reads them all).
bool rows_share_alignment(DType dtype, std::int64_t rows, std::int64_t cols) noexcept;

/// "sum" or "max".
std::string_view reduce_op_name(ReduceOp op) noexcept;

/// The registered family object.
const Family& reduce_rows_family();

}  // namespace jitune::templates::reduce_rows

namespace jitune {
using templates::reduce_rows::reduce_rows_family;
}  // namespace jitune
