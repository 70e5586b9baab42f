// The jitune CLI as a user meets it: exit codes, messages that say what to do, --json, dry runs and cache tools.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <jitune/runtime.hpp>

#include "cache/jsonl.hpp"
#include "cache/store.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/stores.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "store_test_support.hpp"

namespace jitune {
namespace {

struct Result {
  int code;
  std::string out;
};

// Runs the CLI with `args`; `env` adds environment variables (values without shell quotes or spaces).
Result run(const std::string& args, const std::map<std::string, std::string>& env = {}) {
  std::string prefix;
  for (const auto& [name, value] : env) prefix += name + "=" + value + " ";
  const std::string cmd = (prefix.empty() ? "" : "env " + prefix) + std::string(JITUNE_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

struct Dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("jitune_cli_" + std::to_string(std::random_device{}()));
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string cache() const { return "--cache " + (path / "c.sqlite").string(); }
};

cache::Record sample_record(std::int64_t n, double us) {
  const auto& fam = templates::elementwise::elementwise_family();
  auto p = fam.make_problem({{"expr", "z = x * y"}, {"dtype", "float32"}, {"n", std::to_string(n)}});
  cache::Record r;
  r.key = record_key(fam, *p, Config::parse("block=256,pack=4,unroll=2,waves=8"), nominal_device(90), "13.0");
  r.group = p->group();
  r.features = p->features();
  r.config = "block=256,pack=4,unroll=2,waves=8";
  r.time_us = us;
  r.reps = 10;
  r.default_time_us = us * 1.2;
  r.default_config = "block=256,pack=4,unroll=1,waves=32";
  r.jitune_version = "test";
  r.created_at = cache::utc_now();
  return r;
}

}  // namespace

TEST_CASE("devices and tune without a GPU say so plainly") {
  if (device_count() > 0) {
    CHECK(run("devices").out.find("sm_") != std::string::npos);
    return;
  }
  Result d = run("devices");
  CHECK(d.code == 3);  // the README's exit code for "no GPU"
  CHECK(d.out.find("no CUDA device") != std::string::npos);
  Result t = run("tune elementwise --expr 'z = x * y' --dtype float32 --n 1000");
  CHECK(t.code == 3);
  CHECK(t.out.find("no GPU") != std::string::npos);
  CHECK(t.out.find("--dry-run") != std::string::npos);
}

TEST_CASE("on a fresh machine without a GPU, explain and cache list read the shipped caches") {
  if (device_count() > 0) {
    MESSAGE("a GPU is present: explain uses it; this case checks the machine without one");
    return;
  }
  Dir dir;  // an empty user cache folder: a fresh machine
  const std::string fresh = "--cache " + (dir.path / "none.sqlite").string();
  // Two device models are shipped: without a GPU, explain asks which one and names both.
  Result ask = run(fresh + " explain --suite default");
  CHECK(ask.code == 1);
  CHECK(ask.out.find("'NVIDIA H100 80GB HBM3', 'NVIDIA H200'") != std::string::npos);
  std::size_t shipped_records = 0;
  // The family/case names explain does not find exact, and those `tune --suite default --missing --plan` lists (with
  // its plan), under the given cache options.
  using Names = std::multiset<std::string>;
  auto not_exact_of = [](const nlohmann::json& explained) {
    Names names;
    for (const auto& c : explained["cases"])
      if (c["level"] != "exact") names.insert(c["family"].get<std::string>() + "/" + c["case"].get<std::string>());
    return names;
  };
  auto planned_of = [&](const std::string& cache, const std::string& device, Result& missing) {
    missing = run("--json " + cache + " --device-name '" + device + "' tune --suite default --missing --plan");
    REQUIRE_MESSAGE(missing.code == 0, missing.out);
    const auto plan = nlohmann::json::parse(missing.out.substr(missing.out.find('{')));
    Names names;
    for (const auto& item : plan["items"])
      names.insert(item["family"].get<std::string>() + "/" + item["name"].get<std::string>());
    CHECK(plan["total_items"] == names.size());
    return names;
  };
  for (const std::string device : {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}) {
    INFO(device);
    Result suite = run("--json " + fresh + " explain --device-name '" + device + "' --suite default");
    REQUIRE_MESSAGE(suite.code == 0, suite.out);
    const auto j = nlohmann::json::parse(suite.out);
    CHECK(j["device"].get<std::string>().find(device) == 0);
    for (const auto& c : j["cases"]) {
      INFO(c["case"].get<std::string>());
      // Each shipped file covers the default suite on its device (the H200 file refreshed on an H200 on
      // 2026-11-27, eleventh session: `bench/device.sh refresh`).
      CHECK(c["level"] == "exact");
      shipped_records += c["level"] == "exact";
    }
    CHECK(j["cases"].size() > 90);
    // tune --missing lists exactly the cases explain does not find exact for that device (--plan: no GPU).
    const Names not_exact = not_exact_of(j);
    Result missing;
    const Names planned = planned_of(fresh, device, missing);
    CHECK(planned == not_exact);
    CHECK(missing.out.find("--missing: " + std::to_string(not_exact.size()) + " of " +
                           std::to_string(j["cases"].size()) + " cases are not served exactly on " + device) !=
          std::string::npos);
    CHECK(not_exact.empty());
  }
  {
    // Half of the H100 file in a user cache, the shipped files ignored: --missing plans exactly the other half (and
    // any case whose record the half does not hold), as explain finds them.
    std::ifstream in(std::string(JITUNE_SOURCE_DIR) + "/cache/shipped/nvidia-h100-80gb-hbm3.jsonl");
    std::ofstream half(dir.path / "half.jsonl");
    std::string line;
    std::size_t kept = 0;
    for (int i = 0; std::getline(in, line); ++i)
      if (i % 2 == 0) half << line << '\n', ++kept;
    half.close();
    const std::string user = "--no-shipped --cache " + (dir.path / "half.sqlite").string();
    REQUIRE(run(user + " cache import " + (dir.path / "half.jsonl").string()).code == 0);
    const std::string device = "NVIDIA H100 80GB HBM3";
    Result suite = run("--json " + user + " explain --device-name '" + device + "' --suite default");
    REQUIRE_MESSAGE(suite.code == 0, suite.out);
    const auto explained = nlohmann::json::parse(suite.out);
    const Names not_exact = not_exact_of(explained);
    Result missing;
    const Names planned = planned_of(user, device, missing);
    CHECK(not_exact.size() == explained["cases"].size() - kept);  // one record a case: the others are missing
    CHECK(not_exact.size() >= 60);
    CHECK(planned == not_exact);
  }
  // --missing: a suite's cases, a GPU (or --plan with --device-name), and --device-name only for a plan.
  const std::pair<const char*, const char*> refused[] = {
      {"tune elementwise --expr 'z = x' --dtype float32 --n 10 --missing", "add --suite default"},
      {"--device-name 'NVIDIA H200' tune --suite default --missing", "drop --device-name, or add --plan"}};
  for (auto [args, message] : refused) {
    Result r = run(fresh + " " + args);
    CHECK_MESSAGE(r.code != 0, args);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, args, ": ", r.out);
  }
  Result no_gpu = run(fresh + " tune --suite default --family permute --missing");
  CHECK(no_gpu.code == 3);
  CHECK(no_gpu.out.find("run it on the GPU, or list them for a device with --plan --device-name NAME") !=
        std::string::npos);
  Result one = run(fresh + " explain --device-name 'NVIDIA H100 80GB HBM3' permute --dtype float32 --shape 8192x8192 "
                   "--perm 1,0");
  CHECK_MESSAGE(one.code == 0, one.out);
  CHECK(one.out.find("level     exact") != std::string::npos);
  CHECK(one.out.find("none yet") != std::string::npos);  // the missing user cache is a note, not an error
  Result unknown = run(fresh + " explain --device-name 'Some GPU' permute --dtype float32 --shape 8x8 --perm 1,0");
  CHECK(unknown.code == 1);
  CHECK(unknown.out.find("they hold 'NVIDIA H100 80GB HBM3', 'NVIDIA H200'") != std::string::npos);
  Result list = run("--json " + fresh + " cache list");
  REQUIRE_MESSAGE(list.code == 0, list.out);
  const auto records = nlohmann::json::parse(list.out);
  CHECK(records.size() == shipped_records);
  CHECK(records[0]["source"].get<std::string>().find("shipped") != std::string::npos);
  CHECK(nlohmann::json::parse(run("--json --no-shipped " + fresh + " cache list").out).empty());
}

TEST_CASE("dry run compiles the space and reports resources as JSON") {
  Result r = run("--json tune elementwise --expr 'z = x + y' --dtype float16 --n 4097 --dry-run --threads 2");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 1);
  CHECK(j[0]["legal"].get<int>() > 100);
  for (const auto& c : j[0]["candidates"]) {
    CHECK(c["status"] == "ok");
    CHECK(c["registers"].get<int>() > 0);
  }
}

TEST_CASE("tune --plan --shard: N shards list the whole suite, each case once, without a GPU") {
  Result whole = run("--json tune --suite default --plan");
  REQUIRE_MESSAGE(whole.code == 0, whole.out);
  const auto all = nlohmann::json::parse(whole.out);
  std::multiset<std::string> expected;
  for (const auto& item : all["items"]) expected.insert(item["family"].get<std::string>() + "/" +
                                                        item["name"].get<std::string>());
  CHECK(expected.size() == all["total_items"].get<std::size_t>());
  CHECK(expected.size() > 50);
  for (int n : {1, 3, 8}) {
    std::multiset<std::string> seen;
    double cost = 0;
    for (int i = 0; i < n; ++i) {
      // The Slurm variables of task i of an array --array=10-(10+n-1).
      Result r = run("--json tune --suite default --plan --shard auto", {{"SLURM_ARRAY_TASK_ID", std::to_string(10 + i)},
                                                                        {"SLURM_ARRAY_TASK_MIN", "10"},
                                                                        {"SLURM_ARRAY_TASK_COUNT", std::to_string(n)}});
      REQUIRE_MESSAGE(r.code == 0, r.out);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["shard"] == i);
      CHECK(j["shards"] == n);
      CHECK(j["source"] == "Slurm job array");
      for (const auto& item : j["items"])
        seen.insert(item["family"].get<std::string>() + "/" + item["name"].get<std::string>());
      cost += j["cost"].get<double>();
    }
    CHECK(seen == expected);  // the union is the suite, and no case is in two shards
    CHECK(cost == doctest::Approx(all["total_cost"].get<double>()));
  }
  // A filtered suite shards the same way, and --shard / --plan need a suite.
  Result fam = run("--json tune --suite default --family permute --plan --shard 0/2");
  REQUIRE_MESSAGE(fam.code == 0, fam.out);
  const auto fam_plan = nlohmann::json::parse(fam.out);  // kept: iterating parse(...)["items"] would dangle
  CHECK(fam_plan["items"].size() >= 7);  // the 14 permute cases over 2 shards
  for (const auto& item : fam_plan["items"]) CHECK(item["family"] == "permute");
  Result lone = run("tune elementwise --expr 'z = x' --dtype float32 --n 10 --shard 0/2");
  CHECK(lone.code == 2);
  CHECK_MESSAGE(lone.out.find("works on a suite") != std::string::npos, lone.out);
  Result past = run("tune --suite default --plan --shard 2/2");
  CHECK(past.code != 0);
  CHECK_MESSAGE(past.out.find("numbered 0 to 1") != std::string::npos, past.out);
  Result both = run("tune --suite default --plan --dry-run");
  CHECK(both.code == 2);
}

TEST_CASE("tune --devices: each GPU a shard of the suite (--plan without a GPU), and what it refuses") {
  Result whole = run("--json tune --suite default --plan");
  REQUIRE_MESSAGE(whole.code == 0, whole.out);
  std::multiset<std::string> expected, seen;
  const auto all = nlohmann::json::parse(whole.out);
  for (const auto& item : all["items"])
    expected.insert(item["family"].get<std::string>() + "/" + item["name"].get<std::string>());
  Result plan = run("--json tune --suite default --plan --devices 3,0,5");
  REQUIRE_MESSAGE(plan.code == 0, plan.out);
  const auto j = nlohmann::json::parse(plan.out);
  REQUIRE(j["devices"].size() == 3);
  const int ordinals[] = {3, 0, 5};
  for (int k = 0; k < 3; ++k) {
    const auto& d = j["devices"][k];
    CHECK(d["device"] == ordinals[k]);  // in the order given, GPU k of the list taking shard k
    CHECK(d["shard"] == k);
    CHECK(d["shards"] == 3);
    // The host's cores split between the workers' compile pools.
    CHECK(d["compile_threads"] == std::max(1u, std::max(1u, std::thread::hardware_concurrency()) / 3));
    for (const auto& item : d["items"])
      seen.insert(item["family"].get<std::string>() + "/" + item["name"].get<std::string>());
  }
  CHECK(seen == expected);  // the union is the suite, no case on two GPUs
  CHECK(expected.size() > 50);
  Result text = run("tune --suite default --family permute --plan --devices 0,1");
  REQUIRE_MESSAGE(text.code == 0, text.out);
  CHECK(text.out.find("gpu 0:") != std::string::npos);
  CHECK(text.out.find("gpu 1:") != std::string::npos);
  CHECK(text.out.find("shard 1 of 2") != std::string::npos);
  const std::pair<const char*, const char*> refused[] = {
      {"tune --suite default --plan --devices all", "name the devices (--devices 0,1)"},
      {"tune --suite default --plan --devices 0,0", "names GPU 0 twice"},
      {"tune --suite default --plan --devices 0,x", "GPU ordinals separated by commas"},
      {"tune --suite default --devices 0,1 --shard 0/2", "drop --shard"},
      {"tune --suite default --devices 0,1 --dry-run", "drop --devices"},
      {"tune elementwise --expr 'z = x' --dtype float32 --n 10 --devices 0,1", "add --suite default"},
      {"tune --suite default --family permute --claims /nonexistent/claims", "give --shard i/N too"},
      {"tune --suite default --devices 0,1 --claims /tmp/c", "drop --claims and --compile-share"},
      {"tune --suite default --devices 0,1 --compile-share /tmp/c", "drop --claims and --compile-share"},
      {"tune --suite default --family permute --shard 0/2 --dry-run --compile-share /tmp/c",
       "--compile-share has no effect with --dry-run"},
      {"tune --suite default --family permute --shard 0/2 --plan --claims /tmp/c", "have no effect; drop them"}};
  for (auto [args, message] : refused) {
    Result r = run(args);
    CHECK_MESSAGE(r.code != 0, args);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, args, ": ", r.out);
  }
  // Shards sharing a claims folder (a dry run needs no GPU): the first process, alone, takes every case (its own,
  // then the others' from their ends); the second finds them all claimed and compiles none. Each case once.
  {
    Dir claims;
    const std::string base = "--json tune --suite default --family reduce_rows --dry-run --strategy random --budget 1 "
                             "--claims " + (claims.path / "claims").string() + " --shard ";
    Result first = run(base + "0/2"), second = run(base + "1/2");
    REQUIRE_MESSAGE(first.code == 0, first.out);
    REQUIRE_MESSAGE(second.code == 0, second.out);
    auto compiled = [](const std::string& out) {
      std::multiset<std::string> cases;
      for (const auto& c : nlohmann::json::parse(out.substr(out.find('['))))
        cases.insert(c["family"].get<std::string>() + "/" + c["signature"].get<std::string>());
      return cases;
    };
    const std::multiset<std::string> a = compiled(first.out), b = compiled(second.out);
    Result whole_rr = run("--json tune --suite default --family reduce_rows --plan");
    REQUIRE(whole_rr.code == 0);
    std::multiset<std::string> suite;
    const auto listed = nlohmann::json::parse(whole_rr.out);  // kept: ["items"] refers into it
    for (const auto& item : listed["items"])
      suite.insert(item["family"].get<std::string>() + "/" + item["signature"].get<std::string>());
    CHECK(suite.size() == 16);
    CHECK(a == suite);
    CHECK(b.empty());
    CHECK(first.out.find("of other shards'") != std::string::npos);
    CHECK(second.out.find("0 of this shard's") != std::string::npos);
  }
  // Without a GPU the workers are never started: the no-GPU exit, saying why.
  Result none = run("tune --suite default --family permute --devices 0,1");
  CHECK(none.code == 3);
  CHECK(none.out.find("no GPU") != std::string::npos);
}

TEST_CASE("bad command lines are clear errors with distinct exit codes") {
  Result dtype = run("tune elementwise --expr 'z = x' --dtype fp8 --n 10 --dry-run");
  CHECK(dtype.code == 1);
  CHECK(dtype.out.find("float16") != std::string::npos);
  Result n = run("tune elementwise --expr 'z = x' --dtype float32 --n -5 --dry-run");
  CHECK(n.code == 1);
  CHECK(n.out.find("non-negative") != std::string::npos);
  Result expr = run("tune elementwise --expr 'z = x; y' --dtype float32 --n 10 --dry-run");
  CHECK(expr.code == 1);
  CHECK(expr.out.find("^") != std::string::npos);
  Result missing = run("tune elementwise --dtype float32 --n 10 --dry-run");
  CHECK(missing.code == 1);
  CHECK(missing.out.find("missing 'expr'") != std::string::npos);
  Result nvrtc = run("tune elementwise --expr 'z = nope(x)' --dtype float32 --n 10 --dry-run");
  CHECK(nvrtc.code == 1);
  CHECK(nvrtc.out.find("identifier \"nope\" is undefined") != std::string::npos);
  CHECK(run("tune --strategy sometimes --suite default").code == 2);
  CHECK(run("tune").code == 2);
  CHECK(run("frobnicate").code == 2);
  CHECK(run("tune --suite default --family nosuch --dry-run").out.find("known families") != std::string::npos);
  // A wrong name gets the list of right ones: families exit 1 (a bad value), commands 2 (a bad command line).
  for (const char* line : {"tune nosuch", "explain nosuch --n 3", "cache show nosuch"}) {
    Result r = run(line);
    CHECK_MESSAGE(r.code == 1, line, ": ", r.out);
    CHECK_MESSAGE(r.out.find("unknown family 'nosuch'; the families are elementwise") != std::string::npos, r.out);
  }
  Result command = run("frobnicate");
  CHECK(command.out.find("unknown command 'frobnicate'; the commands are devices, tune") != std::string::npos);
  Result cache_command = run("cache frob");
  CHECK(cache_command.code == 2);
  CHECK(cache_command.out.find("unknown cache command 'frob'") != std::string::npos);
  // Options that would be ignored are errors.
  const std::string problem = "tune elementwise --expr 'z = x' --dtype float32 --n 10 ";
  for (const std::string extra : {"--arch sm_90", "--dry-run --no-store", "--dry-run --l2 warm", "--budget 5",
                                  "--dry-run --configs 'block=256'"}) {
    Result r = run(problem + extra);
    CHECK_MESSAGE(r.code == 2, extra, ": ", r.out);
    CHECK_MESSAGE(r.out.find("jitune tune: --") != std::string::npos, extra, ": ", r.out);
  }
  // `--family a b` would read b as the family subcommand and drop it from the suite: an error that says how.
  Result two = run("tune --suite default --family scatter_add elementwise_view --dry-run");
  CHECK(two.code == 2);
  CHECK_MESSAGE(two.out.find("--family a --family elementwise_view") != std::string::npos, two.out);
  // With --json every error is one JSON object on stdout; messages never repeat their "jitune" prefix.
  for (const char* line : {"--json tune nosuch", "--json frobnicate", "--json tune elementwise --dtype float32 "
                           "--n 10 --dry-run", "--json --cache /nonexistent/dir/c.sqlite cache export /tmp/x.jsonl",
                           "--json explain --device-name nosuch --suite default"}) {
    Result r = run(std::string(line) + " 2>/dev/null");
    INFO(line, ": ", r.out);
    CHECK(r.code != 0);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(r.out));
    CHECK(j["error"]["exit_code"] == r.code);
    CHECK(j["error"]["message"].get<std::string>().size() > 10);
    CHECK(!j["error"]["kind"].get<std::string>().empty());
  }
  for (const char* line : {"--cache /nonexistent/dir/c.sqlite cache export /tmp/x.jsonl", "tune elementwise --dtype "
                           "float32 --n 10 --dry-run", "explain --suite default --family x"}) {
    Result r = run(line);
    CHECK_MESSAGE(r.out.find("jitune: jitune") == std::string::npos, r.out);
  }
}

TEST_CASE("tune --strategy guided, --effort, --budget and --time: what is accepted and what is a clear error") {
  const std::string problem = "tune elementwise --expr 'z = x * y' --dtype float32 --n 1000 ";
  // Accepted lines reach the device check: exit 3 here, without a GPU (a refused line exits 2 before it).
  for (const std::string ok : {"--strategy guided", "--effort quick", "--strategy guided --budget 5",
                               "--strategy guided --time 30", "--effort quick --budget 5 --time 2.5",
                               "--effort default", "--effort exhaustive", "--strategy random --budget 5"}) {
    Result r = run(problem + ok);
    CHECK_MESSAGE(r.code == 3, ok, ": ", r.out);
    CHECK_MESSAGE(r.out.find("no GPU here") != std::string::npos, ok, ": ", r.out);
  }
  const std::vector<std::pair<std::string, std::string>> refused{
      {"--effort quick --strategy guided", "--effort quick is a shorthand for a strategy"},
      {"--effort exhaustive --strategy random", "give one of them"},
      {"--time 30", "--time bounds the rounds of the guided search"},
      {"--strategy random --time 30", "add --strategy guided or --effort quick"},
      {"--effort default --time 30", "--time bounds the rounds"},
      {"--effort exhaustive --budget 5", "--budget is the random or guided strategy's candidate count"},
      {"--budget 5", "add --strategy random, --strategy guided or --effort quick"},
      {"--strategy guided --dry-run", "the guided search chooses by timings; use --strategy random --budget N"},
      {"--effort quick --dry-run", "--dry-run compiles without timing"},
      {"--strategy guided --configs 'block=256,pack=4,unroll=1,waves=32'", "--configs times exactly the listed"},
      {"--strategy guided --time 0", "'0' is not a number of seconds"},
      {"--strategy guided --time soon", "'soon' is not a number of seconds"},
      {"--strategy guided --budget 0", "'0' is not a candidate count"},
      {"--effort slow", "slow not in {quick,default,exhaustive}"},
  };
  for (const auto& [line, message] : refused) {
    Result r = run(problem + line);
    CHECK_MESSAGE(r.code == 2, line, ": ", r.out);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, line, ": ", r.out);
  }
  // --json: the same refusal as one JSON object.
  Result j = run("--json " + problem + "--effort quick --strategy random 2>/dev/null");
  CHECK(j.code == 2);
  CHECK(nlohmann::json::parse(j.out)["error"]["kind"] == "usage");
  // A suite plans the same way whatever the strategy (the plan is the split, not the search).
  Result plan = run("--json tune --suite default --family elementwise --effort quick --plan");
  REQUIRE_MESSAGE(plan.code == 0, plan.out);
  CHECK(nlohmann::json::parse(plan.out)["items"].size() > 5);
  Result help = run("tune --help");
  CHECK(help.code == 0);
  for (const char* word : {"guided", "--effort", "quick", "--time", "a quarter of the legal configs"})
    CHECK_MESSAGE(help.out.find(word) != std::string::npos, word);
}

TEST_CASE("cache list, show, export, import and merge") {
  Dir dir;
  {
    cache::Store s(dir.path / "c.sqlite", cache::OpenMode::kReadWrite);
    s.put(sample_record(1000, 5.0));
    s.put(sample_record(2000, 6.0));
  }
  Result list = run("--json --no-shipped " + dir.cache() + " cache list");
  REQUIRE_MESSAGE(list.code == 0, list.out);
  auto j = nlohmann::json::parse(list.out);
  CHECK(j.size() == 2);
  CHECK(j[0]["stale"] == false);

  Result show = run(dir.cache() + " cache show elementwise --expr 'z = x * y' --dtype float32 --n 1000");
  CHECK(show.code == 0);
  CHECK(show.out.find("block=256,pack=4,unroll=2,waves=8") != std::string::npos);

  const std::string file = (dir.path / "out.jsonl").string();
  CHECK(run(dir.cache() + " cache export " + file).code == 0);
  std::ifstream in(file);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  CHECK(lines == 2);
  // A symbolic link at the path is replaced (the link, never its target) only with --force.
  const std::filesystem::path target = dir.path / "target.txt", link = dir.path / "link.jsonl";
  std::ofstream(target) << "precious\n";
  std::filesystem::create_symlink(target, link);
  Result refused = run(dir.cache() + " cache export " + link.string());
  CHECK(refused.code != 0);
  CHECK_MESSAGE(refused.out.find("--force") != std::string::npos, refused.out);
  CHECK(std::filesystem::is_symlink(link));
  CHECK(run(dir.cache() + " cache export --force " + link.string()).code == 0);
  CHECK_FALSE(std::filesystem::is_symlink(link));
  std::ifstream target_in(target);
  std::getline(target_in, line);
  CHECK(line == "precious");

  const std::string other = "--cache " + (dir.path / "other.sqlite").string();
  Result imp = run("--json " + other + " cache import " + file);
  REQUIRE_MESSAGE(imp.code == 0, imp.out);
  CHECK(nlohmann::json::parse(imp.out)["added"] == 2);

  // A bad line is rejected with its number; good lines still count.
  std::ofstream(dir.path / "bad.jsonl") << cache::to_json_line(sample_record(3000, 4.0)) << "\n{not json\n";
  Result bad = run(other + " cache import " + (dir.path / "bad.jsonl").string());
  CHECK(bad.code == 1);
  CHECK(bad.out.find("line 2") != std::string::npos);
  // A record for an unknown family or a config outside the space is rejected by the registry validator.
  cache::Record alien = sample_record(4000, 4.0);
  alien.config = "block=256,pack=4,unroll=3,waves=8";
  std::ofstream(dir.path / "alien.jsonl") << cache::to_json_line(alien) << "\n";
  Result al = run(other + " cache import " + (dir.path / "alien.jsonl").string());
  CHECK(al.code == 1);
  CHECK(al.out.find("outside the elementwise space") != std::string::npos);
  // The same record of another template version is stale, not bad: kept (an older export still imports after a
  // template gains a parameter), never used by lookups, and listed as stale.
  alien.key.template_hash = "0123456789abcdef";
  std::ofstream(dir.path / "stale.jsonl") << cache::to_json_line(alien) << "\n";
  Result st = run("--json " + other + " cache import " + (dir.path / "stale.jsonl").string());
  REQUIRE_MESSAGE(st.code == 0, st.out);
  CHECK(nlohmann::json::parse(st.out)["added"] == 1);
  Result listed = run(other + " cache list");
  CHECK_MESSAGE(listed.out.find("stale") != std::string::npos, listed.out);
  // export --current leaves the stale record out (and says so); a plain export keeps every record.
  const std::string every = (dir.path / "every.jsonl").string(), current = (dir.path / "current.jsonl").string();
  Result all_out = run("--json " + other + " cache export " + every);
  REQUIRE_MESSAGE(all_out.code == 0, all_out.out);
  Result cur_out = run(other + " cache export --current " + current);
  REQUIRE_MESSAGE(cur_out.code == 0, cur_out.out);
  CHECK_MESSAGE(cur_out.out.find("(1 of a changed template or an unknown family left out)") != std::string::npos,
                cur_out.out);
  const std::vector<std::string> every_lines = store_test::read_lines(every),
                                 current_lines = store_test::read_lines(current);
  CHECK(every_lines.size() == nlohmann::json::parse(all_out.out)["exported"].get<std::size_t>());
  CHECK(current_lines.size() + 1 == every_lines.size());
  CHECK(every_lines.size() >= 2);
  for (const std::string& l : current_lines) CHECK(l.find("0123456789abcdef") == std::string::npos);
  CHECK(std::count_if(every_lines.begin(), every_lines.end(),
                      [](const std::string& l) { return l.find("0123456789abcdef") != std::string::npos; }) == 1);

  // Times no GPU could reach are rejected: below the launch floor, or more bytes than 40 TB/s moves.
  std::ofstream(dir.path / "impossible.jsonl") << cache::to_json_line(sample_record(5000, 1e-300)) << "\n"
                                               << cache::to_json_line(sample_record(1 << 28, 10.0)) << "\n";
  Result impossible = run(other + " cache import " + (dir.path / "impossible.jsonl").string());
  CHECK(impossible.code == 1);
  CHECK_MESSAGE(impossible.out.find("line 1: rejected") != std::string::npos, impossible.out);
  CHECK_MESSAGE(impossible.out.find("a launch alone takes over 0.5 us") != std::string::npos, impossible.out);
  CHECK_MESSAGE(impossible.out.find("line 2: rejected") != std::string::npos, impossible.out);
  CHECK_MESSAGE(impossible.out.find("at 40 TB/s") != std::string::npos, impossible.out);

  // Merge never replaces a stored record unless --trust: without it the stored one stays and the report says
  // how to take the faster claim; with it the faster record stays.
  {
    cache::Store s(dir.path / "faster.sqlite", cache::OpenMode::kReadWrite);
    s.put(sample_record(1000, 2.5));
  }
  auto time_of_n1000 = [&] {
    cache::Store s(dir.path / "c.sqlite", cache::OpenMode::kReadOnly);
    for (const auto& r : s.records())
      if (r.key.signature.find("n=1000;") != std::string::npos || r.key.signature.ends_with("n=1000"))
        return r.time_us;
    return -1.0;
  };
  Result kept = run(dir.cache() + " cache merge " + (dir.path / "faster.sqlite").string());
  CHECK(kept.code == 0);
  CHECK_MESSAGE(kept.out.find("kept the stored") != std::string::npos, kept.out);
  CHECK_MESSAGE(kept.out.find("--trust") != std::string::npos, kept.out);
  CHECK(time_of_n1000() == 5.0);
  Result merge = run(dir.cache() + " cache merge --trust " + (dir.path / "faster.sqlite").string());
  CHECK(merge.code == 0);
  CHECK(merge.out.find("1 replaced") != std::string::npos);
  CHECK(time_of_n1000() == 2.5);

  // --majority over repeated shards: two shards chose another config within 3% of the stored 2.5 us, so the
  // majority (2 of 3 records) replaces it although it is slower; a lone faster claim does not.
  auto config_of_n1000 = [&] {
    cache::Store s(dir.path / "c.sqlite", cache::OpenMode::kReadOnly);
    for (const auto& r : s.records())
      if (r.key.signature.find("n=1000;") != std::string::npos || r.key.signature.ends_with("n=1000"))
        return r.config;
    return std::string("none");
  };
  for (const auto& [name, us] : {std::pair{"shard1.sqlite", 2.52}, {"shard2.sqlite", 2.55}}) {
    cache::Store s(dir.path / name, cache::OpenMode::kReadWrite);
    cache::Record r = sample_record(1000, us);
    r.config = "block=128,pack=4,unroll=2,waves=8";
    s.put(r);
  }
  Result both = run(dir.cache() + " cache merge --majority --trust " + (dir.path / "shard1.sqlite").string());
  CHECK(both.code != 0);  // two policies at once: refused before anything is read
  CHECK(config_of_n1000() == "block=256,pack=4,unroll=2,waves=8");
  Result majority = run(dir.cache() + " cache merge --majority " + (dir.path / "shard1.sqlite").string() + " " +
                        (dir.path / "shard2.sqlite").string());
  CHECK(majority.code == 0);
  CHECK_MESSAGE(majority.out.find("chosen by 2 of 3 records within 3% of the fastest") != std::string::npos,
                majority.out);
  CHECK(config_of_n1000() == "block=128,pack=4,unroll=2,waves=8");
  CHECK(time_of_n1000() == 2.52);
}

TEST_CASE("a cache file that is not SQLite is reported and left untouched") {
  Dir dir;
  std::ofstream(dir.path / "c.sqlite") << "this is not a database";
  Result r = run(dir.cache() + " cache list");
  CHECK(r.code == 1);
  CHECK(r.out.find("c.sqlite") != std::string::npos);
  std::ifstream in(dir.path / "c.sqlite");
  std::string text;
  std::getline(in, text);
  CHECK(text == "this is not a database");
}

}  // namespace jitune

namespace jitune {

TEST_CASE("warmup compiles each suite case's kernel once, into a folder a runtime reads, without a GPU") {
  Dir dir;
  const std::string fresh = "--cache " + (dir.path / "none.sqlite").string();
  const std::filesystem::path into = dir.path / "kernels";
  const std::string device = device_count() > 0 ? "" : " --device-name 'NVIDIA H100 80GB HBM3'";
  Result first = run("--json " + fresh + device + " warmup --suite default --family elementwise --family permute "
                     "--into " + into.string());
  REQUIRE_MESSAGE(first.code == 0, first.out);
  const auto j = nlohmann::json::parse(first.out);
  const std::size_t kernels = j["kernels"].size();
  CHECK(kernels > 10);
  CHECK(j["compiled"] == kernels);
  CHECK(j["failed"] == 0);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(into)) files += e.is_regular_file();
  CHECK(files == kernels);
  // Each file is the binary a runtime of that architecture looks up for the decided config
  Compiler compiler;
  BinaryCache folder(into);
  for (const auto& k : j["kernels"]) {
    const Family& f = family(k["family"].get<std::string>());
    std::string signature;
    for (const auto& [name, sig] : f.default_suite())
      if (name == k["case"]) signature = sig;
    REQUIRE(!signature.empty());
    const KernelSource src = f.source(*f.parse_problem(signature), Config::parse(k["config"].get<std::string>()));
    const std::string arch = k["arch"].get<std::string>();
    CHECK(folder.get(compiler.binary_key(src.program, src.name_expression, arch)).has_value());
    // another architecture's key (or another NVRTC's: the version is in the key too) finds nothing
    CHECK_FALSE(folder.get(compiler.binary_key(src.program, src.name_expression, arch == "sm_80" ? "sm_90" : "sm_80"))
                    .has_value());
  }
  // A second run compiles nothing
  Result again = run("--json " + fresh + device + " warmup --suite default --family elementwise --family permute "
                     "--into " + into.string());
  REQUIRE_MESSAGE(again.code == 0, again.out);
  const auto k = nlohmann::json::parse(again.out);
  CHECK(k["compiled"] == 0);
  CHECK(k["cached"] == kernels);
  // Bad command lines
  CHECK(run(fresh + " warmup --family elementwise").code == 2);  // --suite is required
  Result both = run(fresh + " --device-name 'NVIDIA H100 80GB HBM3' warmup --suite default --all-devices");
  CHECK(both.code == 1);
  CHECK(both.out.find("give one") != std::string::npos);
  Result unknown = run(fresh + device + " warmup --suite default --family nosuch --into " + into.string());
  CHECK(unknown.code == 1);
  CHECK(unknown.out.find("unknown kernel family") != std::string::npos);
}

TEST_CASE("the build ships every default-suite case's kernel beside the shipped cache") {
  // What the build's `jitune warmup --suite default --all-devices` wrote (cache/CMakeLists.txt): the kernel each
  // shipped-exact case decides, under the key the runtime computes, in <shipped folder>/kernels.
  const auto shipped = builtin_shipped_caches();
  REQUIRE(!shipped.empty());
  const std::filesystem::path kernels = shipped.front().parent_path() / "kernels";
  if (!std::filesystem::is_directory(kernels)) {
    MESSAGE("built with -DJITUNE_SHIP_KERNELS=OFF: no shipped kernels to check");
    return;
  }
  Dir dir;
  Compiler compiler;
  BinaryCache folder(kernels);
  for (const std::string device : {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}) {  // both shipped sm_90 models
    Result suite = run("--json --cache " + (dir.path / "none.sqlite").string() + " --device-name '" + device +
                       "' explain --suite default");
    REQUIRE_MESSAGE(suite.code == 0, suite.out);
    std::size_t found = 0;
    const auto cases = nlohmann::json::parse(suite.out)["cases"];
    for (const auto& c : cases) {
      const Family& f = family(c["family"].get<std::string>());
      const KernelSource src = f.source(*f.parse_problem(c["signature"].get<std::string>()),
                                        Config::parse(c["config"].get<std::string>()));
      INFO(device, ": ", c["case"].get<std::string>());
      CHECK(folder.get(compiler.binary_key(src.program, src.name_expression, "sm_90")).has_value());
      ++found;
    }
    CHECK(found > 50);
  }
  // and `jitune cache paths` names the folder
  Result paths = run("--json cache paths");
  REQUIRE_MESSAGE(paths.code == 0, paths.out);
  const auto listed = nlohmann::json::parse(paths.out)["shipped_kernels"];
  REQUIRE(listed.size() == 1);
  CHECK(std::filesystem::equivalent(listed[0].get<std::string>(), kernels));
}

}  // namespace jitune
