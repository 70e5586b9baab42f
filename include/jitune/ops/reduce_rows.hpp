// jitune::reduce_rows: sum or max over the last dimension of a contiguous 2-D tensor, tuned per GPU.
#pragma once

#include <cstdint>
#include <string>

#include <jitune/call.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

/// What reduce_rows computes over each row.
enum class ReduceOp : std::uint8_t {
  kSum,  ///< torch.sum(x, -1): the sum; 0 for an empty row.
  kMax,  ///< torch.amax(x, -1): the largest element; NaN when the row holds a NaN.
};

/// y[r] = op over c of x[r * cols + c] for r < rows, as `torch.sum(x, -1)` / `torch.amax(x, -1)` on a
/// contiguous rows x cols tensor: dtype float32, float16 or bfloat16 for x and y alike, accumulated in float
/// and rounded once to dtype. Rows of 16-byte multiples with an aligned x get 16-byte loads; any
/// element-aligned x works. rows == 0 launches nothing; cols == 0 writes zeros for kSum. Runs asynchronously
/// on `stream`. Throws InvalidArgument for negative sizes, kMax over cols == 0 (torch refuses it too), an
/// unsupported dtype or op, null, misaligned or host pointers, allocations smaller than the tensors, or y
/// overlapping x.
inline void reduce_rows(Runtime& runtime, const void* x, void* y, std::int64_t rows, std::int64_t cols,
                        ReduceOp op, DType dtype, Stream stream = nullptr) {
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add(static_cast<std::int64_t>(op)).add(rows).add(cols);
  const void* buffers[] = {x, y};
  call(runtime, "reduce_rows", args, buffers, stream);
}

/// The canonical problem signature of a reduce_rows call, for Runtime::explain and the tuning store:
/// "cols=4096;dtype=float16;op=sum;rows=4096".
inline std::string reduce_rows_signature(std::int64_t rows, std::int64_t cols, ReduceOp op, DType dtype) {
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add(static_cast<std::int64_t>(op)).add(rows).add(cols);
  return call_signature("reduce_rows", args);
}

}  // namespace jitune
