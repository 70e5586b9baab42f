// Space: a family's tunable parameters with their candidate values; constraints live in Family::check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "templates/config.hpp"

namespace jitune {

/// One tunable parameter: the same name in the kernel template, the store and the CLI.
struct Param {
  std::string name;                   ///< e.g. "pack".
  std::vector<std::int64_t> values;   ///< Candidate values, in the order they are tried.
  std::string help;                   ///< Meaning and legal range, one line.
};

/// The cartesian product of its parameters' values.
class Space {
 public:
  Space() = default;
  explicit Space(std::vector<Param> params) : params_(std::move(params)) {}

  const std::vector<Param>& params() const noexcept { return params_; }
  /// Number of configurations before constraints.
  std::uint64_t size() const noexcept;
  /// Every configuration, in a deterministic order (before constraints).
  std::vector<Config> enumerate() const;
  /// True when `config` names exactly this space's parameters with values from their lists.
  bool contains(const Config& config) const;
  /// Why `config` is not in the space (unknown or missing parameter, value not a candidate), empty if it is.
  std::string why_not_contained(const Config& config) const;

 private:
  std::vector<Param> params_;
};

}  // namespace jitune
