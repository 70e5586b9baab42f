// The guided search without a GPU: neighbours in a Space, the rounds' order and limits, seed ranking, the default
// budget, and the round-by-round plan driven by a synthetic cost (what the session does with real timings).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <jitune/device.hpp>
#include <jitune/error.hpp>

#include "templates/elementwise/elementwise.hpp"
#include "tuner/guided.hpp"
#include "tuner/tuner.hpp"

namespace jitune::tuner {
namespace {

// block: 4 values, pack: 3, unroll: 2 (24 configs).
Space small_space() {
  return Space({{"block", {64, 128, 256, 512}, "threads"}, {"pack", {1, 2, 4}, "elements"}, {"unroll", {1, 2}, "x"}});
}

Config cfg(std::int64_t block, std::int64_t pack, std::int64_t unroll) {
  return Config{{"block", block}, {"pack", pack}, {"unroll", unroll}};
}

std::vector<std::string> texts(const std::vector<Config>& configs) {
  std::vector<std::string> out;
  for (const Config& c : configs) out.push_back(c.text());
  return out;
}

std::set<Config> all_of(const Space& space) {
  const std::vector<Config> every = space.enumerate();
  return {every.begin(), every.end()};
}

cache::Record record(const std::string& signature, const std::string& device, std::vector<double> features,
                     const std::string& config) {
  cache::Record r;
  r.key.signature = signature;
  r.key.device_name = device;
  r.features = std::move(features);
  r.config = config;
  return r;
}

// Number of positions between `a` and `b`, summed over the parameters: a cost with one minimum and no plateaus.
double positions_apart(const Space& space, const Config& a, const Config& b) {
  double d = 0;
  for (const Param& p : space.params()) {
    const auto pa = std::find(p.values.begin(), p.values.end(), a.at(p.name)) - p.values.begin();
    const auto pb = std::find(p.values.begin(), p.values.end(), b.at(p.name)) - p.values.begin();
    d += static_cast<double>(std::abs(pa - pb));
  }
  return d;
}

}  // namespace

TEST_CASE("neighbours in a space with conditional parameters stay inside it") {
  // conv2d's shape: algo 0 tunes `a`, algo 1 tunes `t`; moving algo resets the other variant's knob.
  const Space space({{"algo", {0, 1}, ""}, {"a", {1, 2, 3}, "", "algo", {0}}, {"t", {8, 16}, "", "algo", {1}}});
  const Config direct{{"algo", 0}, {"a", 3}, {"t", 8}};
  CHECK(texts(neighbours_at(space, direct, 1)) == std::vector<std::string>{"a=1,algo=1,t=8", "a=2,algo=0,t=8"});
  for (const Config& c : neighbours_at(space, direct, 1)) CHECK(space.contains(c));
  for (const Config& c : pair_neighbours(space, Config{{"algo", 1}, {"a", 1}, {"t", 8}})) CHECK(space.contains(c));
}

TEST_CASE("neighbours_at: one parameter moved by exactly `step` positions, in space order, smaller first") {
  const Space space = small_space();
  CHECK(texts(neighbours_at(space, cfg(128, 4, 1), 1)) ==
        std::vector<std::string>{"block=64,pack=4,unroll=1", "block=256,pack=4,unroll=1", "block=128,pack=2,unroll=1",
                                 "block=128,pack=4,unroll=2"});
  CHECK(texts(neighbours_at(space, cfg(128, 4, 1), 2)) ==
        std::vector<std::string>{"block=512,pack=4,unroll=1", "block=128,pack=1,unroll=1"});
  CHECK(texts(neighbours_at(space, cfg(128, 4, 1), 3)).empty());
  CHECK(neighbours_at(space, cfg(128, 4, 1), 0).empty());
  // A value that is not a candidate has no neighbours along its parameter; the others still move.
  CHECK(texts(neighbours_at(space, cfg(100, 1, 2), 1)) ==
        std::vector<std::string>{"block=100,pack=2,unroll=2", "block=100,pack=1,unroll=1"});
}

TEST_CASE("untried_neighbours: one-step neighbours of every center first, legal and untried only, never twice") {
  const Space space = small_space();
  std::set<Config> legal = all_of(space);
  legal.erase(cfg(512, 2, 1));  // say a constraint forbids it
  const Config best = cfg(256, 2, 1), second = cfg(128, 2, 1);
  std::set<Config> tried{best, second};
  const std::vector<std::string> round = texts(untried_neighbours(space, {best, second}, legal, tried, 100));
  // The best center's neighbours first; block=128 is the second center (tried) and block=512 is not legal.
  CHECK(round == std::vector<std::string>{"block=256,pack=1,unroll=1", "block=256,pack=4,unroll=1",
                                          "block=256,pack=2,unroll=2", "block=64,pack=2,unroll=1",
                                          "block=128,pack=1,unroll=1", "block=128,pack=4,unroll=1",
                                          "block=128,pack=2,unroll=2"});
  // The limit keeps the front of that order.
  CHECK(texts(untried_neighbours(space, {best, second}, legal, tried, 3)) ==
        std::vector<std::string>(round.begin(), round.begin() + 3));
  CHECK(untried_neighbours(space, {best, second}, legal, tried, 0).empty());

  // Two centers sharing a neighbour (pack=2 is one step from pack=1 and from pack=4): it comes once.
  const std::vector<Config> shared =
      untried_neighbours(space, {cfg(256, 1, 1), cfg(256, 4, 1)}, all_of(space), {cfg(256, 1, 1), cfg(256, 4, 1)}, 100);
  CHECK(texts(shared) == std::vector<std::string>{"block=128,pack=1,unroll=1", "block=512,pack=1,unroll=1",
                                                  "block=256,pack=2,unroll=1", "block=256,pack=1,unroll=2",
                                                  "block=128,pack=4,unroll=1", "block=512,pack=4,unroll=1",
                                                  "block=256,pack=4,unroll=2"});

  // Every one-step neighbour tried: the nearest farther step that still has one (block 256 -> 64, two positions).
  tried = {best, cfg(128, 2, 1), cfg(256, 1, 1), cfg(256, 4, 1), cfg(256, 2, 2)};
  CHECK(texts(untried_neighbours(space, {best}, legal, tried, 100)) ==
        std::vector<std::string>{"block=64,pack=2,unroll=1"});
  // ... and once that is tried too, two parameters moved by one position each.
  tried.insert(cfg(64, 2, 1));
  const std::vector<Config> pairs = untried_neighbours(space, {best}, legal, tried, 100);
  CHECK(pairs == pair_neighbours(space, best));
  CHECK(pairs.size() == 8);
  // ... and after those, nothing is left.
  tried.insert(pairs.begin(), pairs.end());
  CHECK(untried_neighbours(space, {best}, legal, tried, 100).empty());
}

TEST_CASE("pair_neighbours: two parameters moved by one position each, for constraints that tie them together") {
  const Space space = small_space();
  CHECK(texts(pair_neighbours(space, cfg(256, 2, 1))) ==
        std::vector<std::string>{"block=128,pack=1,unroll=1", "block=128,pack=4,unroll=1", "block=512,pack=1,unroll=1",
                                 "block=512,pack=4,unroll=1", "block=128,pack=2,unroll=2", "block=512,pack=2,unroll=2",
                                 "block=256,pack=1,unroll=2", "block=256,pack=4,unroll=2"});
  // A corner moves inwards only; a value that is no candidate does not move.
  CHECK(texts(pair_neighbours(space, cfg(64, 1, 1))) ==
        std::vector<std::string>{"block=128,pack=2,unroll=1", "block=128,pack=1,unroll=2", "block=64,pack=2,unroll=2"});
  CHECK(texts(pair_neighbours(space, cfg(100, 1, 1))) == std::vector<std::string>{"block=100,pack=2,unroll=2"});
  // Block and pack tied (block * pack == 512): no single move is legal, a pair move is.
  const std::set<Config> tied{cfg(128, 4, 1), cfg(256, 2, 1), cfg(512, 1, 1)};
  CHECK(texts(untried_neighbours(space, {cfg(256, 2, 1)}, tied, {cfg(256, 2, 1)}, 100)) ==
        std::vector<std::string>{"block=128,pack=4,unroll=1", "block=512,pack=1,unroll=1"});
}

TEST_CASE("seeds: the same signature first, then the nearest features; illegal and repeated configs dropped") {
  const std::set<Config> legal = all_of(small_space());
  const std::string sig = "n=1000", here = "This GPU", other = "Other GPU";
  const std::vector<cache::Record> records{
      record("n=900", here, {900}, "block=64,pack=1,unroll=1"),                 // nearby shape here, distance 100
      record("n=1000", other, {1000}, "block=512,pack=4,unroll=2"),             // this problem on another GPU
      record("n=1010", other, {1010}, "block=128,pack=2,unroll=2"),             // nearby shape elsewhere, distance 10
      record("n=1000", here, {1000}, "block=256,pack=2,unroll=1"),              // this problem tuned here before
      record("n=1001", here, {1001}, "block=256,pack=3,unroll=1"),              // pack=3: not legal
      record("n=1002", here, {1002}, "block="),                                 // unreadable
      record("n=1003", other, {1003}, "block=512,pack=4,unroll=2"),             // a config already taken
      record("n=1004", here, {1004, 1}, "block=64,pack=4,unroll=2"),            // features of another length: last
      record("n=2000", other, {2000}, "block=128,pack=1,unroll=1"),             // distance 1000
  };
  const std::vector<Seed> seeds = rank_seeds(records, sig, {1000}, here, legal);
  std::vector<std::string> got;
  for (const Seed& s : seeds) got.push_back(s.config.text());
  CHECK(got == std::vector<std::string>{"block=256,pack=2,unroll=1", "block=512,pack=4,unroll=2",
                                        "block=128,pack=2,unroll=2", "block=64,pack=1,unroll=1",
                                        "block=128,pack=1,unroll=1", "block=64,pack=4,unroll=2"});
  REQUIRE(seeds.size() == 6);
  CHECK(seeds[0].same_signature);
  CHECK(!seeds[0].other_device);
  CHECK(seeds[1].same_signature);
  CHECK(seeds[1].other_device);
  CHECK(seeds[1].device_name == other);
  CHECK(seeds[2].distance == doctest::Approx(10));
  CHECK(!seeds[3].other_device);
  CHECK(seeds[3].signature == "n=900");
  // The order does not depend on the order the stores returned the records in.
  std::vector<cache::Record> shuffled = records;
  std::mt19937 rng(3);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    std::vector<std::string> again;
    for (const Seed& s : rank_seeds(shuffled, sig, {1000}, here, legal)) again.push_back(s.config.text());
    CHECK(again == got);
  }
  // At most max_seeds, the best ones.
  const std::vector<Seed> two = rank_seeds(records, sig, {1000}, here, legal, 2);
  REQUIRE(two.size() == 2);
  CHECK(two[1].config.text() == "block=512,pack=4,unroll=2");
  CHECK(rank_seeds({}, sig, {1000}, here, legal).empty());
}

TEST_CASE("the default guided budget is a quarter of the legal configs, at least 8, at most all of them") {
  CHECK(default_guided_budget(0) == 0);
  CHECK(default_guided_budget(5) == 5);
  CHECK(default_guided_budget(8) == 8);
  CHECK(default_guided_budget(20) == 8);
  CHECK(default_guided_budget(33) == 9);
  CHECK(default_guided_budget(148) == 37);
}

TEST_CASE("a guided search: round 0 is the default and the seeds, and every later round improves on the best") {
  const Space space = small_space();
  std::vector<Config> legal{cfg(64, 4, 1)};  // the "default" first, as legal_candidates puts it
  for (const Config& c : space.enumerate())
    if (c != legal.front()) legal.push_back(c);
  const Config fastest = cfg(512, 1, 2);  // six positions from the default
  Seed from_other_gpu;
  from_other_gpu.config = cfg(128, 4, 1);
  Seed illegal;
  illegal.config = cfg(100, 4, 1);
  Seed the_default;
  the_default.config = legal.front();
  // The cost: 10 us plus the positions to the fastest config, so each round has a step closer to take.
  const auto cost = [&](const Config& c) { return 10 + positions_apart(space, c, fastest); };

  for (const std::size_t budget : {std::size_t{12}, std::size_t{24}}) {
    CAPTURE(budget);
    GuidedSearch search(space, legal, budget, 0, {the_default, from_other_gpu, illegal});
    CHECK(search.budget() == budget);
    CHECK(texts(search.first_round()) ==
          std::vector<std::string>{"block=64,pack=4,unroll=1", "block=128,pack=4,unroll=1"});
    REQUIRE(search.seeds().size() == 1);
    CHECK(search.seeds()[0].config == from_other_gpu.config);
    std::set<Config> seen;
    std::vector<double> best_after_round;
    for (std::vector<Config> round = search.first_round(); !round.empty(); round = search.next_round(0)) {
      double best = best_after_round.empty() ? 1e30 : best_after_round.back();
      for (const Config& c : round) {
        CHECK_MESSAGE(seen.insert(c).second, c.text(), " proposed twice");
        search.record(c, "ok", cost(c));
        best = std::min(best, cost(c));
      }
      best_after_round.push_back(best);
    }
    CHECK(search.stopped() == "budget");
    CHECK(search.proposed() == budget);
    CHECK(seen.size() == budget);
    REQUIRE(search.round_sizes().size() == best_after_round.size());
    std::size_t total = 0;
    for (std::size_t n : search.round_sizes()) total += n;
    CHECK(total == budget);
    // Half the space: each round is a step closer (15 after round 0, the seed; then 14, 13).
    if (budget == 12) CHECK(best_after_round == std::vector<double>{15, 14, 13});
    // The whole space: the walk reaches the fastest config.
    if (budget == 24) CHECK(seen.contains(fastest));
  }
}

TEST_CASE("a guided search stops when no untried neighbour is left, or at the time limit after round 0") {
  const Space space = small_space();
  const std::vector<Config> every = space.enumerate();
  // Three legal configs in a line (the budget is all three): a failed config is no center.
  const std::vector<Config> line{cfg(128, 2, 1), cfg(256, 2, 1), cfg(512, 2, 1)};
  GuidedSearch small(space, line, 100, 0, {});
  CHECK(small.budget() == 3);
  for (const Config& c : small.first_round()) small.record(c, "ok", 5);
  std::vector<Config> r1 = small.next_round(0);
  CHECK(texts(r1) == std::vector<std::string>{"block=256,pack=2,unroll=1"});
  for (const Config& c : r1) small.record(c, "wrong_result", 0);
  // Still under budget: the failed config is no center, the default's only other neighbour is two steps away.
  std::vector<Config> r2 = small.next_round(0);
  CHECK(texts(r2) == std::vector<std::string>{"block=512,pack=2,unroll=1"});
  CHECK(small.next_round(0).empty());
  CHECK(small.stopped() == "budget");

  GuidedSearch few(space, {cfg(128, 2, 1), cfg(128, 2, 2)}, 100, 0, {});
  few.record(cfg(128, 2, 1), "ok", 5);
  CHECK(texts(few.next_round(0)) == std::vector<std::string>{"block=128,pack=2,unroll=2"});
  CHECK(few.stopped().empty());
  CHECK(few.next_round(0).empty());
  CHECK(few.stopped() == "budget");  // two legal configs: the budget is both

  // A disconnected legal set: the default's neighbours are illegal, so the search ends before its budget.
  GuidedSearch island(space, {cfg(64, 1, 1), cfg(512, 4, 2)}, 2, 0, {});
  island.record(cfg(64, 1, 1), "ok", 5);
  CHECK(island.next_round(0).empty());
  CHECK(island.stopped() == "no untried neighbour");
  CHECK(island.proposed() == 1);

  // The time limit: round 0 always runs; no later round starts once the seconds are spent.
  GuidedSearch timed(space, every, 20, 1.5, {});
  timed.record(timed.first_round()[0], "ok", 5);
  CHECK(!timed.next_round(1.0).empty());
  CHECK(timed.next_round(1.5).empty());
  CHECK(timed.stopped() == "time");
  CHECK(timed.next_round(0).empty());  // over is over

  // While nothing verified, the search looks around what it tried instead of stopping.
  GuidedSearch failing(space, every, 20, 0, {});
  failing.record(failing.first_round()[0], "compile_failed", 0);
  CHECK(texts(failing.next_round(0)) == std::vector<std::string>{"block=128,pack=1,unroll=1",
                                                                 "block=64,pack=2,unroll=1",
                                                                 "block=64,pack=1,unroll=2"});

  CHECK_THROWS_AS(GuidedSearch(space, {}, 5, 0, {}), InvalidArgument);
}

TEST_CASE("guided rounds over the elementwise space stay legal and never repeat a config") {
  const Family& fam = templates::elementwise::elementwise_family();
  const auto problem = fam.make_problem({{"expr", "z = x * y"}, {"dtype", "float32"}, {"n", "1048576"}});
  const DeviceInfo dev = nominal_device(90);
  std::size_t pruned = 0;
  const std::vector<Config> legal = legal_candidates(fam, *problem, dev, pruned);
  REQUIRE(legal.size() > 40);
  const std::set<Config> legal_set(legal.begin(), legal.end());
  GuidedSearch search(fam.space(), legal, 0, 0, {});
  CHECK(search.budget() == default_guided_budget(legal.size()));
  CHECK(search.first_round() == std::vector<Config>{fam.heuristic(*problem, dev)});
  // A cost that prefers the largest blocks and packs: the search must move away from the default to find them.
  const auto cost = [](const Config& c) {
    return 100.0 / static_cast<double>(c.at("block")) + 10.0 / static_cast<double>(c.at("pack"));
  };
  std::set<Config> seen;
  double best = 1e30, first = 0;
  for (std::vector<Config> round = search.first_round(); !round.empty(); round = search.next_round(0))
    for (const Config& c : round) {
      CHECK_MESSAGE(legal_set.contains(c), c.text());
      CHECK_MESSAGE(seen.insert(c).second, c.text(), " proposed twice");
      if (seen.size() == 1) first = cost(c);
      best = std::min(best, cost(c));
      search.record(c, "ok", cost(c));
    }
  double optimum = 1e30;
  for (const Config& c : legal) optimum = std::min(optimum, cost(c));
  CHECK(best < first);
  CHECK(best == optimum);
  // The cost ignores unroll and waves: once the best block and pack are found, the search tries the configs tied
  // with them and ends with budget left, every neighbour of its three best tried.
  CHECK(search.stopped() == "no untried neighbour");
  CHECK(seen.size() == search.proposed());
  CHECK(seen.size() < search.budget());
}

TEST_CASE("strategies have names") {
  CHECK(strategy_name(Strategy::kExhaustive) == "exhaustive");
  CHECK(strategy_name(Strategy::kRandom) == "random");
  CHECK(strategy_name(Strategy::kGuided) == "guided");
}

}  // namespace jitune::tuner
