// Shared timing and row building for the benchmark cases.
#include "bench/bench_case.hpp"

#include "tuner/measure.hpp"

namespace jitune::bench {

std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

std::pair<double, double> time_pair(const std::function<void()>& a, const std::function<void()>& b, bool small,
                                    CUstream stream) {
  driver::Event start, stop;
  for (int i = 0; i < 10; ++i) {
    a();
    b();
  }
  std::vector<double> sa, sb;
  const int groups = small ? 20 : 50, per = small ? 100 : 1;
  for (int g = 0; g < groups; ++g)
    for (int which = 0; which < 2; ++which) {
      const auto& call = which == 0 ? a : b;
      // Lines a kernel loaded with an evict_last policy stay ahead of others in L2 until reset: each side's
      // group starts from normal lines, so one side's hints never speed up (or slow down) the other.
      JITUNE_CU_CHECK(cuCtxResetPersistingL2Cache());
      JITUNE_CU_CHECK(cuEventRecord(start.get(), stream));
      for (int i = 0; i < per; ++i) call();
      JITUNE_CU_CHECK(cuEventRecord(stop.get(), stream));
      JITUNE_CU_CHECK(cuEventSynchronize(stop.get()));
      float ms = 0;
      JITUNE_CU_CHECK(cuEventElapsedTime(&ms, start.get(), stop.get()));
      (which == 0 ? sa : sb).push_back(ms * 1000.0 / per);
    }
  return {tuner::median_spread(sa).first, tuner::median_spread(sb).first};
}

double same_size_copy_us(double bytes, bool small) {
  const auto half = static_cast<std::size_t>(bytes / 2);
  driver::DeviceBuffer a(half), b(half);
  driver::StreamHandle stream;
  JITUNE_CU_CHECK(cuMemsetD8Async(a.get(), 0x3c, half, stream.get()));
  const auto copy = [&] { JITUNE_CU_CHECK(cuMemcpyDtoDAsync(b.get(), a.get(), half, stream.get())); };
  return time_pair(copy, copy, small, stream.get()).first;
}

void finish_row(nlohmann::json& row, Context& ctx, const std::string& family, const std::string& signature,
                double bytes, double flops, std::pair<double, double> us, bool small) {
  row["family"] = family;
  row["signature"] = signature;
  row["bytes"] = bytes;
  row["mode"] = small ? "back_to_back_100" : "single";
  // The copy of the same bytes timed the same way: what memory allows at this size (launch gaps, ramp, tail).
  const double copy_us = same_size_copy_us(bytes, small);
  row["copy_same_size_us"] = copy_us;
  row["pct_copy_same_size"] = 100.0 * copy_us / us.first;
  for (auto [prefix, t, rt] : {std::tuple<std::string, double, Runtime*>{"", us.first, &ctx.tuned},
                               {"default_", us.second, &ctx.heuristic}}) {
    row[prefix + "us"] = t;
    row[prefix + "gbs"] = bytes / (t * 1e3);
    row[prefix + "pct_copy"] = 100.0 * bytes / (t * 1e3) / ctx.copy_gbs;
    if (flops > 0) row[prefix + "gflops"] = flops / (t * 1e3);
    Explanation x = rt->explain(family, signature);
    row[prefix + "config"] = x.config;
    row[prefix + "level"] = std::string(match_level_name(x.level));
  }
}

bool row_correct(const nlohmann::json& row) {
  return row.value("correct", false) && row.value("default_correct", false);
}

driver::DeviceBuffer shifted_copy(const std::vector<std::byte>& host, std::size_t offset_bytes, const void*& at) {
  driver::DeviceBuffer buffer(host.size() + offset_bytes);
  JITUNE_CU_CHECK(cuMemcpyHtoD(buffer.get() + offset_bytes, host.data(), host.size()));
  at = static_cast<const char*>(buffer.data()) + offset_bytes;
  return buffer;
}

}  // namespace jitune::bench
