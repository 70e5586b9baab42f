// Host scan of an index buffer: the opt-in check that names the first out-of-range index.
#include "runtime/index_check.hpp"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace jitune {
namespace {

std::int64_t index_at(const std::vector<std::byte>& host, std::size_t size, std::int64_t i) {
  if (size == 4) {
    std::int32_t v;
    std::memcpy(&v, host.data() + i * 4, 4);
    return v;
  }
  std::int64_t v;
  std::memcpy(&v, host.data() + i * 8, 8);
  return v;
}

}  // namespace

void check_indices_on_host(const std::string& op, const BufferSpec& spec, const void* index, CUstream stream) {
  std::int64_t count = 1;
  for (std::int64_t extent : spec.shape) count *= extent;
  if (count <= 0) return;
  JITUNE_CU_CHECK(cuStreamSynchronize(stream));
  const std::size_t size = dtype_size(spec.dtype);
  std::vector<std::byte> host(static_cast<std::size_t>(count) * size);
  JITUNE_CU_CHECK(cuMemcpyDtoH(host.data(), reinterpret_cast<CUdeviceptr>(index), host.size()));
  const std::int64_t bound = spec.index_bound;
  const unsigned threads = count < (1 << 20) ? 1u : std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::int64_t> first_bad(threads, -1);
  auto scan = [&](unsigned t) {
    const std::int64_t chunk = (count + threads - 1) / threads;
    const std::int64_t begin = std::min(count, chunk * t), end = std::min(count, begin + chunk);
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t v = index_at(host, size, i);
      if (v < 0 || v >= bound) {
        first_bad[t] = i;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(scan, t);
  scan(0);
  for (auto& th : pool) th.join();
  for (std::int64_t i : first_bad) {
    if (i < 0) continue;
    const std::string at = spec.name + "[" + std::to_string(i) + "] = " + std::to_string(index_at(host, size, i));
    if (bound == 0) throw InvalidArgument(op + ": the destination has no rows (it is empty), so " + at + " is out of range");
    throw InvalidArgument(op + ": " + at + " is out of range for a destination of " + std::to_string(bound) +
                          " rows (valid: 0 to " + std::to_string(bound - 1) + ")");
  }
}

}  // namespace jitune
