// DType names, sizes and parsing; nominal devices for compile-only work.
#include <jitune/device.hpp>
#include <jitune/error.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

std::string_view image_layout_name(ImageLayout layout) noexcept {
  return layout == ImageLayout::kNHWC ? "nhwc" : "nchw";
}

std::string_view fp32_precision_name(Fp32Precision precision) noexcept {
  return precision == Fp32Precision::kTF32 ? "tf32" : "ieee";
}

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

std::string_view dtype_cuda_type(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32: return "float";
    case DType::kFloat16: return "__half";
    case DType::kBFloat16: return "__nv_bfloat16";
    case DType::kFloat64: return "double";
    case DType::kInt8: return "signed char";
    case DType::kUInt8: return "unsigned char";
    case DType::kInt16: return "short";
    case DType::kInt32: return "int";
    case DType::kInt64: return "long long";
  }
  return "void";
}

DType parse_dtype(std::string_view name) {
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kFloat32}, {"float", DType::kFloat32},     {"f32", DType::kFloat32},
      {"float16", DType::kFloat16}, {"half", DType::kFloat16},      {"f16", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"bf16", DType::kBFloat16},   {"float64", DType::kFloat64},
      {"double", DType::kFloat64},  {"f64", DType::kFloat64},       {"int8", DType::kInt8},
      {"uint8", DType::kUInt8},     {"int16", DType::kInt16},       {"int32", DType::kInt32},
      {"int", DType::kInt32},       {"int64", DType::kInt64},
  };
  for (const Alias& a : kAliases)
    if (a.name == name) return a.dtype;
  throw InvalidArgument("unknown dtype '" + std::string(name) +
                        "'; use one of float32, float16, bfloat16, float64, int8, uint8, int16, int32, int64");
}

DeviceInfo nominal_device(int cc) {
  DeviceInfo d;
  d.cc_major = cc / 10;
  d.cc_minor = cc % 10;
  d.name = "nominal sm_" + std::to_string(cc);
  if (cc >= 90) {
    d.sm_count = 132;
    d.l2_bytes = 50 << 20;
    d.max_shared_per_block_optin = 227 * 1024;
    d.max_shared_per_sm = 228 * 1024;
    d.sm_clock_mhz = 1980;
    d.memory_clock_mhz = 2619;
  } else {
    d.sm_count = 108;
    d.l2_bytes = 40 << 20;
    d.max_shared_per_block_optin = 163 * 1024;
    d.max_shared_per_sm = 164 * 1024;
    d.sm_clock_mhz = 1410;
    d.memory_clock_mhz = 1593;
  }
  return d;
}

}  // namespace jitune
