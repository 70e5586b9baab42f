// The guided search without a GPU: which stored winners seed it (transfer from other devices and nearby shapes),
// which configs a round tries next (neighbours of the fastest so far in the family's Space), and the round-by-round
// plan with its budget and time limit (GuidedSearch). The session (tuner/session.cpp) reads the stores, compiles
// and times what the plan proposes, and reports each verdict back.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "cache/record.hpp"
#include "templates/space.hpp"

namespace jitune::tuner {

/// Seeds taken from the stores at most (distinct configs, the heuristic default not counted).
inline constexpr std::size_t kMaxSeeds = 6;
/// Timed configs whose neighbours make a round (the fastest so far).
inline constexpr std::size_t kRoundCenters = 3;

/// A stored winner chosen as a starting point of a guided search.
struct Seed {
  Config config;
  std::string signature;        ///< The record's problem.
  std::string device_name;      ///< The device it was tuned on.
  bool same_signature = false;  ///< Tuned for this very problem (on this or another device).
  bool other_device = false;    ///< Tuned on another device (of the same compute capability).
  double distance = 0;          ///< Euclidean distance of the record's features to the problem's (0: same signature).
};

/// Ranks stored records of one family, template hash and group as seeds for the problem `signature` with
/// `features`, tuned on `device_name`. Order: records of the same signature first (this device before others),
/// then by feature distance (records whose features have another length last), ties by signature, device and
/// config text, so the order never depends on the order the stores returned them in. A record whose config does not
/// parse or is not in `legal` is dropped, as is a config already taken; at most `max_seeds` are returned.
std::vector<Seed> rank_seeds(const std::vector<cache::Record>& records, const std::string& signature,
                             const std::vector<double>& features, const std::string& device_name,
                             const std::set<Config>& legal, std::size_t max_seeds = kMaxSeeds);

/// The configs of `space` that differ from `center` in exactly one parameter, by exactly `step` positions in that
/// parameter's value list (step 1: the adjacent candidate values). Parameters in space order, the smaller position
/// before the larger. A parameter whose value in `center` is not one of its candidates has no neighbours. A move of
/// the parameter a condition names puts the parameters it governs at their first values (Space::canonical); a move
/// of an inactive parameter, which lands back on `center`, is no neighbour.
std::vector<Config> neighbours_at(const Space& space, const Config& center, std::size_t step);

/// The configs of `space` that differ from `center` in exactly two parameters, each by one position: pairs of
/// parameters in space order, each pair's four moves smaller-smaller, smaller-larger, larger-smaller, larger-larger.
/// For constraints that tie two parameters together (a tile and its vector width), where no single move is legal.
std::vector<Config> pair_neighbours(const Space& space, const Config& center);

/// The legal configs not yet `tried` that neighbour one of `centers` (the fastest timed configs, best first), in
/// tiers, the first tier that still has one: one parameter moved by one position; one parameter moved farther, the
/// nearest step that still has one; two parameters moved by one position each (pair_neighbours). Within a tier,
/// neighbours of a better center come before those of a worse one; never a config twice; at most `limit`. Empty
/// when every neighbour of every center was tried.
std::vector<Config> untried_neighbours(const Space& space, const std::vector<Config>& centers,
                                       const std::set<Config>& legal, const std::set<Config>& tried,
                                       std::size_t limit);

/// The guided search's budget (candidates tried, the default included) when none is given: a quarter of the legal
/// configs, at least 8, never more than there are.
std::size_t default_guided_budget(std::size_t legal);

/// A guided search's plan, round by round. Round 0 is the first legal config (the heuristic default when it is
/// legal) and the seeds; each later round is untried_neighbours() of the kRoundCenters fastest configs timed so far
/// (while none verified: of every config tried, so a failing default does not end the search). It ends when the
/// budget is spent, when a round would start past the time limit, or when no untried neighbour is left.
class GuidedSearch {
 public:
  /// `legal`: every legal config, the heuristic default first when legal (not empty). `budget`: candidates to try
  /// in all, round 0 included (0: default_guided_budget; never more than the legal configs). `time_budget_s` > 0:
  /// no round after the first starts once that many seconds have passed. `seeds`: best first (rank_seeds); those
  /// not legal, repeated or past the budget are left out.
  GuidedSearch(const Space& space, const std::vector<Config>& legal, std::size_t budget, double time_budget_s,
               std::vector<Seed> seeds);

  /// Round 0: the first legal config, then the seeds that fit the budget.
  const std::vector<Config>& first_round() const noexcept { return first_round_; }
  /// The seeds round 0 holds, in its order.
  const std::vector<Seed>& seeds() const noexcept { return seeds_; }
  /// A proposed config's verdict: status "ok" with its median makes it a candidate center; anything else does not.
  void record(const Config& config, const std::string& status, double time_us);
  /// The next round, given the seconds the session has run; empty when the search is over (stopped() says why).
  std::vector<Config> next_round(double elapsed_s);

  std::size_t budget() const noexcept { return budget_; }
  /// Configs proposed so far, round 0 included.
  std::size_t proposed() const noexcept { return tried_.size(); }
  /// Candidates per round, round 0 first.
  const std::vector<std::size_t>& round_sizes() const noexcept { return round_sizes_; }
  /// Empty while it runs; then "budget", "time" or "no untried neighbour".
  const std::string& stopped() const noexcept { return stopped_; }

 private:
  std::vector<Config> centers() const;

  Space space_;
  std::set<Config> legal_, tried_;
  std::vector<Config> tried_order_;
  std::vector<std::pair<double, Config>> timed_;  // verified: (median us, config), in the order recorded
  std::size_t budget_ = 0;
  double time_budget_s_ = 0;
  std::vector<Config> first_round_;
  std::vector<Seed> seeds_;
  std::vector<std::size_t> round_sizes_;
  std::string stopped_;
};

}  // namespace jitune::tuner
