// The dispatcher's lookup levels without a GPU: user cache, shipped caches, nearest problem, same architecture,
// heuristic; stale template hashes and illegal stored configs are never used.
#include <doctest/doctest.h>

#include <random>

#include "runtime/runtime_impl.hpp"
#include "runtime/stores.hpp"
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

cache::Record record(const Problem& p, const DeviceInfo& d, const std::string& config, double us,
                     const Family& f = fam()) {
  cache::Record r;
  r.key = record_key(f, p, Config::parse(config), d, "13.0");
  r.key.family = f.name();
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

// Elementwise under another name, its kernels kept in two templates: configs of unroll 4 include a second one.
// (The second is an existing template, so its hash is real; what it holds does not matter to the lookup.)
class TwoTemplates final : public Family {
 public:
  static constexpr std::string_view kSecond = "common/grid_barrier.cuh";
  std::string_view name() const override { return "test_two_templates"; }
  std::string_view template_name() const override { return fam().template_name(); }
  std::vector<std::string_view> templates() const override { return {template_name(), kSecond}; }
  std::string_view template_of(const Config& c) const override {
    return c.at("unroll") == 4 ? kSecond : template_name();
  }
  const Space& space() const override { return fam().space(); }
  std::vector<ProblemOption> problem_options() const override { return fam().problem_options(); }
  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& o) const override {
    return fam().make_problem(o);
  }
  Config heuristic(const Problem& p, const DeviceInfo& d) const override { return fam().heuristic(p, d); }
  std::string check(const Problem& p, const Config& c, const DeviceInfo& d) const override {
    return fam().check(p, c, d);
  }
  KernelSource source(const Problem& p, const Config& c) const override { return fam().source(p, c); }
  LaunchShape launch_shape(const Problem& p, const Config& c, const DeviceInfo& d) const override {
    return fam().launch_shape(p, c, d);
  }
  std::unique_ptr<Problem> problem_from_call(const CallArgs& a) const override { return fam().problem_from_call(a); }
  std::vector<BufferSpec> buffers(const Problem& p) const override { return fam().buffers(p); }
  void kernel_args(const Problem& p, const Config& c, const Bindings& b, KernelArgs& a) const override {
    fam().kernel_args(p, c, b, a);
  }
  Workload workload(const Problem& p, std::uint64_t seed) const override { return fam().workload(p, seed); }
  std::vector<std::vector<std::byte>> reference(const Problem& p, const Workload& w) const override {
    return fam().reference(p, w);
  }
  OutputCheck output_check(const Problem& p, std::size_t i) const override { return fam().output_check(p, i); }
  std::vector<std::pair<std::string, std::string>> default_suite() const override { return {}; }
};

const TwoTemplates& two() {
  static const TwoTemplates f;
  return f;
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

TEST_CASE("a family of two templates: each config's records carry its own template's hash") {
  Dir dir;
  const DeviceInfo dev = nominal_device(90);
  cache::Store user(dir.path / "user.sqlite", cache::OpenMode::kReadWrite);
  auto p = mul(1 << 20);
  const std::string main_hash = template_hash(two().template_name());
  const std::string second_hash = template_hash(TwoTemplates::kSecond);
  REQUIRE(main_hash != second_hash);
  CHECK(template_hashes(two()) == std::vector<std::string>{main_hash, second_hash});
  CHECK(record(*p, dev, kA, 10, two()).key.template_hash == main_hash);
  CHECK(record(*p, dev, kB, 10, two()).key.template_hash == second_hash);  // unroll 4

  SUBCASE("a record of the second template serves exactly, beside an older one of the first") {
    cache::Record older = record(*p, dev, kA, 12, two());
    older.created_at = "2026-01-01T00:00:00Z";
    user.put(older);
    user.put(record(*p, dev, kB, 10, two()));
    Decision d = lookup_decision(two(), *p, dev, "13.0", {&user});
    CHECK(d.explanation.level == MatchLevel::kExact);
    CHECK(d.explanation.config == kB);
  }
  SUBCASE("a changed second template leaves the first template's records current") {
    // The newest record ran the second template's kernel before it changed (its hash is no longer that
    // template's); the first template's record is still exact.
    cache::Record changed = record(*p, dev, kB, 10, two());
    changed.key.template_hash = "0123456789abcdef";
    cache::Record kept = record(*p, dev, kA, 12, two());
    kept.created_at = "2026-01-01T00:00:00Z";
    user.put(kept);
    user.put(changed);
    Decision d = lookup_decision(two(), *p, dev, "13.0", {&user});
    CHECK(d.explanation.level == MatchLevel::kExact);
    CHECK(d.explanation.config == kA);
    CHECK(record_current(two(), kept.key.template_hash, kept.config));
    CHECK_FALSE(record_current(two(), changed.key.template_hash, changed.config));
  }
  SUBCASE("a config that carries the other template's hash is never used") {
    cache::Record wrong = record(*p, dev, kB, 1, two());
    wrong.key.template_hash = main_hash;  // unroll 4 runs the second template's kernel
    user.put(wrong);
    Decision d = lookup_decision(two(), *p, dev, "13.0", {&user});
    CHECK(d.explanation.level == MatchLevel::kHeuristic);
    REQUIRE(!d.explanation.notes.empty());
    CHECK(d.explanation.notes[0].find("another version of its kernel template") != std::string::npos);
    CHECK_FALSE(record_current(two(), main_hash, kB));
    CHECK_FALSE(record_current(two(), main_hash, "block=512,pack=4"));  // not in the space: not current
  }
  SUBCASE("import: a stale record is kept as it is, a config under the other template's hash is refused") {
    register_family(two());
    cache::Record r = record(*p, dev, kB, 10, two());
    CHECK(check_with_registry(r).empty());
    r.key.template_hash = "0123456789abcdef";  // another version of the templates: kept, never used
    CHECK(check_with_registry(r).empty());
    r.key.template_hash = main_hash;
    const std::string why = check_with_registry(r);
    CHECK(why.find("runs the kernel of template common/grid_barrier.cuh") != std::string::npos);
  }
  SUBCASE("the nearest problem takes records of either template") {
    user.put(record(*mul(1 << 19), dev, kB, 5, two()));
    Decision d = lookup_decision(two(), *p, dev, "13.0", {&user});
    CHECK(d.explanation.level == MatchLevel::kNearestProblem);
    CHECK(d.explanation.config == kB);
  }
}

}  // namespace jitune
