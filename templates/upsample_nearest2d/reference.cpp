// Random workloads and the CPU reference of the upsample_nearest2d family: the forward copies the source element
// PyTorch's rule picks (bit for bit); the backward sums each window in float in PyTorch's order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"

namespace jitune::templates::upsample_nearest2d {
namespace {

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float load_float(DType dtype, const std::byte* data, std::int64_t i) noexcept {
  if (dtype == DType::kFloat32) {
    float v;
    std::memcpy(&v, data + i * 4, 4);
    return v;
  }
  std::uint16_t bits;
  std::memcpy(&bits, data + i * 2, 2);
  return dtype == DType::kFloat16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits);
}

void store_float(DType dtype, std::byte* data, std::int64_t i, float value) noexcept {
  if (dtype == DType::kFloat32) {
    std::memcpy(data + i * 4, &value, 4);
    return;
  }
  const std::uint16_t bits = dtype == DType::kFloat16 ? float_to_half_bits(value) : float_to_bf16_bits(value);
  std::memcpy(data + i * 2, &bits, 2);
}

// Forward source index per output index of one dimension (a dimension that keeps its size copies indices).
std::vector<std::int64_t> source_table(std::int64_t in, std::int64_t out, float step, NearestMode mode) {
  std::vector<std::int64_t> table(static_cast<std::size_t>(out));
  for (std::int64_t d = 0; d < out; ++d) table[d] = in == out ? d : source_index(d, step, in, mode);
  return table;
}

// Backward window starts 0..in (inclusive) of one dimension; `copy`: identity windows.
std::vector<std::int64_t> window_table(std::int64_t in, std::int64_t out, float step, NearestMode mode, bool copy) {
  std::vector<std::int64_t> table(static_cast<std::size_t>(in + 1));
  for (std::int64_t i = 0; i <= in; ++i) table[i] = copy ? i : window_start(i, step, out, mode);
  return table;
}

}  // namespace

std::vector<std::byte> random_source(const UpsampleProblem& p, std::uint64_t seed) {
  const std::int64_t n = p.src_numel();
  std::vector<std::byte> buf(static_cast<std::size_t>(n) * dtype_size(p.dtype()));
  parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      // Magnitudes in [0.25, 4) with random sign: never zero. Element i depends on (seed, i) only.
      const std::uint64_t r = mix(seed * 0x2545f4914f6cdd1dull + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull);
      store_float(p.dtype(), buf.data(), i, static_cast<float>(random_nonzero(r)));
    }
  });
  return buf;
}

std::vector<std::byte> reference_output(const UpsampleProblem& p, const std::vector<std::byte>& src) {
  const UpsampleNearest2d& s = p.shape();
  const DType dtype = p.dtype();
  const std::size_t es = dtype_size(dtype);
  std::vector<std::byte> dst(static_cast<std::size_t>(p.dst_numel()) * es);
  if (p.empty()) return dst;
  const bool nhwc = p.layout() == ImageLayout::kNHWC;
  const std::int64_t nc = s.n * s.c;
  if (!p.backward()) {
    const auto hs = source_table(s.in_h, s.out_h, p.step_h(), p.mode());
    const auto ws = source_table(s.in_w, s.out_w, p.step_w(), p.mode());
    // One task per output row (nc, oh) in NCHW, per (n, oh) in NHWC; elements are copied as raw bytes.
    const std::int64_t rows = (nhwc ? s.n : nc) * s.out_h;
    parallel_for(rows, s.out_w * (nhwc ? s.c : 1), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t row = b; row < e; ++row) {
        const std::int64_t outer = row / s.out_h, oh = row % s.out_h;
        const std::int64_t in_row = outer * s.in_h + hs[oh];
        for (std::int64_t ow = 0; ow < s.out_w; ++ow) {
          if (nhwc) {
            std::memcpy(dst.data() + ((row * s.out_w + ow) * s.c) * es,
                        src.data() + ((in_row * s.in_w + ws[ow]) * s.c) * es,
                        static_cast<std::size_t>(s.c) * es);
          } else {
            std::memcpy(dst.data() + (row * s.out_w + ow) * es, src.data() + (in_row * s.in_w + ws[ow]) * es, es);
          }
        }
      }
    });
    return dst;
  }
  const auto hs = window_table(s.in_h, s.out_h, p.step_h(), p.mode(), p.copy());
  const auto ws = window_table(s.in_w, s.out_w, p.step_w(), p.mode(), p.copy());
  // grad_input element (.., ih, iw) = 0 + grad_output over rows [hs[ih], hs[ih+1]), columns [ws[iw], ws[iw+1]),
  // row by row, in float.
  const std::int64_t rows = (nhwc ? s.n : nc) * s.in_h;
  const std::int64_t window = std::max<std::int64_t>(1, p.max_window_h() * p.max_window_w());
  parallel_for(rows, s.in_w * (nhwc ? s.c : 1) * window, [&](std::int64_t b, std::int64_t e) {
    std::vector<float> acc(static_cast<std::size_t>(nhwc ? s.c : 1));
    for (std::int64_t row = b; row < e; ++row) {
      const std::int64_t outer = row / s.in_h, ih = row % s.in_h;
      for (std::int64_t iw = 0; iw < s.in_w; ++iw) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t y = hs[ih]; y < hs[ih + 1]; ++y)
          for (std::int64_t x = ws[iw]; x < ws[iw + 1]; ++x) {
            const std::int64_t at = (outer * s.out_h + y) * s.out_w + x;
            if (nhwc) {
              for (std::int64_t ch = 0; ch < s.c; ++ch) acc[ch] += load_float(dtype, src.data(), at * s.c + ch);
            } else {
              acc[0] += load_float(dtype, src.data(), at);
            }
          }
        const std::int64_t to = row * s.in_w + iw;
        if (nhwc) {
          for (std::int64_t ch = 0; ch < s.c; ++ch) store_float(dtype, dst.data(), to * s.c + ch, acc[ch]);
        } else {
          store_float(dtype, dst.data(), to, acc[0]);
        }
      }
    }
  });
  return dst;
}

}  // namespace jitune::templates::upsample_nearest2d
