// Bit-exact host conversions for half and bfloat16, and the random fill of workload inputs.
#include "templates/host_float.hpp"

#include <cmath>

#include "templates/host_parallel.hpp"

namespace jitune {

std::uint16_t float_to_half_bits(float value) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exp = (x >> 23) & 0xffu;
  std::uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into the exponent: still correct
  return static_cast<std::uint16_t>(sign | half);
}

float half_bits_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = (bits & 0x8000u) << 16;
  std::uint32_t exp = (bits >> 10) & 0x1fu;
  std::uint32_t mant = bits & 0x3ffu;
  std::uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

std::uint16_t float_to_bf16_bits(float value) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

double load_element(DType dtype, const void* data, std::uint64_t i) noexcept {
  const auto* p = static_cast<const unsigned char*>(data) + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kFloat32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kFloat16: { std::uint16_t v; std::memcpy(&v, p, 2); return half_bits_to_float(v); }
    case DType::kBFloat16: { std::uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_float(v); }
    case DType::kFloat64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::kInt8: return static_cast<double>(static_cast<const std::int8_t*>(static_cast<const void*>(p))[0]);
    case DType::kUInt8: return static_cast<double>(p[0]);
    case DType::kInt16: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kInt32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kInt64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
  return 0;
}

void store_element(DType dtype, void* data, std::uint64_t i, double value) noexcept {
  auto* p = static_cast<unsigned char*>(data) + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kFloat32: { float v = static_cast<float>(value); std::memcpy(p, &v, 4); return; }
    case DType::kFloat16: { auto v = float_to_half_bits(static_cast<float>(value)); std::memcpy(p, &v, 2); return; }
    case DType::kBFloat16: { auto v = float_to_bf16_bits(static_cast<float>(value)); std::memcpy(p, &v, 2); return; }
    case DType::kFloat64: std::memcpy(p, &value, 8); return;
    case DType::kInt8: { auto v = static_cast<std::int8_t>(value); std::memcpy(p, &v, 1); return; }
    case DType::kUInt8: { auto v = static_cast<std::uint8_t>(value); std::memcpy(p, &v, 1); return; }
    case DType::kInt16: { auto v = static_cast<std::int16_t>(value); std::memcpy(p, &v, 2); return; }
    case DType::kInt32: { auto v = static_cast<std::int32_t>(value); std::memcpy(p, &v, 4); return; }
    case DType::kInt64: { auto v = static_cast<std::int64_t>(value); std::memcpy(p, &v, 8); return; }
  }
}

void fill_random_nonzero(DType dtype, std::byte* data, std::uint64_t count, std::uint64_t seed) {
  parallel_for(count, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i)
      store_element(dtype, data, i, random_nonzero(mix64(seed * 0x2545f4914f6cdd1dull + i)));
  });
}

}  // namespace jitune
