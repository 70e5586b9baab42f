// Scatter_add verification on the host: random workloads, the CPU reference in double and its tolerance.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"
#include "templates/scatter_add/scatter_add_detail.hpp"

namespace jitune::templates::scatter_add {
namespace {

// Random values with magnitude in [0.25, 4) and random sign (never zero), stream `stream` of `seed`.
void fill_random(DType dtype, std::vector<std::byte>& buf, std::uint64_t n, std::uint64_t seed) {
  buf.resize(n * dtype_size(dtype));
  fill_random_nonzero(dtype, buf.data(), n, seed);
}

// A bijection of [0, n): a 4-round Feistel network on the next even power of two, cycle-walking back into
// range.
class Permutation {
 public:
  Permutation(std::uint64_t n, std::uint64_t seed) : n_(n) {
    int bits = 2;
    while ((std::uint64_t{1} << bits) < n) ++bits;
    half_ = (bits + 1) / 2;
    for (int r = 0; r < 4; ++r) keys_[r] = mix64(seed + 0x51ed2701u * static_cast<std::uint64_t>(r + 1));
  }
  std::uint64_t operator()(std::uint64_t x) const {
    do x = round_trip(x);
    while (x >= n_);
    return x;
  }

 private:
  std::uint64_t round_trip(std::uint64_t x) const {
    const std::uint64_t mask = (std::uint64_t{1} << half_) - 1;
    std::uint64_t left = x >> half_, right = x & mask;
    for (std::uint64_t key : keys_) {
      const std::uint64_t f = mix64(right ^ key) & mask;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }
  std::uint64_t n_;
  int half_ = 1;
  std::uint64_t keys_[4] = {};
};

double unit_roundoff(DType d) {
  switch (d) {
    case DType::kFloat16:
      return std::ldexp(1.0, -11);
    case DType::kBFloat16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

}  // namespace

namespace detail {

Workload workload(const ScatterAddProblem& p, std::uint64_t seed) {
  Workload w;
  if (p.op() == Op::kDot) {
    w.inputs.resize(2);
    fill_random(p.dtype(), w.inputs[0], static_cast<std::uint64_t>(p.count()), seed * 2 + 1);
    fill_random(p.dtype(), w.inputs[1], static_cast<std::uint64_t>(p.count()), seed * 2 + 2);
    w.output_bytes = {dtype_size(p.dtype())};
    return w;
  }
  const auto count = static_cast<std::uint64_t>(p.count());
  w.inputs.resize(2);
  auto& index = w.inputs[0];
  const std::size_t isz = dtype_size(p.index_dtype());
  index.resize(count * isz);
  const Permutation perm(count, seed);
  const auto rows = static_cast<std::uint64_t>(p.rows());
  parallel_for(count, [&](std::uint64_t b, std::uint64_t e) {
    for (std::uint64_t i = b; i < e; ++i) {
      const std::uint64_t r = perm(i) % rows;
      if (isz == 4) {
        const auto v = static_cast<std::int32_t>(r);
        std::memcpy(index.data() + i * 4, &v, 4);
      } else {
        const auto v = static_cast<std::int64_t>(r);
        std::memcpy(index.data() + i * 8, &v, 8);
      }
    }
  });
  fill_random(p.dtype(), w.inputs[1], count * static_cast<std::uint64_t>(p.row_length()), seed * 3 + 1);
  std::vector<std::byte> initial;
  fill_random(p.dtype(), initial, static_cast<std::uint64_t>(p.dst_elements()), seed * 3 + 2);
  w.output_bytes = {initial.size()};
  w.initial_outputs = {std::move(initial)};
  return w;
}

std::vector<std::vector<std::byte>> reference(const ScatterAddProblem& p, const Workload& w) {
  std::vector<std::vector<std::byte>> out;
  if (p.op() == Op::kDot) {
    double sum = 0;
    for (std::int64_t i = 0; i < p.count(); ++i)
      sum += load_element(p.dtype(), w.inputs[0].data(), static_cast<std::uint64_t>(i)) *
             load_element(p.dtype(), w.inputs[1].data(), static_cast<std::uint64_t>(i));
    out.emplace_back(dtype_size(p.dtype()));
    store_element(p.dtype(), out.back().data(), 0, sum);
    return out;
  }
  const std::int64_t d = p.row_length();
  std::vector<double> acc(static_cast<std::size_t>(p.dst_elements()));
  for (std::size_t e = 0; e < acc.size(); ++e)
    acc[e] = load_element(p.dtype(), w.initial_outputs[0].data(), e);
  const bool i32 = p.index_dtype() == DType::kInt32;
  for (std::int64_t i = 0; i < p.count(); ++i) {
    std::int64_t r;
    if (i32) {
      std::int32_t v;
      std::memcpy(&v, w.inputs[0].data() + i * 4, 4);
      r = v;
    } else {
      std::memcpy(&r, w.inputs[0].data() + i * 8, 8);
    }
    for (std::int64_t c = 0; c < d; ++c)
      acc[static_cast<std::size_t>(r * d + c)] +=
          load_element(p.dtype(), w.inputs[1].data(), static_cast<std::uint64_t>(i * d + c));
  }
  out.emplace_back(acc.size() * dtype_size(p.dtype()));
  for (std::size_t e = 0; e < acc.size(); ++e) store_element(p.dtype(), out.back().data(), e, acc[e]);
  return out;
}

}  // namespace detail

OutputCheck accumulation_check(DType dtype, DType accumulation, std::int64_t contributions, double rms) {
  const double u_acc = unit_roundoff(accumulation), u_out = unit_roundoff(dtype);
  const double sigma =
      u_acc * rms * static_cast<double>(std::max<std::int64_t>(contributions, 1)) / std::sqrt(6.0);
  OutputCheck c;
  c.dtype = dtype;
  c.rtol = 2 * u_out;
  c.atol = 12 * sigma + u_out * rms;
  return c;
}

}  // namespace jitune::templates::scatter_add
