// Host-side helpers the families share for workloads and CPU references: a parallel loop over the machine's cores
// (references reach 2^27 elements), a small, fast, seedable random generator, and the never-zero random values
// workloads are filled with.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace jitune {

/// Runs body(begin, end) over [0, n) split into one chunk per core; one chunk when n items of `work_per_item`
/// units each are too little work to share.
template <class F>
void parallel_for(std::uint64_t n, std::uint64_t work_per_item, F&& body) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads =
      n * work_per_item < (1u << 16) ? 1u : static_cast<unsigned>(std::min<std::uint64_t>(cores, n));
  if (threads <= 1) {
    body(std::uint64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const std::uint64_t chunk = (n + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    const std::uint64_t begin = std::min(n, chunk * t), end = std::min(n, begin + chunk);
    pool.emplace_back([&body, begin, end] { body(begin, end); });
  }
  for (auto& th : pool) th.join();
}

/// parallel_for with one unit of work per item.
template <class F>
void parallel_for(std::uint64_t n, F&& body) {
  parallel_for(n, 1, std::forward<F>(body));
}

/// The splitmix64 finaliser of `z + golden ratio`: a stateless hash of a counter (parallel fills use it per index).
inline std::uint64_t mix64(std::uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// splitmix64: the next 64 random bits from `state`.
inline std::uint64_t splitmix(std::uint64_t& state) noexcept {
  const std::uint64_t z = mix64(state);
  state += 0x9e3779b97f4a7c15ull;
  return z;
}

/// A random value that is never zero, from 64 random bits: magnitude in [0.25, 4) (the top 24 bits are the
/// mantissa, bits 0-1 the binary exponent -2..1), negative when bit 2 is set. Workload inputs are drawn this way so
/// comparisons take both branches and relative errors stay meaningful.
inline double random_nonzero(std::uint64_t bits) noexcept {
  const double magnitude =
      std::ldexp(1.0 + static_cast<double>(bits >> 40) / double(1ull << 24), static_cast<int>(bits & 3) - 2);
  return (bits & 4) ? -magnitude : magnitude;
}

}  // namespace jitune
