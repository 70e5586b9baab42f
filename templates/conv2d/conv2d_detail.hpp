// Private to the conv2d family: what its files share and its family object delegates to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "templates/conv2d/conv2d.hpp"

namespace jitune::templates::conv2d::detail {

// problem.cpp
/// The problem of the options dtype, n, c, h, w, k, r, s, stride, padding, dilation, bias
/// (Family::make_problem).
std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options);
/// The problem of a public call's values: dtype, input and weight shapes, stride, padding, dilation, bias
/// (Family::problem_from_call).
std::unique_ptr<Problem> problem_from_call(const CallArgs& args);

// checks.cpp
/// The default config, shrunk until the kernel's hard limits pass (Family::heuristic).
Config heuristic(const ConvProblem& p, const DeviceInfo& device);
/// The kernel's hard limits, then the tuned neighbourhood of the default (Family::check).
std::string check(const ConvProblem& p, const Config& config, const DeviceInfo& device);

// launch.cpp
/// The kernel's name expression (Family::source).
KernelSource source(const ConvProblem& p, const Config& config);
/// One block per output tile and k_block channels, grid z over the batch (Family::launch_shape).
LaunchShape launch_shape(const ConvProblem& p, const Config& config);

// reference.cpp
/// Random x, w and bias, never zero (Family::workload).
Workload workload(const ConvProblem& p, std::uint64_t seed);
/// The convolution summed in double (Family::reference).
std::vector<std::vector<std::byte>> reference(const ConvProblem& p, const Workload& work);

}  // namespace jitune::templates::conv2d::detail
