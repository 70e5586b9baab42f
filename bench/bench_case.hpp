// Benchmark cases: each family registers its public cases (bench/cases_<family>.cpp). A case verifies the tuned
// and the heuristic-default runtime against the CPU reference through the public op, then times both alternately.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <jitune/jitune.hpp>

#include "runtime/driver.hpp"

namespace jitune::bench {

/// What every case gets: the runtime with the user's (tuned) caches, one that only knows heuristics, and the copy
/// bandwidth measured in this process.
struct Context {
  Runtime& tuned;
  Runtime& heuristic;
  double copy_gbs;
  std::uint64_t seed;
};

struct Case {
  std::string name;     ///< As in bench-cases.md, e.g. "mul_float32_134217728".
  std::string family;
  std::function<nlohmann::json(Context&)> run;  ///< Returns the row (see finish_row).
  std::string signature;  ///< The problem's signature where the case knows it up front (jitune_bench --list).
};

/// The registry; cases_<family>.cpp add theirs with a static Registrar.
std::vector<Case>& cases();
struct Registrar {
  explicit Registrar(std::vector<Case> add) {
    for (auto& c : add) cases().push_back(std::move(c));
  }
};

/// Times `tuned` and `heuristic` calls alternately. Problems under 4x the L2: 100 back-to-back calls between two
/// events / 100, median of 20 groups; larger: one call between events, median of 50; 10 warm-ups each.
std::pair<double, double> time_pair(const std::function<void()>& tuned, const std::function<void()>& heuristic,
                                    bool small, CUstream stream);

/// cuMemcpyDtoDAsync of bytes / 2 (so bytes read + written), timed as time_pair times a case of that size.
double same_size_copy_us(double bytes, bool small);

/// Fills the common row fields: us, GB/s, % of copy (and GFLOP/s when flops > 0) for tuned and default_,
/// config and match level of each runtime, mode, and the tuned time against the same-size copy
/// (pct_copy_same_size).
void finish_row(nlohmann::json& row, Context& ctx, const std::string& family, const std::string& signature,
                double bytes, double flops, std::pair<double, double> us, bool small);

/// True when every correctness field of the row ("correct", "default_correct") is true.
bool row_correct(const nlohmann::json& row);

/// `host` again in device memory, `offset_bytes` into an allocation of its own (a view a few elements into its
/// tensor, issue 19: "_src+1", "_x+1"); `at` receives the copy's address.
driver::DeviceBuffer shifted_copy(const std::vector<std::byte>& host, std::size_t offset_bytes, const void*& at);

}  // namespace jitune::bench
