// Element types and the small tensor descriptions the ops take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

/// The driver's stream handle; `cudaStream_t` and `CUstream` are both this pointer type.
struct CUstream_st;

namespace jitune {

/// A CUDA stream (`cudaStream_t` / `CUstream`); nullptr is the legacy default stream.
using Stream = CUstream_st*;

/// Element types jitune kernels handle.
enum class DType : std::uint8_t { kFloat32, kFloat16, kBFloat16, kFloat64, kInt8, kUInt8, kInt16, kInt32, kInt64 };

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype) noexcept;

/// Canonical name: "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64".
std::string_view dtype_name(DType dtype) noexcept;

/// Memory layout of a contiguous 4-d image batch (upsample_nearest2d, conv2d).
enum class ImageLayout : std::uint8_t {
  kNCHW,  ///< N, C, H, W from outermost to innermost (PyTorch's contiguous format).
  kNHWC,  ///< N, H, W, C: channels last (torch.channels_last).
};
/// "nchw" / "nhwc".
std::string_view image_layout_name(ImageLayout layout) noexcept;

/// How float32 products may be computed (PyTorch's `fp32_precision`): kIeee, exactly, as float products summed in
/// float (the default); kTF32, an explicit opt-in to TF32 tensor cores, which read each float32 input's sign,
/// exponent and top 10 of its 23 mantissa bits (the input truncated toward zero, a relative error below 2^-10) and
/// sum the products in float. Only float32 problems carry it: float16 / bfloat16 inputs are exact on tensor cores
/// already, so their problems drop it.
enum class Fp32Precision : std::uint8_t {
  kIeee,  ///< float32 products, exact inputs (the default).
  kTF32,  ///< TF32 tensor cores may run float32 problems (each input truncated to 10 mantissa bits).
};
/// "ieee" / "tf32".
std::string_view fp32_precision_name(Fp32Precision precision) noexcept;

/// The device-code type name used in kernel templates: "float", "__half", "__nv_bfloat16", ...
std::string_view dtype_cuda_type(DType dtype) noexcept;

/// Parses a dtype name (canonical names and the aliases "float", "half", "f32", "f16", "bf16", "double").
/// Throws InvalidArgument listing the accepted names when `name` is none of them.
DType parse_dtype(std::string_view name);

}  // namespace jitune
