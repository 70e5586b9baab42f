// The dispatcher's lookup levels without a GPU: user cache, shipped caches, nearest problem, same architecture,
// heuristic; stale template hashes and illegal stored configs are never used.
#include <doctest/doctest.h>

#include <random>

#include "runtime/runtime_impl.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "templates/sources.hpp"

namespace jitune {
namespace {

struct Dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("jitune_lookup_" + std::to_string(std::random_device{}()));
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() { std::filesystem::remove_all(path); }
};

const Family& fam() { return templates::elementwise::elementwise_family(); }

std::unique_ptr<Problem> mul(std::int64_t n, const char* dtype = "float32") {
  return fam().make_problem({{"expr", "z = x * y"}, {"dtype", dtype}, {"n", std::to_string(n)}});
}

cache::Record record(const Problem& p, const DeviceInfo& d, const std::string& config, double us) {
  cache::Record r;
  r.key = record_key(fam(), p, d, "13.0");
  r.group = p.group();
  r.features = p.features();
  r.config = config;
  r.time_us = us;
  r.reps = 10;
  r.default_time_us = us * 1.1;
  r.default_config = fam().heuristic(p, d).text();
  r.jitune_version = "test";
  r.created_at = cache::utc_now();
  return r;
}

const std::string kA = "block=512,pack=4,unroll=2,waves=8";
const std::string kB = "block=128,pack=2,unroll=4,waves=1";
const std::string kC = "block=1024,pack=1,unroll=1,waves=2";

}  // namespace

TEST_CASE("lookup levels in order, with the source reported") {
  Dir dir;
  const DeviceInfo dev = nominal_device(90);
  cache::Store user(dir.path / "user.sqlite", cache::OpenMode::kReadWrite);
  auto shipped_rw = std::make_unique<cache::Store>(dir.path / "shipped.sqlite", cache::OpenMode::kReadWrite);
  auto p = mul(1 << 20);

  SUBCASE("heuristic when nothing is stored") {
    shipped_rw.reset();
    cache::Store shipped(dir.path / "shipped.sqlite", cache::OpenMode::kReadOnly);
    Decision d = lookup_decision(fam(), *p, dev, "13.0", {&user, &shipped});
    CHECK(d.explanation.level == MatchLevel::kHeuristic);
    CHECK(d.config == fam().heuristic(*p, dev));
    CHECK(d.explanation.source == "heuristic");
  }
  SUBCASE("exact from the shipped cache when the user cache has nothing") {
    shipped_rw->put(record(*p, dev, kA, 10));
    shipped_rw.reset();
    cache::Store shipped(dir.path / "shipped.sqlite", cache::OpenMode::kReadOnly);
    Decision d = lookup_decision(fam(), *p, dev, "13.0", {&user, &shipped});
    CHECK(d.explanation.level == MatchLevel::kExact);
    CHECK(d.explanation.config == kA);
    CHECK(d.explanation.source == shipped.path().string());
    CHECK(d.explanation.time_us == 10);
  }
  SUBCASE("the user cache wins over the shipped one") {
    shipped_rw->put(record(*p, dev, kA, 10));
    user.put(record(*p, dev, kB, 12));
    Decision d = lookup_decision(fam(), *p, dev, "13.0", {&user, shipped_rw.get()});
    CHECK(d.explanation.config == kB);
    CHECK(d.explanation.source == user.path().string());
  }
  SUBCASE("a record with another template hash is never used") {
    cache::Record stale = record(*p, dev, kB, 1);
    stale.key.template_hash = "0123456789abcdef";
    user.put(stale);
    shipped_rw->put(record(*p, dev, kA, 10));
    Decision d = lookup_decision(fam(), *p, dev, "13.0", {&user, shipped_rw.get()});
    CHECK(d.explanation.level == MatchLevel::kExact);
    CHECK(d.explanation.config == kA);
    cache::Store only_stale(dir.path / "stale.sqlite", cache::OpenMode::kReadWrite);
    only_stale.put(stale);
    CHECK(lookup_decision(fam(), *p, dev, "13.0", {&only_stale}).explanation.level == MatchLevel::kHeuristic);
  }
  SUBCASE("nearest tuned problem of the same group on this device") {
    user.put(record(*mul(1 << 10), dev, kB, 3));
    user.put(record(*mul(1 << 19), dev, kA, 5));
    user.put(record(*mul(1 << 20, "float16"), dev, kC, 5));  // other group: never borrowed
    Decision d = lookup_decision(fam(), *p, dev, "13.0", {&user});
    CHECK(d.explanation.level == MatchLevel::kNearestProblem);
    CHECK(d.explanation.config == kA);
    CHECK(d.explanation.matched_signature == mul(1 << 19)->signature());
  }
  SUBCASE("same architecture, other device") {
    DeviceInfo other = dev;
    other.name = "Another sm_90 GPU";
    other.sm_count = 114;
    user.put(record(*p, other, kC, 7));
    Decision d = lookup_decision(fam(), *p, dev, "13.0", {&user});
    CHECK(d.explanation.level == MatchLevel::kSameArchitecture);
    CHECK(d.explanation.config == kC);
    CHECK(d.explanation.matched_device == "Another sm_90 GPU");
    DeviceInfo ampere = nominal_device(80);
    CHECK(lookup_decision(fam(), *p, ampere, "13.0", {&user}).explanation.level == MatchLevel::kHeuristic);
  }
  SUBCASE("a stored config that is no longer legal is skipped with a note") {
    user.put(record(*p, dev, "block=256,pack=8,unroll=1,waves=32", 1));  // 32-byte packs: illegal for float32
    Decision d = lookup_decision(fam(), *p, dev, "13.0", {&user});
    CHECK(d.explanation.level == MatchLevel::kHeuristic);
    REQUIRE(!d.explanation.notes.empty());
    CHECK(d.explanation.notes[0].find("16 bytes") != std::string::npos);
  }
  SUBCASE("another NVRTC version still matches exactly, with a note") {
    user.put(record(*p, dev, kA, 10));
    Decision d = lookup_decision(fam(), *p, dev, "13.1", {&user});
    CHECK(d.explanation.level == MatchLevel::kExact);
    REQUIRE(!d.explanation.notes.empty());
    CHECK(d.explanation.notes.back().find("revalidate") != std::string::npos);
  }
}

}  // namespace jitune
