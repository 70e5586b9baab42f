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

/// One reduce_rows call: dtype (x and y), op, rows and cols.
class ReduceRowsProblem final : public Problem {
 public:
  /// Throws InvalidArgument for a dtype other than float32 / float16 / bfloat16, negative or too large sizes,
  /// or kMax over rows of no elements (torch.amax refuses them).
  ReduceRowsProblem(DType dtype, ReduceOp op, std::int64_t rows, std::int64_t cols);
  DType dtype() const noexcept { return dtype_; }
  ReduceOp op() const noexcept { return op_; }
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  int element_size() const noexcept { return static_cast<int>(dtype_size(dtype_)); }
  /// The widest pack (elements): 16 bytes. Any row reads in it (its misaligned head and tail one by one).
  int max_pack() const noexcept;

  std::string signature() const override;         ///< "cols=4096;dtype=float16;op=sum;rows=4096"
  std::string group() const override;             ///< "float16|op=sum"
  std::vector<double> features() const override;  ///< {log2(rows + 1), log2(cols + 1)}
  double bytes_moved() const override;            ///< x read once, y written once.

 private:
  DType dtype_;
  ReduceOp op_;
  std::int64_t rows_, cols_;
};

/// "sum" or "max".
std::string_view reduce_op_name(ReduceOp op) noexcept;

/// The registered family object.
const Family& reduce_rows_family();

}  // namespace jitune::templates::reduce_rows

namespace jitune {
using templates::reduce_rows::reduce_rows_family;
}  // namespace jitune
