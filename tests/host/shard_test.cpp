// Shards of a tuning run (issue 17): --shard parsing from the flag, a Slurm job array and RANK / WORLD_SIZE, and the
// deterministic, balanced assignment whose shards cover every work item exactly once.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <jitune/error.hpp>

#include "templates/family.hpp"
#include "tuner/shard.hpp"

using namespace jitune;
using tuner::assign_shards;
using tuner::parse_shard;
using tuner::WorkItem;

namespace {

tuner::EnvReader env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::vector<WorkItem> random_items(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<WorkItem> items;
  for (std::size_t i = 0; i < n; ++i)
    items.push_back({i % 3 ? "elementwise" : "permute", "case" + std::to_string(i),
                     "n=" + std::to_string(i * 7919 % 100003),
                     static_cast<double>(1 + rng() % 5000) * (i % 11 == 0 ? 20.0 : 1.0)});
  return items;
}

}  // namespace

TEST_CASE("--shard i/N and its errors") {
  const auto none = env_of({});
  auto s = parse_shard("0/4", none);
  CHECK(s.index == 0);
  CHECK(s.count == 4);
  s = parse_shard("3/4", none);
  CHECK(s.index == 3);
  CHECK(parse_shard("0/1", none).count == 1);
  using doctest::Contains;
  CHECK_THROWS_WITH_AS(parse_shard("4/4", none), Contains("numbered 0 to 3"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_shard("1/0", none), Contains("the count must be 1 to"), InvalidArgument);
  for (const char* bad : {"", "1", "a/b", "-1/4", "1/-4", "1/4x", " 1/4", "1//4", "/4", "1/", "1.5/4",
                          "99999999999999999999/4"})
    CHECK_THROWS_WITH_AS(parse_shard(bad, none), Contains("is not i/N"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_shard("0/100001", none), Contains("1 to 100000"), InvalidArgument);
}

TEST_CASE("--shard auto: a Slurm job array first, then RANK / WORLD_SIZE, else a clear error") {
  using doctest::Contains;
  auto s = parse_shard("auto", env_of({{"SLURM_ARRAY_TASK_ID", "5"},
                                       {"SLURM_ARRAY_TASK_MIN", "4"},
                                       {"SLURM_ARRAY_TASK_COUNT", "3"},
                                       {"RANK", "0"},
                                       {"WORLD_SIZE", "8"}}));
  CHECK(s.index == 1);  // --array=4-6: ids 4, 5, 6 are shards 0, 1, 2
  CHECK(s.count == 3);
  CHECK(s.source == "Slurm job array");
  s = parse_shard("auto", env_of({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
  CHECK(s.index == 2);
  s = parse_shard("auto", env_of({{"RANK", "6"}, {"WORLD_SIZE", "8"}}));
  CHECK(s.index == 6);
  CHECK(s.count == 8);
  CHECK(s.source == "RANK / WORLD_SIZE");
  CHECK_THROWS_WITH_AS(parse_shard("auto", env_of({})), Contains("give --shard i/N"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_shard("auto", env_of({{"SLURM_ARRAY_TASK_ID", "1"}})),
                       Contains("SLURM_ARRAY_TASK_COUNT is not"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_shard("auto", env_of({{"RANK", "1"}})), Contains("WORLD_SIZE is not"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_shard("auto", env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}})),
                       Contains("RANK='x' is not"), InvalidArgument);
  // A stepped array (--array=0-6:2: ids 0, 2, 4, 6, count 4) reaches an id past the count: refused, not skewed.
  CHECK_THROWS_WITH_AS(parse_shard("auto", env_of({{"SLURM_ARRAY_TASK_ID", "6"},
                                                   {"SLURM_ARRAY_TASK_MIN", "0"},
                                                   {"SLURM_ARRAY_TASK_COUNT", "4"}})),
                       Contains("stepped"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_shard("auto", env_of({{"RANK", "8"}, {"WORLD_SIZE", "8"}})), Contains("0 to 7"),
                       InvalidArgument);
}

TEST_CASE("shards cover every item exactly once, in any listing order, balanced by cost") {
  for (int count : {1, 2, 3, 7, 64, 200}) {
    const std::vector<WorkItem> items = random_items(150, static_cast<std::uint64_t>(count));
    const std::vector<int> shard = assign_shards(items, count);
    REQUIRE(shard.size() == items.size());
    std::vector<double> load(static_cast<std::size_t>(count), 0.0);
    for (std::size_t i = 0; i < items.size(); ++i) {
      REQUIRE(shard[i] >= 0);
      REQUIRE(shard[i] < count);
      load[static_cast<std::size_t>(shard[i])] += items[i].cost;
    }
    // Greedy on costs sorted largest first: the loads differ by at most the largest item.
    double largest = 0;
    for (const auto& item : items) largest = std::max(largest, item.cost);
    CHECK(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()) <=
          largest + 1e-9);
    // The same items listed in another order land on the same shards (each shard computes the same split).
    std::vector<std::size_t> perm(items.size());
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), std::mt19937_64(99));
    std::vector<WorkItem> shuffled;
    for (std::size_t i : perm) shuffled.push_back(items[i]);
    const std::vector<int> again = assign_shards(shuffled, count);
    for (std::size_t k = 0; k < perm.size(); ++k) CHECK(again[k] == shard[perm[k]]);
  }
  // Equal costs: the order comes from a hash of family and signature, so a renamed case keeps its shard.
  std::vector<WorkItem> flat = random_items(40, 5);
  for (auto& item : flat) item.cost = 1;
  const auto a = assign_shards(flat, 4);
  for (auto& item : flat) item.name += "_renamed";
  CHECK(assign_shards(flat, 4) == a);
  std::vector<int> per(4, 0);
  for (int s : a) ++per[static_cast<std::size_t>(s)];
  CHECK(per == std::vector<int>{10, 10, 10, 10});
  CHECK_THROWS_AS(assign_shards(flat, 0), InvalidArgument);
}

TEST_CASE("items that compile the same kernels stay on one shard unless that unbalances the shards") {
  // 60 items, 20 affinities of 3 (and 10 items with none): every affinity on one shard, in any listing order.
  std::vector<WorkItem> items = random_items(70, 17);
  for (std::size_t i = 0; i < 60; ++i) items[i].affinity = "k" + std::to_string(i % 20);
  for (int count : {2, 3, 8}) {
    const std::vector<int> shard = assign_shards(items, count);
    std::map<std::string, std::set<int>> on;
    double total = 0, largest_unit = 0;
    std::map<std::string, double> unit;
    for (std::size_t i = 0; i < items.size(); ++i) {
      total += items[i].cost;
      if (!items[i].affinity.empty()) on[items[i].affinity].insert(shard[i]), unit[items[i].affinity] += items[i].cost;
      else largest_unit = std::max(largest_unit, items[i].cost);
    }
    for (const auto& [affinity, cost] : unit) {
      INFO(affinity, " ", cost, " of ", total, " over ", count);
      if (cost <= total / count / 2) CHECK(on[affinity].size() == 1);  // kept together
      if (on[affinity].size() == 1) largest_unit = std::max(largest_unit, cost);
    }
    for (const WorkItem& item : items)  // a split affinity's items went one by one
      if (!item.affinity.empty() && on[item.affinity].size() > 1) largest_unit = std::max(largest_unit, item.cost);
    std::vector<double> load(static_cast<std::size_t>(count), 0.0);
    for (std::size_t i = 0; i < items.size(); ++i) load[static_cast<std::size_t>(shard[i])] += items[i].cost;
    CHECK(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()) <=
          largest_unit + 1e-9);
    std::vector<WorkItem> reversed(items.rbegin(), items.rend());
    const std::vector<int> again = assign_shards(reversed, count);
    for (std::size_t k = 0; k < items.size(); ++k) CHECK(again[k] == shard[items.size() - 1 - k]);
  }
  // One affinity holding most of the cost is split (balance first): both shards get some of it.
  std::vector<WorkItem> heavy = random_items(12, 3);
  for (std::size_t i = 0; i < 10; ++i) heavy[i].affinity = "big", heavy[i].cost = 100;
  heavy[10].cost = heavy[11].cost = 1;
  const std::vector<int> split = assign_shards(heavy, 2);
  std::set<int> used(split.begin(), split.begin() + 10);
  CHECK(used.size() == 2);
  // The affinity of real problems: one expression at two sizes shares it; another expression or dtype does not.
  const Family& f = family("elementwise");
  auto affinity = [&](const char* expr, const char* dtype, const char* n) {
    return tuner::compile_affinity(f, *f.make_problem({{"expr", expr}, {"dtype", dtype}, {"n", n}}));
  };
  CHECK(!affinity("z = x * y", "float32", "1048576").empty());
  CHECK(affinity("z = x * y", "float32", "1048576") == affinity("z = x * y", "float32", "134217728"));
  CHECK(affinity("z = x * y", "float32", "1048576") != affinity("z = x * y", "float16", "1048576"));
  CHECK(affinity("z = x * y", "float32", "1048576") != affinity("z = x + y", "float32", "1048576"));
}

TEST_CASE("a worker's claim order: its own items as listed, then the other shards' from their ends, round-robin") {
  const std::vector<int> assigned = {0, 1, 0, 1, 1, 0, 2, 2, 1};
  using V = std::vector<std::size_t>;
  CHECK(tuner::claim_order(assigned, 0) == V{0, 2, 5, 8, 7, 4, 6, 3, 1});
  CHECK(tuner::claim_order(assigned, 1) == V{1, 3, 4, 8, 7, 5, 6, 2, 0});
  CHECK(tuner::claim_order(assigned, 2) == V{6, 7, 5, 8, 2, 4, 0, 3, 1});
  CHECK(tuner::claim_order({}, 0).empty());
  // Every order is a permutation of the whole list, for every shard of a random assignment.
  const std::vector<WorkItem> items = random_items(200, 5);
  for (int count : {2, 3, 8}) {
    const std::vector<int> shard = assign_shards(items, count);
    for (int k = 0; k < count; ++k) {
      V order = tuner::claim_order(shard, k);
      const auto own = static_cast<std::size_t>(std::count(shard.begin(), shard.end(), k));
      REQUIRE(order.size() == items.size());
      for (std::size_t i = 0; i < own; ++i) CHECK(shard[order[i]] == k);
      CHECK(std::is_sorted(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(own)));
      std::sort(order.begin(), order.end());
      for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == i);
    }
  }
}

TEST_CASE("the cost estimate: legal configs on a nominal sm_90, weighted by the bytes moved") {
  const Family& f = family("elementwise");
  const auto small = f.make_problem({{"expr", "z = x * y"}, {"dtype", "float32"}, {"n", "1048576"}});
  const auto large = f.make_problem({{"expr", "z = x * y"}, {"dtype", "float32"}, {"n", "134217728"}});
  const double cs = tuner::estimated_cost(f, *small), cl = tuner::estimated_cost(f, *large);
  CHECK(cs >= 1);
  CHECK(cl > cs);
  // The same problem always costs the same (no device, host or clock in it).
  CHECK(tuner::estimated_cost(f, *small) == cs);
}
