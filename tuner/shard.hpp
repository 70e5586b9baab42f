// Deterministic shards of a tuning run across hosts or scheduler tasks (issue 17): `jitune tune --suite default
// --shard i/N` (or `--shard auto` under a Slurm job array or a RANK / WORLD_SIZE launcher) tunes its share of the
// work into its own store, and `jitune cache merge` combines the shards' stores. Every shard computes the same whole
// assignment from the work items alone (never from the order they are listed in, the host or the GPU), so N shards
// cover every item exactly once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "templates/family.hpp"

namespace jitune::tuner {

/// Which share of the work this process takes: shard `index` of `count` (0 <= index < count).
struct ShardSpec {
  int index = 0;
  int count = 1;
  std::string source;  ///< Where it came from: "--shard", "Slurm job array" or "RANK / WORLD_SIZE".
};

/// Reads an environment variable (null when unset); a parameter so tests need not touch the process environment.
using EnvReader = std::function<const char*(const char*)>;

/// Parses `--shard`: "i/N" (0 <= i < N <= 100000), or "auto": a Slurm job array (SLURM_ARRAY_TASK_ID minus
/// SLURM_ARRAY_TASK_MIN, over SLURM_ARRAY_TASK_COUNT), else RANK over WORLD_SIZE. Throws InvalidArgument saying what
/// was wrong and what to give instead.
ShardSpec parse_shard(std::string_view text, const EnvReader& env);

/// One unit of work: a family's problem, with its estimated tuning cost.
struct WorkItem {
  std::string family;
  std::string name;       ///< The suite case's name (the signature for a problem given by options).
  std::string signature;
  double cost = 1;        ///< Estimated tuning cost (estimated_cost), in arbitrary units.
  /// Items with the same non-empty affinity compile the same kernels (compile_affinity): kept on one shard, so a
  /// kernel is compiled once rather than once per shard. Empty: none shared.
  std::string affinity;
};

/// A device-independent estimate of what tuning `problem` costs: its legal configs on a nominal sm_90 device (the
/// same on every host, so every shard computes the same assignment), each weighted by the bytes it moves (a
/// candidate's timing takes longer on a large problem: 1 + bytes / 64 MiB).
double estimated_cost(const Family& family, const Problem& problem);

/// What decides which kernels tuning `problem` compiles: its family and the program and name expression of its
/// default config on a nominal sm_90 device (the problem's compile-time constants; two problems with the same text
/// compile the same kernel for every config, e.g. one expression at two sizes). Empty where the default is not
/// known on that device.
std::string compile_affinity(const Family& family, const Problem& problem);

/// The shard of each item (same order as `items`). Items of one affinity form a unit unless the unit's cost exceeds
/// half of a shard's fair share (total / count), whose items then go one by one (balance before compile reuse).
/// Units sorted by cost (largest first, ties by a stable hash of family and signatures, then by the text), each
/// given to the least-loaded shard so far (ties: the lowest index). Deterministic in the set of items; balanced to
/// within one unit's cost.
std::vector<int> assign_shards(const std::vector<WorkItem>& items, int count);

/// The order in which a `--devices` worker of shard `shard` walks the whole work list when the workers take work
/// from each other (WorkClaims): its own items as listed, then the other shards' items from their ends backwards,
/// round-robin over those shards (the items their owners reach last). Indices into `assigned` (assign_shards).
std::vector<std::size_t> claim_order(const std::vector<int>& assigned, int shard);

}  // namespace jitune::tuner
