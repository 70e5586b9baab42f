// jitune::permute: OneFlow's permute (N-d transpose into a contiguous tensor), tuned per GPU and problem.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include <jitune/call.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

/// Writes the contiguous permuted copy of the contiguous tensor `src` (shape `shape`, up to 8 dims) into
/// `dst`: output dim i is input dim perm[i], as `x.permute(perm).contiguous()` in PyTorch. The kernels move
/// bytes, so any dtype works; only its size (1, 2, 4 or 8 bytes) matters.
///
/// The call is simplified first (size-1 dims dropped, dims that stay together merged, the widest movement the
/// last dim's bytes and both pointers allow); what remains as an identity is one device copy. A zero-size
/// tensor launches nothing. Pointers need only be aligned to the element size. Runs asynchronously on
/// `stream`. Throws InvalidArgument when perm is not a permutation of 0..n-1, the lengths differ, an extent
/// is negative, there are more than 8 dims, a pointer is null or misaligned for the dtype, or src and dst
/// overlap.
inline void permute(Runtime& runtime, const void* src, void* dst, std::span<const std::int64_t> shape,
                    std::span<const int> perm, DType dtype, Stream stream = nullptr) {
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add_list(shape).add_list(perm);
  const void* buffers[] = {src, dst};
  call(runtime, "permute", args, buffers, stream);
}

/// Same as above with the shape and permutation inline: `permute(rt, x, y, {64, 1024, 1024}, {0, 2, 1},
/// dtype)`.
inline void permute(Runtime& runtime, const void* src, void* dst, std::initializer_list<std::int64_t> shape,
                    std::initializer_list<int> perm, DType dtype, Stream stream = nullptr) {
  permute(runtime, src, dst, std::span<const std::int64_t>(shape.begin(), shape.size()),
          std::span<const int>(perm.begin(), perm.size()), dtype, stream);
}

/// The canonical problem signature of a permute call, for Runtime::explain and the tuning store:
/// "dtype=float32;perm=0,2,1;shape=64x1024x1024".
inline std::string permute_signature(std::span<const std::int64_t> shape, std::span<const int> perm, DType dtype) {
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add_list(shape).add_list(perm);
  return call_signature("permute", args);
}

}  // namespace jitune
