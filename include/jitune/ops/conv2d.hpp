// jitune::conv2d: NCHW or channels-last convolution (stride, zero padding, dilation, optional bias, an optional
// fused epilogue) behind one call: the direct kernel, or for float16 / bfloat16 on sm_80+ the tensor-core kernels,
// whichever is tuned (or the default).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <jitune/call.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

/// Shapes and geometry of one convolution, PyTorch `conv2d` semantics (groups = 1, cross-correlation).
struct Conv2dParams {
  std::array<std::int64_t, 4> input{};         ///< x: {N, C, H, W} (the logical shape in either layout).
  std::array<std::int64_t, 4> weight{};        ///< w: {K, C, R, S} (the logical shape in either layout).
  std::array<std::int64_t, 2> stride{1, 1};    ///< {vertical, horizontal}, >= 1.
  std::array<std::int64_t, 2> padding{0, 0};   ///< Zero padding {top and bottom, left and right}, >= 0.
  std::array<std::int64_t, 2> dilation{1, 1};  ///< {vertical, horizontal}, >= 1.
  /// kNCHW: x, w and y contiguous as {N, C, H, W}, {K, C, R, S}, {N, K, P, Q}. kNHWC (channels last, what
  /// torch.channels_last models hold): x stored {N, H, W, C}, w {K, R, S, C}, y {N, P, Q, K}; float16 /
  /// bfloat16 on sm_80+ only (the tensor-core kernel).
  ImageLayout layout = ImageLayout::kNCHW;
  /// Empty (y is the convolution plus bias), or an elementwise expression applied to every output element before
  /// it is stored, in the same kernel: "y = max(acc, 0.0f)" (ReLU), "y = max(acc + r, 0.0f)" (residual add and
  /// ReLU), "y = acc * 0.5f + r". It reads acc, the convolution plus bias as an unfused conv2d would store it
  /// (rounded to the dtype), and r, the element of a residual tensor laid out and shaped as y at the same
  /// position; it is evaluated in float and rounded once. Constants are numbers in the text (each text is its own
  /// kernel). The syntax and functions are the elementwise op's.
  std::string epilogue;
  /// float32 only: kTF32 lets the tuner run the convolution on TF32 tensor cores (the implicit GEMM on sm_80+),
  /// each input truncated to 10 mantissa bits and the products summed in float, beside the exact kernels; the
  /// fastest is kept. kIeee (the default) keeps every float32 product exact. float16 / bfloat16 ignore it. Part
  /// of the problem's signature (";precision=tf32"), so TF32 and exact records never serve each other.
  Fp32Precision precision = Fp32Precision::kIeee;
};

/// The output shape {N, K, P, Q} of `params`: P = (H + 2 * pad_h - dilation_h * (R - 1) - 1) / stride_h + 1,
/// Q alike. Throws InvalidArgument as conv2d() would (channel mismatch, filter larger than the padded input,
/// ...).
std::array<std::int64_t, 4> conv2d_output_shape(const Conv2dParams& params);

/// The call's values in the order the conv2d family reads them: dtype, input, weight, stride, padding, dilation,
/// bias flag, layout, precision; the epilogue is the call's text.
inline void conv2d_call_args(CallArgs& args, const Conv2dParams& params, DType dtype, bool has_bias) {
  args.add(static_cast<std::int64_t>(dtype));
  for (const auto* part : {params.input.data(), params.weight.data()})
    for (int i = 0; i < 4; ++i) args.add(part[i]);
  for (const auto* part : {params.stride.data(), params.padding.data(), params.dilation.data()})
    for (int i = 0; i < 2; ++i) args.add(part[i]);
  args.add(has_bias ? 1 : 0);
  args.add(static_cast<std::int64_t>(params.layout));
  args.add(static_cast<std::int64_t>(params.precision));
  args.text(params.epilogue);
}

/// y = epilogue(conv2d(x, w) + bias, residual) on `stream`: x {N, C, H, W}, w {K, C, R, S}, bias {K} (nullptr:
/// none), y {N, K, P, Q} and the residual (read only where params.epilogue reads r; nullptr otherwise) laid out as
/// y, all contiguous in params.layout, of `dtype`; y must not overlap the inputs (float32, float16 or bfloat16;
/// products are summed in float). Any element-aligned pointers work; wider vector accesses are used where the
/// addresses allow. N == 0 launches nothing (the call is still validated). Throws InvalidArgument for a channel
/// mismatch between x and w, a filter (with dilation) larger than the padded input, non-positive sizes /
/// strides / dilations, negative padding, null or misaligned pointers (the residual null while the epilogue
/// reads r), an epilogue that does not parse or reads names other than acc and r, an unsupported dtype, or
/// channels last where no kernel runs it (float32, or a GPU before sm_80); CompileError if NVRTC rejects the
/// kernel.
inline void conv2d(Runtime& runtime, const void* x, const void* w, const void* bias, const void* residual, void* y,
                   const Conv2dParams& params, DType dtype, Stream stream = nullptr) {
  CallArgs args;
  conv2d_call_args(args, params, dtype, bias != nullptr);
  const void* buffers[] = {x, w, bias, y, residual};
  call(runtime, "conv2d", args, buffers, stream);
}

/// y = conv2d(x, w) + bias (then params.epilogue where it reads no residual): the call above without a residual.
inline void conv2d(Runtime& runtime, const void* x, const void* w, const void* bias, void* y,
                   const Conv2dParams& params, DType dtype, Stream stream = nullptr) {
  conv2d(runtime, x, w, bias, nullptr, y, params, dtype, stream);
}

/// The canonical problem signature of a conv2d call (for Runtime::explain and the tuning store).
inline std::string conv2d_signature(const Conv2dParams& params, DType dtype, bool has_bias) {
  CallArgs args;
  conv2d_call_args(args, params, dtype, has_bias);
  return call_signature("conv2d", args);
}

}  // namespace jitune
