// Conv2d verification on the host: the random workload and the CPU reference (double sums).
#include <algorithm>

#include "templates/conv2d/conv2d_detail.hpp"
#include "templates/elementwise/expression.hpp"
#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"

namespace jitune::templates::conv2d {
namespace {

// Random values with magnitude in [0.25, 4) and random sign (never zero), `count` elements of `dtype`.
std::vector<std::byte> random_tensor(DType dtype, std::uint64_t count, std::uint64_t seed) {
  std::vector<std::byte> buf(count * dtype_size(dtype));
  parallel_for(count, 1, [&](std::uint64_t b, std::uint64_t e) {
    std::uint64_t state = seed ^ (b * 0x2545f4914f6cdd1dull);
    for (std::uint64_t i = b; i < e; ++i) {
      store_element(dtype, buf.data(), i, random_nonzero(splitmix(state)));
    }
  });
  return buf;
}

// {outer, a, b, c} -> {outer, c, a, b}: NHWC to NCHW, and KRSC to KCRS.
std::vector<float> channels_first(const std::vector<float>& v, std::int64_t outer, std::int64_t a, std::int64_t b,
                                  std::int64_t c) {
  std::vector<float> out(v.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < a; ++i)
      for (std::int64_t j = 0; j < b; ++j)
        for (std::int64_t k = 0; k < c; ++k)
          out[static_cast<std::size_t>(((o * c + k) * a + i) * b + j)] =
              v[static_cast<std::size_t>(((o * a + i) * b + j) * c + k)];
  return out;
}

}  // namespace

namespace detail {

Workload workload(const ConvProblem& p, std::uint64_t seed) {
  const auto& s = p.shape();
  Workload w;
  w.inputs.push_back(
      random_tensor(p.dtype(), static_cast<std::uint64_t>(s.n * s.c * s.h * s.w), seed * 3 + 1));
  w.inputs.push_back(
      random_tensor(p.dtype(), static_cast<std::uint64_t>(s.k * s.c * s.r * s.s), seed * 3 + 2));
  if (s.bias) w.inputs.push_back(random_tensor(p.dtype(), static_cast<std::uint64_t>(s.k), seed * 3 + 3));
  const auto outputs = static_cast<std::uint64_t>(s.n * s.k * p.p() * p.q());
  if (p.residual()) w.inputs.push_back(random_tensor(p.dtype(), outputs, seed * 3 + 4));
  w.output_bytes = {static_cast<std::size_t>(outputs) * dtype_size(p.dtype())};
  return w;
}

std::vector<std::vector<std::byte>> reference(const ConvProblem& p, const Workload& work) {
  const auto& s = p.shape();
  const DType dt = p.dtype();
  auto to_floats = [dt](const std::vector<std::byte>& bytes) {
    std::vector<float> v(bytes.size() / dtype_size(dt));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(load_element(dt, bytes.data(), i));
    return v;
  };
  std::vector<float> x = to_floats(work.inputs[0]), wt = to_floats(work.inputs[1]);
  const bool nhwc = s.layout == ImageLayout::kNHWC;
  if (nhwc) {  // to NCHW / KCRS, the order the loops below read: both move the innermost channel axis second
    x = channels_first(x, s.n, s.h, s.w, s.c);
    wt = channels_first(wt, s.k, s.r, s.s, s.c);
  }
  const std::vector<float> bias = s.bias ? to_floats(work.inputs[2]) : std::vector<float>();
  // The epilogue sees acc rounded to the dtype (what the kernels store before it) and the residual element at the
  // same position of y's layout.
  const std::unique_ptr<elementwise::Evaluator> epilogue =
      p.epilogue() ? std::make_unique<elementwise::Evaluator>(*p.epilogue()) : nullptr;
  const std::byte* residual = p.residual() ? work.inputs.back().data() : nullptr;
  const std::vector<std::string> names = p.epilogue() ? p.epilogue()->inputs : std::vector<std::string>();
  const std::int64_t P = p.p(), Q = p.q();
  std::vector<std::byte> out(static_cast<std::size_t>(s.n * s.k * P * Q) * dtype_size(dt));
  parallel_for(
      static_cast<std::uint64_t>(s.n * s.k), static_cast<std::uint64_t>(P * Q * p.terms()),
      [&](std::uint64_t begin, std::uint64_t end) {
        std::vector<double> acc(static_cast<std::size_t>(P * Q));
        for (std::uint64_t nk = begin; nk < end; ++nk) {
          const std::int64_t n = static_cast<std::int64_t>(nk) / s.k, k = static_cast<std::int64_t>(nk) % s.k;
          std::fill(acc.begin(), acc.end(), s.bias ? double(bias[k]) : 0.0);
          for (std::int64_t c = 0; c < s.c; ++c)
            for (std::int64_t r = 0; r < s.r; ++r)
              for (std::int64_t t = 0; t < s.s; ++t) {
                const double wv = wt[((k * s.c + c) * s.r + r) * s.s + t];
                const std::int64_t col = t * s.dilation_w - s.pad_w;  // input column of output column 0
                // Output columns whose input column lies inside [0, W).
                std::int64_t q_lo = col >= 0 ? 0 : (-col + s.stride_w - 1) / s.stride_w;
                std::int64_t q_hi = s.w - 1 - col < 0 ? 0 : std::min(Q, (s.w - 1 - col) / s.stride_w + 1);
                for (std::int64_t oy = 0; oy < P; ++oy) {
                  const std::int64_t iy = oy * s.stride_h - s.pad_h + r * s.dilation_h;
                  if (iy < 0 || iy >= s.h) continue;
                  const float* xrow = x.data() + ((n * s.c + c) * s.h + iy) * s.w + col;
                  double* arow = acc.data() + oy * Q;
                  for (std::int64_t ox = q_lo; ox < q_hi; ++ox) arow[ox] += wv * xrow[ox * s.stride_w];
                }
              }
          for (std::int64_t i = 0; i < P * Q; ++i) {
            const auto at = static_cast<std::uint64_t>(nhwc ? (n * P * Q + i) * s.k + k : (n * s.k + k) * P * Q + i);
            store_element(dt, out.data(), at, acc[i]);
            if (epilogue) {
              double v[2];
              for (std::size_t j = 0; j < names.size(); ++j)
                v[j] = names[j] == "acc" ? load_element(dt, out.data(), at) : load_element(dt, residual, at);
              store_element(dt, out.data(), at, (*epilogue)(v));
            }
          }
        }
      });
  return {std::move(out)};
}

}  // namespace detail

}  // namespace jitune::templates::conv2d
