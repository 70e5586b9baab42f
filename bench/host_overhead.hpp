// Warm-call host overhead per family, for jitune_bench.
#pragma once

#include <nlohmann/json.hpp>

#include <jitune/runtime.hpp>

namespace jitune::bench {

/// For each registered family, one small problem called 5 x 20k times through its public op and as a raw launch
/// of the same kernel: [{family, signature, raw_launch_us, api_call_us, overhead_us}, ...].
nlohmann::json host_overhead(Runtime& runtime);

}  // namespace jitune::bench
