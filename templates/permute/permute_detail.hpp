// Private to the permute family: what its files share and its family object delegates to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "templates/permute/permute.hpp"

namespace jitune::templates::permute::detail {

// problem.cpp
/// `values` as text with `sep` between them: "64x1024", "0,2,1".
std::string join(std::span<const std::int64_t> values, char sep);
std::string join(std::span<const int> values, char sep);
/// "0,2,1" or the digits alone, "021"; throws InvalidArgument for anything else.
std::vector<int> parse_perm(std::string_view text);
/// The problem of the options dtype, shape and perm (Family::make_problem).
std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options);
/// The problem of a public call's values: dtype, shape, perm (Family::problem_from_call).
std::unique_ptr<Problem> problem_from_call(const CallArgs& args);

// checks.cpp
/// OneFlow's defaults (Family::heuristic).
Config heuristic(const PermuteProblem& p);
/// Why `config` cannot run `p` on `device`, empty if it can (Family::check).
std::string check(const PermuteProblem& p, const Config& config, const DeviceInfo& device);

// launch.cpp
std::int64_t ceil_div(std::int64_t a, std::int64_t b);
/// The tiled kernel's plane: R (contiguous in the output) and C (contiguous in the input).
std::int64_t plane_rows(const Plan& plan);
std::int64_t plane_cols(const Plan& plan);
/// Shared memory of a tiled config (static up to 48 KiB, dynamic above: permute.cuh).
std::int64_t shared_bytes(const Config& config);
/// The kernel's name expression (Family::source).
KernelSource source(const PermuteProblem& p, const Config& config);
/// Grid, block and shared memory (Family::launch_shape).
LaunchShape launch_shape(const PermuteProblem& p, const Config& config, const DeviceInfo& device);

// reference.cpp
/// Random elements, never all 0xFF bytes (the poison) nor all zero (Family::workload).
Workload workload(const PermuteProblem& p, std::uint64_t seed);
/// The permuted input, from the unsimplified shape and permutation (Family::reference).
std::vector<std::vector<std::byte>> reference(const PermuteProblem& p, const Workload& w);

}  // namespace jitune::templates::permute::detail
