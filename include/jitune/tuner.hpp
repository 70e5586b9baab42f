// The tuner's public entry point for programs: tuning on first use, handed to RuntimeOptions::tuning.
// Link jitune::tuner for it; programs that only launch never need this header.
#pragma once

#include <cstdint>
#include <memory>

#include <jitune/runtime.hpp>

namespace jitune::tuner {

/// How a first-use tuning run explores and measures.
struct FirstUseOptions {
  /// Candidates tried per problem (random sample of the legal space, heuristic default always included);
  /// 0 tries the whole space.
  std::size_t budget = 48;
  /// Minimum timed milliseconds per candidate.
  double min_time_ms = 1.0;
};

/// A TuningPolicy that tunes each new problem the first time it is called (and stores the result in the user
/// cache), so later calls and later processes use the tuned kernel.
std::shared_ptr<TuningPolicy> tune_on_first_use(FirstUseOptions options = {});

}  // namespace jitune::tuner
