// Space: a family's tunable parameters with their candidate values; constraints live in Family::check.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "templates/config.hpp"

namespace jitune {

/// One tunable parameter: the same name in the kernel template, the store and the CLI.
struct Param {
  std::string name;                   ///< e.g. "pack".
  std::vector<std::int64_t> values;   ///< Candidate values, in the order they are tried.
  std::string help;                   ///< Meaning and legal range, one line.
  /// A parameter of some variants only: it varies where the earlier parameter `when` has one of the values `is`
  /// and holds its first value elsewhere (empty `when`: always varies). A family with several kernels (conv2d's
  /// direct, implicit-GEMM and Winograd algorithms) so tunes each kernel's knobs without the product of all, and
  /// two kernels of one shape (Winograd F(2x2) and F(4x4)) share theirs.
  std::string when = {};
  std::vector<std::int64_t> is = {};
  /// Whether the parameter varies where `when` has the value `value`.
  bool varies_under(std::int64_t value) const;
};

/// The product of its parameters' values, where a conditional parameter (Param::when) varies only under its
/// condition.
class Space {
 public:
  Space() = default;
  /// Throws InvalidArgument when a parameter has no values or a condition names no earlier parameter.
  explicit Space(std::vector<Param> params);

  const std::vector<Param>& params() const noexcept { return params_; }
  /// Number of configurations before constraints.
  std::uint64_t size() const noexcept;
  /// Every configuration, in a deterministic order (before constraints).
  std::vector<Config> enumerate() const;
  /// Calls visit with every configuration in enumerate()'s order, one Config changed in place between calls (no
  /// copies: copy the ones to keep).
  void for_each(const std::function<void(const Config&)>& visit) const;
  /// True when `config` names exactly this space's parameters with values from their lists, inactive
  /// conditional parameters at their first value.
  bool contains(const Config& config) const;
  /// Why `config` is not in the space (unknown or missing parameter, value not a candidate, a parameter set
  /// outside its condition), empty if it is.
  std::string why_not_contained(const Config& config) const;
  /// `config` with every inactive conditional parameter at its first value (a move of the parameter a
  /// condition names lands in the space this way).
  Config canonical(Config config) const;

 private:
  std::vector<Param> params_;
};

}  // namespace jitune
