// jitune::index_add, jitune::scatter_add and jitune::dot: atomic accumulation with PyTorch's fast half atomic
// add (a 16-bit add done as a 32-bit pair atomic), packed pair atomics, warp pre-reduction or a float
// workspace, as tuned for the device and problem.
#pragma once

#include <cstdint>
#include <string>

#include <jitune/call.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

/// Options of index_add and scatter_add.
struct ScatterAddOptions {
  /// dst[index[i]] += alpha * src[i] (torch's `alpha`). The product is formed in float.
  float alpha = 1.0f;
  /// Check every index on the host before launching and throw InvalidArgument naming the first one outside
  /// [0, destination rows). Costs a synchronization of `stream`, a device-to-host copy of the index array and
  /// a host scan of it (about 10 ms for 2^24 int64 indices, against about 0.2 ms for the add itself). Without
  /// the check, out-of-range indices are skipped on the device: nothing outside the destination is ever
  /// written.
  bool check_indices = false;
};

/// torch's `dst.index_add_(0, index, src, alpha=alpha)` on contiguous tensors: dst is dst_rows x row_length,
/// src is src_rows x row_length, index holds index_count entries of index_dtype (int32 or int64), and source
/// row i is added to destination row index[i]. Duplicate indices accumulate (in an unspecified order, except
/// with the float workspace, where each destination element is rounded once). dtype: float32, float16 or
/// bfloat16. Pointers may have any element alignment. Nothing is launched when there is nothing to add.
/// Throws InvalidArgument when src_rows != index_count, for negative sizes, null or misaligned pointers, an
/// unsupported dtype, or (with options.check_indices) an index out of range. dst must not overlap src or
/// index.
inline void index_add(Runtime& runtime, void* dst, std::int64_t dst_rows, const void* index,
                      std::int64_t index_count, DType index_dtype, const void* src, std::int64_t src_rows,
                      std::int64_t row_length, DType dtype, Stream stream = nullptr,
                      const ScatterAddOptions& options = {}) {
  CallArgs args;
  args.add(0).add(static_cast<std::int64_t>(dtype)).add(static_cast<std::int64_t>(index_dtype));
  args.add(dst_rows).add(index_count).add(src_rows).add(row_length).scalar(options.alpha);
  const void* buffers[] = {dst, index, src};
  call(runtime, "scatter_add", args, buffers, stream, {options.check_indices});
}

/// torch's 1-D `dst.scatter_add_(0, index, src)`: dst[index[i]] += alpha * src[i] for i < index_count.
/// As in torch, src may be longer than index (its first index_count elements are used); a longer index is an
/// InvalidArgument. The same kernels as index_add with row_length 1.
inline void scatter_add(Runtime& runtime, void* dst, std::int64_t dst_count, const void* index,
                        std::int64_t index_count, DType index_dtype, const void* src, std::int64_t src_count,
                        DType dtype, Stream stream = nullptr, const ScatterAddOptions& options = {}) {
  CallArgs args;
  args.add(1).add(static_cast<std::int64_t>(dtype)).add(static_cast<std::int64_t>(index_dtype));
  args.add(dst_count).add(index_count).add(src_count).scalar(options.alpha);
  const void* buffers[] = {dst, index, src};
  call(runtime, "scatter_add", args, buffers, stream, {options.check_indices});
}

/// out[0] = sum of x[i] * y[i] over n elements, accumulated in float and rounded once to dtype (float16,
/// bfloat16 or float32; `out` holds one element of dtype). Deterministic for a given device and tuned
/// configuration. n == 0 writes 0. Throws InvalidArgument for null or misaligned pointers, negative n or an
/// unsupported dtype.
inline void dot(Runtime& runtime, const void* x, const void* y, std::int64_t n, void* out, DType dtype,
                Stream stream = nullptr) {
  CallArgs args;
  args.add(2).add(static_cast<std::int64_t>(dtype)).add(n);
  const void* buffers[] = {x, y, out};
  call(runtime, "scatter_add", args, buffers, stream);
}

/// The problem signature of an index_add / scatter_add call (family "scatter_add"), for Runtime::explain.
inline std::string index_add_signature(std::int64_t dst_rows, std::int64_t index_count, std::int64_t row_length,
                                       DType dtype, DType index_dtype) {
  CallArgs args;
  args.add(0).add(static_cast<std::int64_t>(dtype)).add(static_cast<std::int64_t>(index_dtype));
  args.add(dst_rows).add(index_count).add(index_count).add(row_length);
  return call_signature("scatter_add", args);
}
/// The problem signature of a dot call (family "scatter_add").
inline std::string dot_signature(std::int64_t n, DType dtype) {
  CallArgs args;
  args.add(2).add(static_cast<std::int64_t>(dtype)).add(n);
  return call_signature("scatter_add", args);
}

}  // namespace jitune
