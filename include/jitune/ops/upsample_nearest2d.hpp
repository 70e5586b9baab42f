// jitune::upsample_nearest2d and its backward: PyTorch's F.interpolate(mode="nearest" / "nearest-exact") on 4-d
// image batches, NCHW or NHWC, float32 / float16 / bfloat16, tuned per GPU and problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <jitune/call.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

/// How the source pixel is picked; the names and rules are PyTorch's.
enum class NearestMode : std::uint8_t {
  kNearest,       ///< mode="nearest": source = min(floor(dst * scale), in - 1).
  kNearestExact,  ///< mode="nearest-exact": source = min(floor((dst + 0.5) * scale), in - 1).
};

/// "nearest" / "nearest-exact".
std::string_view nearest_mode_name(NearestMode mode) noexcept;

/// One nearest-neighbour 2D resampling: F.interpolate(x, size=(out_h, out_w) or scale_factor=(scale_h, scale_w),
/// mode=...) on an n x c x in_h x in_w batch.
///
/// Output size: out_h / out_w when given (> 0), else floor(in * scale) as PyTorch computes it (the scale is then
/// required). Index rule: `scale` below is PyTorch's float step, 1 / scale_factor when a scale factor is given, else
/// in / out; a dimension whose size does not change copies its indices. Giving both a size and a scale factor is
/// what aten::upsample_nearest2d(input, output_size, scales_h, scales_w) does: the size sets the shape, the factor
/// the index rule. Any integer or fractional scale works, upsampling or downsampling; equal sizes are a copy.
struct UpsampleNearest2d {
  std::int64_t n = 1;                    ///< Batch (0: nothing to do).
  std::int64_t c = 1;                    ///< Channels (0: nothing to do).
  std::int64_t in_h = 0, in_w = 0;       ///< Input size, >= 1.
  std::int64_t out_h = 0, out_w = 0;     ///< Output size, >= 1; 0: floor(in * scale).
  std::optional<double> scale_h, scale_w;  ///< scale_factor (output / input, > 0), as given to F.interpolate.
  ImageLayout layout = ImageLayout::kNCHW;
  NearestMode mode = NearestMode::kNearest;
  DType dtype = DType::kFloat32;         ///< float32, float16 or bfloat16.
};

/// The call's values in the order the upsample_nearest2d family reads them.
inline void upsample_nearest2d_call_args(CallArgs& args, const UpsampleNearest2d& s, bool backward) {
  args.add(backward ? 1 : 0).add(static_cast<std::int64_t>(s.dtype)).add(static_cast<std::int64_t>(s.layout));
  args.add(static_cast<std::int64_t>(s.mode));
  for (std::int64_t v : {s.n, s.c, s.in_h, s.in_w, s.out_h, s.out_w}) args.add(v);
  for (const std::optional<double>& scale : {s.scale_h, s.scale_w})
    args.add(scale.has_value() ? 1 : 0).add_double(scale.value_or(0.0));
}

/// output = F.interpolate(input, ..., mode) for contiguous `input` (n, c, in_h, in_w) and `output` (n, c, out_h,
/// out_w) in `shape.layout`. Bit-identical to PyTorch's CUDA result. Exact 2x in both dimensions runs OneFlow's
/// packed 2x kernel when the pointers allow its vector accesses; every other case a tuned gather. Pointers need only
/// be aligned to the element size; the widest vector access they allow is used. Runs asynchronously on `stream`.
/// Throws InvalidArgument for non-positive sizes or scales, a missing size and scale, an output size PyTorch would
/// reject, an unsupported dtype, null or misaligned pointers, or overlapping input and output.
inline void upsample_nearest2d(Runtime& runtime, const UpsampleNearest2d& shape, const void* input, void* output,
                               Stream stream = nullptr) {
  CallArgs args;
  upsample_nearest2d_call_args(args, shape, false);
  const void* buffers[] = {input, output};
  call(runtime, "upsample_nearest2d", args, buffers, stream);
}

/// grad_input = the gradient of upsample_nearest2d with `shape` for `grad_output` (n, c, out_h, out_w), written
/// (not accumulated) into `grad_input` (n, c, in_h, in_w), as PyTorch's CUDA aten::upsample_nearest2d_backward (and
/// _upsample_nearest_exact2d_backward): grad_input[i] sums grad_output over the window [start(i), start(i + 1)) of
/// each dimension, start(i) = min(ceil(i * s), out) (nearest-exact: ceil(i * s - 0.5)), s = scale_factor when given,
/// else out / in; equal sizes copy. (PyTorch's window rule is not always the exact adjoint of its forward when the
/// float steps round unevenly; jitune follows PyTorch.) Exact 2x reads each 2x2 block once and writes once; other
/// scales either gather each window (atomic-free) or scatter with packed atomics, whichever the tuning picked.
/// Sums run in float; the gathers reproduce PyTorch's order, so they match it bit for bit. Same errors as above.
inline void upsample_nearest2d_backward(Runtime& runtime, const UpsampleNearest2d& shape, const void* grad_output,
                                        void* grad_input, Stream stream = nullptr) {
  CallArgs args;
  upsample_nearest2d_call_args(args, shape, true);
  const void* buffers[] = {grad_output, grad_input};
  call(runtime, "upsample_nearest2d", args, buffers, stream);
}

/// The canonical problem signature of a call, for Runtime::explain and the tuning store:
/// "c=32;direction=forward;dtype=float32;in_h=80;in_w=80;layout=nchw;mode=nearest;n=16;out_h=160;out_w=160;
/// scale_h=2;scale_w=2". Throws InvalidArgument as the ops do.
inline std::string upsample_nearest2d_signature(const UpsampleNearest2d& shape, bool backward = false) {
  CallArgs args;
  upsample_nearest2d_call_args(args, shape, backward);
  return call_signature("upsample_nearest2d", args);
}

}  // namespace jitune
