// jitune::elementwise: OneFlow's vectorised elementwise template behind one call.
#pragma once

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

/// The canonical problem signature of an elementwise call, for Runtime::explain and the tuning store.
inline std::string elementwise_signature(std::string_view expression, std::int64_t n, DType dtype) {
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add(n).text(expression);
  return call_signature("elementwise", args);
}

}  // namespace jitune
