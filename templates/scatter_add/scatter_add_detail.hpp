// Private to the scatter_add family: what its files share and its family object delegates to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "templates/scatter_add/scatter_add.hpp"

namespace jitune::templates::scatter_add {

/// Values of the `atomic` parameter: plain atomicAdd, fast 16-bit atomics, packed pairs.
inline constexpr std::int64_t kPlain = 0, kFast = 1, kPacked = 2;

namespace detail {

// problem.cpp
/// The problem of the options op, dtype, index, rows, count, row_length or n (Family::make_problem).
std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options);
/// The problem of a public index_add, scatter_add or dot call's values (Family::problem_from_call).
std::unique_ptr<Problem> problem_from_call(const CallArgs& args);

// checks.cpp
/// The default config by destination size, contention, dtype and architecture (Family::heuristic).
Config heuristic(const ScatterAddProblem& p, const DeviceInfo& device);
/// Why `config` cannot run `p` on `device`, empty if it can (Family::check).
std::string check(const ScatterAddProblem& p, const Config& config, const DeviceInfo& device);

// launch.cpp
/// The index_add or dot kernel's name expression (Family::source).
KernelSource source(const ScatterAddProblem& p, const Config& config);
/// Grid, block and shared memory (Family::launch_shape).
LaunchShape launch_shape(const ScatterAddProblem& p, const Config& config, const DeviceInfo& device);

// reference.cpp
/// Random operands, never zero; index_add's indices are a random permutation folded onto the rows, so every
/// row receives the same number of sources to within one (Family::workload).
Workload workload(const ScatterAddProblem& p, std::uint64_t seed);
/// The sums in double, rounded once to the dtype (Family::reference).
std::vector<std::vector<std::byte>> reference(const ScatterAddProblem& p, const Workload& w);

}  // namespace detail
}  // namespace jitune::templates::scatter_add
