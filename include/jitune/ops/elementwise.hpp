// jitune::elementwise: OneFlow's vectorised elementwise template behind one call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include <jitune/call.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

/// Element-wise expression over same-shaped contiguous tensors of one dtype (float32, float16, bfloat16).
///
/// `expression` assigns one output from up to 8 inputs, in C syntax with float math:
/// `"z = x * y"`, `"y = x > 0 ? x : 0.1f * x"`, `"out = a * b + c"`, `"y = tanhf(x)"`. Inputs are the names read on
/// the right-hand side in order of first appearance (`"z = y * x"` takes y, then x); `inputs` gives their device
/// pointers in that order. Half and bfloat16 values are computed in float. Pointers may have any element alignment;
/// the widest vector access they allow is used. n == 0 launches nothing. Throws InvalidArgument for a malformed
/// expression (quoting NVRTC's message), a wrong number of inputs, null pointers or an unsupported dtype.
inline void elementwise(Runtime& runtime, std::string_view expression, std::span<const void* const> inputs,
                        void* output, std::int64_t n, DType dtype, Stream stream = nullptr) {
  constexpr std::size_t kMaxInputs = 8;
  if (inputs.size() > kMaxInputs)
    throw InvalidArgument("elementwise: " + std::to_string(inputs.size()) + " inputs given; at most 8 are supported");
  const void* buffers[kMaxInputs + 1];
  for (std::size_t i = 0; i < inputs.size(); ++i) buffers[i] = inputs[i];
  buffers[inputs.size()] = output;
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add(n).text(expression);
  call(runtime, "elementwise", args, std::span<const void* const>(buffers, inputs.size() + 1), stream);
}

/// Same as above, inputs given inline: `elementwise(rt, "z = x * y", {x, y}, z, n, DType::kFloat32)`.
inline void elementwise(Runtime& runtime, std::string_view expression, std::initializer_list<const void*> inputs,
                        void* output, std::int64_t n, DType dtype, Stream stream = nullptr) {
  elementwise(runtime, expression, std::span<const void* const>(inputs.begin(), inputs.size()), output, n, dtype,
              stream);
}

/// One operand of elementwise_view: a device pointer (to the view's first element), its sizes, and its strides in
/// elements (0 where it is broadcast; never negative), at most 8 dims. An input may instead be a scalar passed by
/// value (ViewOperand::scalar(0.5)): no memory, no recompilation when the value changes; at most 4 a call.
struct ViewOperand {
  const void* data = nullptr;
  std::span<const std::int64_t> shape;
  std::span<const std::int64_t> strides;
  bool is_scalar = false;
  double value = 0;  ///< The scalar's value (rounded to float in the kernel).
  static ViewOperand scalar(double v) {
    ViewOperand o;
    o.is_scalar = true;
    o.value = v;
    return o;
  }
};

namespace detail {
inline void add_view(CallArgs& args, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  constexpr std::size_t kMaxDims = 8;
  if (shape.size() > kMaxDims || strides.size() > kMaxDims)
    throw InvalidArgument("elementwise_view: an operand has " + std::to_string(std::max(shape.size(), strides.size())) +
                          " dims; at most 8 are supported");
  args.add_list(shape).add_list(strides);
}
inline CallArgs view_args(std::string_view expression, std::span<const ViewOperand> inputs,
                          const ViewOperand& output, DType dtype) {
  constexpr std::size_t kMaxInputs = 8;
  if (inputs.empty() || inputs.size() > kMaxInputs)
    throw InvalidArgument("elementwise_view: " + std::to_string(inputs.size()) + " inputs given; give 1 to 8");
  if (output.is_scalar) throw InvalidArgument("elementwise_view: the output cannot be a scalar");
  std::int64_t mask = 0;
  std::size_t scalars = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_scalar) {
      mask |= std::int64_t{1} << i;
      ++scalars;
    }
  if (scalars > CallArgs::kMaxScalars)
    throw InvalidArgument("elementwise_view: " + std::to_string(scalars) +
                          " scalar inputs; at most 4 (pass more as 0-d tensors)");
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add(static_cast<std::int64_t>(inputs.size())).add(mask).text(expression);
  add_view(args, output.shape, output.strides);
  for (const ViewOperand& in : inputs) {
    if (in.is_scalar) {
      args.add(0).add(0);  // a 0-d view: its value is one of the call's scalars
      args.scalar(in.value);
    } else {
      add_view(args, in.shape, in.strides);
    }
  }
  return args;
}
}  // namespace detail

/// Element-wise expression over views: each input with its own shape and strides, broadcast to the output's shape
/// by PyTorch's rules (right-aligned; sizes equal or 1; a missing or size-1 dim, or a 0 stride, repeats the input),
/// the output any non-overlapping view. One kernel for what would be several passes: `y = x.permute(0, 2, 1) * s +
/// b`, a bias row added over a matrix, `a[:, 1:] * b`. Dims are merged where every operand allows, and the layout
/// class (contiguous, rows, broadcast_column, inner_transpose, general) is part of the problem the tuner keys on.
/// The expression and dtypes are as for elementwise. Throws InvalidArgument for shapes that do not broadcast,
/// negative strides, an output whose elements overlap or that overlaps an input (unless it is that input, stepping
/// alike), and what elementwise rejects.
inline void elementwise_view(Runtime& runtime, std::string_view expression, std::span<const ViewOperand> inputs,
                             const ViewOperand& output, DType dtype, Stream stream = nullptr) {
  const CallArgs args = detail::view_args(expression, inputs, output, dtype);
  const void* buffers[9];
  std::size_t n = 0;
  for (const ViewOperand& in : inputs)
    if (!in.is_scalar) buffers[n++] = in.data;
  buffers[n++] = output.data;
  call(runtime, "elementwise_view", args, std::span<const void* const>(buffers, n), stream);
}

/// The canonical problem signature of an elementwise_view call.
inline std::string elementwise_view_signature(std::string_view expression, std::span<const ViewOperand> inputs,
                                              const ViewOperand& output, DType dtype) {
  return call_signature("elementwise_view", detail::view_args(expression, inputs, output, dtype));
}

/// The canonical problem signature of an elementwise call, for Runtime::explain and the tuning store.
inline std::string elementwise_signature(std::string_view expression, std::int64_t n, DType dtype) {
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add(n).text(expression);
  return call_signature("elementwise", args);
}

}  // namespace jitune
