// Permute verification on the host: the random workload and the CPU reference.
#include <cstring>

#include "templates/host_parallel.hpp"
#include "templates/permute/permute_detail.hpp"

namespace jitune::templates::permute::detail {

Workload workload(const PermuteProblem& p, std::uint64_t seed) {
  const auto es = static_cast<std::size_t>(p.element_size());
  const auto count = static_cast<std::uint64_t>(p.elements());
  Workload w;
  w.inputs.emplace_back(count * es);
  std::byte* data = w.inputs[0].data();
  parallel_for(count, [&](std::uint64_t b, std::uint64_t e) {
    std::uint64_t state = seed * 1000003u ^ (b * 0x2545f4914f6cdd1dull);
    for (std::uint64_t i = b; i < e; ++i) {
      const std::uint64_t r = splitmix(state);
      std::byte* el = data + i * es;
      std::memcpy(el, &r, es);
      // Never all 0xFF (the poison: an unwritten element must fail) and never all zero.
      bool all_ff = true, all_zero = true;
      for (std::size_t k = 0; k < es; ++k) {
        all_ff = all_ff && el[k] == std::byte{0xFF};
        all_zero = all_zero && el[k] == std::byte{0};
      }
      if (all_ff) el[0] = std::byte{0x5A};
      if (all_zero) el[0] = std::byte{0xA5};
    }
  });
  w.output_bytes = {count * es};
  return w;
}

// Straight from the unsimplified shape and permutation (no plan), so a simplification bug cannot hide in
// it.
std::vector<std::vector<std::byte>> reference(const PermuteProblem& p, const Workload& w) {
  const auto es = static_cast<std::size_t>(p.element_size());
  const int n = static_cast<int>(p.shape().size());
  const auto count = static_cast<std::uint64_t>(p.elements());
  std::vector<std::byte> out(count * es);
  if (count == 0) return {std::move(out)};
  std::int64_t in_stride[kMaxRank], out_dims[kMaxRank], src_stride[kMaxRank];
  std::int64_t s = 1;
  for (int d = n - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= p.shape()[d];
  }
  for (int i = 0; i < n; ++i) {
    out_dims[i] = p.shape()[p.perm()[i]];
    src_stride[i] = in_stride[p.perm()[i]];
  }
  const std::byte* in = w.inputs.at(0).data();
  parallel_for(count, [&](std::uint64_t b, std::uint64_t e) {
    std::int64_t index[kMaxRank] = {};
    std::int64_t src = 0;
    std::uint64_t rest = b;
    for (int i = n - 1; i >= 0; --i) {
      index[i] = static_cast<std::int64_t>(rest % static_cast<std::uint64_t>(out_dims[i]));
      rest /= static_cast<std::uint64_t>(out_dims[i]);
      src += index[i] * src_stride[i];
    }
    for (std::uint64_t o = b; o < e; ++o) {
      std::memcpy(out.data() + o * es, in + static_cast<std::uint64_t>(src) * es, es);
      for (int i = n - 1; i >= 0; --i) {  // odometer over the output index
        src += src_stride[i];
        if (++index[i] < out_dims[i]) break;
        src -= src_stride[i] * out_dims[i];
        index[i] = 0;
      }
    }
  });
  return {std::move(out)};
}

}  // namespace jitune::templates::permute::detail
