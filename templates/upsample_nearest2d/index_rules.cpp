// PyTorch's nearest-neighbour index rules on the host, in the same float arithmetic as its CUDA kernels
// (aten/src/ATen/native/cuda/UpSample.cuh): the CPU reference and the kernel choice both stand on these.
#include <algorithm>
#include <cmath>

#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"

namespace jitune::templates::upsample_nearest2d {

float forward_step(std::int64_t in, std::int64_t out, std::optional<double> scale_factor) noexcept {
  if (scale_factor && *scale_factor > 0) return static_cast<float>(1.0 / *scale_factor);
  return static_cast<float>(in) / static_cast<float>(out);
}

float backward_step(std::int64_t in, std::int64_t out, std::optional<double> scale_factor) noexcept {
  if (scale_factor && *scale_factor > 0) return static_cast<float>(*scale_factor);
  return static_cast<float>(out) / static_cast<float>(in);
}

std::int64_t source_index(std::int64_t dst, float step, std::int64_t in, NearestMode mode) noexcept {
  const float d = static_cast<float>(dst);
  // One float operation per statement: no contraction, the rounding PyTorch's kernels get.
  const float base = mode == NearestMode::kNearest ? d : d + 0.5f;
  const float x = base * step;
  return std::min(static_cast<std::int64_t>(std::floor(x)), in - 1);
}

std::int64_t window_start(std::int64_t i, float step, std::int64_t out, NearestMode mode) noexcept {
  const float d = static_cast<float>(i);
  // nvcc contracts PyTorch's `i * scale - 0.5f` into one FMA (its default -fmad=true).
  const float x = mode == NearestMode::kNearest ? d * step : std::fma(d, step, -0.5f);
  return std::min(static_cast<std::int64_t>(std::ceil(x)), out);
}

std::int64_t derived_size(std::int64_t in, double scale_factor) noexcept {
  const double size = static_cast<double>(in) * scale_factor;
  return size >= 9.2e18 ? std::int64_t{-1} : static_cast<std::int64_t>(size);
}

}  // namespace jitune::templates::upsample_nearest2d
