// Host conversions between float and the 16-bit float formats (IEEE half, bfloat16), round to nearest even,
// typed element access for host-side workloads and references, and the random fill of workload inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <jitune/tensor.hpp>

namespace jitune {

/// IEEE binary16 bits of `value`, rounded to nearest even (overflow -> inf, NaN kept).
std::uint16_t float_to_half_bits(float value) noexcept;
/// The float value of IEEE binary16 bits.
float half_bits_to_float(std::uint16_t bits) noexcept;
/// bfloat16 bits of `value`, rounded to nearest even (NaN kept quiet).
std::uint16_t float_to_bf16_bits(float value) noexcept;
/// The float value of bfloat16 bits.
inline float bf16_bits_to_float(std::uint16_t bits) noexcept {
  std::uint32_t u = std::uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Element `i` of a host buffer of `dtype`, as double.
double load_element(DType dtype, const void* data, std::uint64_t i) noexcept;
/// Stores `value` (rounded to `dtype`) into element `i`.
void store_element(DType dtype, void* data, std::uint64_t i, double value) noexcept;

/// Fills `count` elements of `dtype` at `data` with random_nonzero values (templates/host_parallel.hpp), element i
/// from the bits mix64(seed * 0x2545f4914f6cdd1d + i): a hash of (seed, index), so the same seed gives the same data
/// whatever the core count. Runs on all cores.
void fill_random_nonzero(DType dtype, std::byte* data, std::uint64_t count, std::uint64_t seed);

}  // namespace jitune
