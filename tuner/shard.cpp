// Shards of a tuning run: parsing --shard, the cost estimate and the deterministic assignment.
#include "tuner/shard.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include <jitune/error.hpp>

#include "templates/sources.hpp"

namespace jitune::tuner {
namespace {

constexpr int kMaxShards = 100000;

// A whole non-negative number, or nullopt-like -1 for anything else (signs, spaces, trailing text, overflow).
long long parse_count(std::string_view text) {
  long long v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < 0) return -1;
  return v;
}

ShardSpec checked(long long index, long long count, std::string source, const std::string& what) {
  if (count < 1 || count > kMaxShards)
    throw InvalidArgument("jitune tune --shard: " + what + " gives " + std::to_string(count) +
                          " shards; the count must be 1 to " + std::to_string(kMaxShards));
  if (index < 0 || index >= count)
    throw InvalidArgument("jitune tune --shard: " + what + " gives shard " + std::to_string(index) + " of " +
                          std::to_string(count) + "; shards are numbered 0 to " + std::to_string(count - 1));
  return {static_cast<int>(index), static_cast<int>(count), std::move(source)};
}

long long env_number(const EnvReader& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr) return -2;  // unset
  const long long n = parse_count(v);
  if (n < 0)
    throw InvalidArgument(std::string("jitune tune --shard auto: ") + name + "='" + v +
                          "' is not a non-negative whole number");
  return n;
}

}  // namespace

ShardSpec parse_shard(std::string_view text, const EnvReader& env) {
  if (text == "auto") {
    const long long task = env_number(env, "SLURM_ARRAY_TASK_ID");
    if (task != -2) {
      const long long count = env_number(env, "SLURM_ARRAY_TASK_COUNT");
      if (count == -2)
        throw InvalidArgument("jitune tune --shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is "
                              "not; give --shard i/N");
      const long long min = env_number(env, "SLURM_ARRAY_TASK_MIN");
      // Array ids need not start at 0 (--array=1-4); a stepped array (--array=0-6:2) has gaps the count cannot
      // see, so the id is checked against the count below.
      const long long first = min == -2 ? 0 : min;
      return checked(task - first, count, "Slurm job array",
                     "the Slurm job array (SLURM_ARRAY_TASK_ID " + std::to_string(task) + ", SLURM_ARRAY_TASK_MIN " +
                         std::to_string(first) + ", SLURM_ARRAY_TASK_COUNT " + std::to_string(count) +
                         "; a stepped --array is not supported)");
    }
    const long long rank = env_number(env, "RANK");
    if (rank != -2) {
      const long long world = env_number(env, "WORLD_SIZE");
      if (world == -2)
        throw InvalidArgument("jitune tune --shard auto: RANK is set but WORLD_SIZE is not; give --shard i/N");
      return checked(rank, world, "RANK / WORLD_SIZE", "RANK / WORLD_SIZE");
    }
    throw InvalidArgument("jitune tune --shard auto: neither a Slurm job array (SLURM_ARRAY_TASK_ID, "
                          "SLURM_ARRAY_TASK_COUNT) nor RANK / WORLD_SIZE is set; give --shard i/N (shard i of N, "
                          "from 0)");
  }
  std::string quoted = "'";  // built by appends: GCC 12 warns (-Wrestrict, falsely) on "'" + std::string(text)
  quoted.append(text);
  quoted += "'";
  const std::size_t slash = text.find('/');
  const long long index = slash == std::string_view::npos ? -1 : parse_count(text.substr(0, slash));
  const long long count = slash == std::string_view::npos ? -1 : parse_count(text.substr(slash + 1));
  if (index < 0 || count < 0)
    throw InvalidArgument("jitune tune --shard: " + quoted + " is not i/N (shard i of N, from 0, e.g. 0/4) or auto");
  return checked(index, count, "--shard", quoted);
}

double estimated_cost(const Family& family, const Problem& problem) {
  const DeviceInfo device = nominal_device(90);
  std::size_t legal = 0;
  family.space().for_each([&](const Config& c) { legal += family.check(problem, c, device).empty(); });
  return static_cast<double>(std::max<std::size_t>(legal, 1)) *
         (1.0 + problem.bytes_moved() / (64.0 * 1024 * 1024));
}

std::string compile_affinity(const Family& family, const Problem& problem) {
  try {
    const KernelSource k = family.source(problem, family.heuristic(problem, nominal_device(90)));
    return std::string(family.name()) + "|" + std::to_string(hash64(k.program)) + "|" + k.name_expression;
  } catch (const std::exception&) {
    return {};
  }
}

std::vector<int> assign_shards(const std::vector<WorkItem>& items, int count) {
  if (count < 1) throw InvalidArgument("assign_shards: the shard count must be at least 1");
  // Units: the items of one affinity, or single items.
  struct Unit {
    std::vector<std::size_t> items;
    double cost = 0;
    std::uint64_t hash = 0;
    std::string text;  // the last tie-break: the members' family|signature, sorted
  };
  double total = 0;
  for (const WorkItem& item : items) total += item.cost;
  const double split_above = total / count / 2;
  std::map<std::string, std::vector<std::size_t>> by_affinity;
  std::vector<Unit> units;
  auto single = [&](std::size_t i) {
    const std::string text = items[i].family + "|" + items[i].signature;
    units.push_back({{i}, items[i].cost, hash64(text), text});
  };
  for (std::size_t i = 0; i < items.size(); ++i)
    if (items[i].affinity.empty()) single(i);
    else by_affinity[items[i].affinity].push_back(i);
  for (const auto& [affinity, members] : by_affinity) {
    double cost = 0;
    std::vector<std::string> texts;
    for (std::size_t i : members) cost += items[i].cost, texts.push_back(items[i].family + "|" + items[i].signature);
    if (members.size() > 1 && cost > split_above) {
      for (std::size_t i : members) single(i);
      continue;
    }
    std::sort(texts.begin(), texts.end());
    std::string text;
    for (const std::string& t : texts) text += t + "\n";
    units.push_back({members, cost, hash64(text), text});
  }
  std::sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) {
    if (a.cost != b.cost) return a.cost > b.cost;
    if (a.hash != b.hash) return a.hash < b.hash;
    return a.text < b.text;
  });
  std::vector<double> load(static_cast<std::size_t>(count), 0.0);
  std::vector<int> shard(items.size(), 0);
  for (const Unit& unit : units) {
    const auto lightest = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    for (std::size_t i : unit.items) shard[i] = static_cast<int>(lightest);
    load[lightest] += unit.cost;
  }
  return shard;
}

std::vector<std::size_t> claim_order(const std::vector<int>& assigned, int shard) {
  std::map<int, std::vector<std::size_t>> others;  // shard -> its items, last first
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < assigned.size(); ++i)
    if (assigned[i] == shard) order.push_back(i);
  for (std::size_t i = assigned.size(); i-- > 0;)
    if (assigned[i] != shard) others[assigned[i]].push_back(i);
  // The shards after this one first (shard + 1, shard + 2, ...), so that several thieves start on different owners.
  std::vector<const std::vector<std::size_t>*> queues;
  for (auto it = others.upper_bound(shard); it != others.end(); ++it) queues.push_back(&it->second);
  for (auto it = others.begin(); it != others.end() && it->first < shard; ++it) queues.push_back(&it->second);
  for (std::size_t round = 0, taken = 1; taken > 0; ++round) {
    taken = 0;
    for (const auto* q : queues)
      if (round < q->size()) order.push_back((*q)[round]), ++taken;
  }
  return order;
}

}  // namespace jitune::tuner
