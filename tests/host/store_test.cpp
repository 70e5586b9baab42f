// Tests of the SQLite tuning store: round trips of every field, lookups and their filters, measurements, JSON
// Lines export / import / merge (validation, line numbers, faster record wins), files the store must refuse
// and leave untouched, read-only use, and concurrent writers (threads and processes).
#include <doctest/doctest.h>

#include <grp.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iterator>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/store.hpp"

namespace fs = std::filesystem;
using namespace jitune::cache;
using jitune::InvalidArgument;
using jitune::StoreError;

namespace {

// A fresh folder under the system temp folder, removed (permissions restored first) at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device random;
    path_ = fs::temp_directory_path() / ("jitune_store_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter++) + "_" + std::to_string(random()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code error;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, error);
    fs::remove_all(path_, error);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

RecordKey make_key(const std::string& signature) {
  return RecordKey{"permute", "tmpl-1", signature, "NVIDIA H100 80GB HBM3", 90, 132, "13.0"};
}

// A record with awkward values in every field, so a lossy round trip shows.
Record make_record(const std::string& signature, double time_us = 12.5) {
  Record record;
  record.key = make_key(signature);
  record.group = "f32 rank3";
  record.features = {1.0 / 3.0, 1e-300, -0.0, 123456789.123456789, 2.5e10, 0.1};
  record.config = "block=256,pack=4,unroll=2";
  record.time_us = time_us;
  record.spread = 0.0123456789012345;
  record.reps = 37;
  record.default_time_us = 19.0 / 7.0;
  record.default_config = "block=128,pack=1,unroll=1";
  record.jitune_version = "0.1.0";
  record.driver_version = 12080;
  record.created_at = "2026-11-21T19:40:00Z";
  return record;
}

Measurement make_measurement(const RecordKey& key, const std::string& config, const std::string& status,
                             double time_us) {
  Measurement measurement;
  measurement.key = key;
  measurement.config = config;
  measurement.status = status;
  measurement.reason = status == "ok" ? "" : "log: error at line 3\n\"quoted\"";
  measurement.time_us = time_us;
  measurement.spread = 0.03;
  measurement.reps = status == "ok" ? 21 : 0;
  measurement.created_at = "2026-11-21T19:41:00Z";
  return measurement;
}

void check_same(const Record& actual, const Record& expected) {
  CHECK(actual.key == expected.key);
  CHECK(actual.group == expected.group);
  REQUIRE(actual.features.size() == expected.features.size());
  for (std::size_t i = 0; i < expected.features.size(); ++i) {
    CHECK(actual.features[i] == expected.features[i]);  // exact: no precision lost
    CHECK(std::signbit(actual.features[i]) == std::signbit(expected.features[i]));
  }
  CHECK(actual.config == expected.config);
  CHECK(actual.time_us == expected.time_us);
  CHECK(actual.spread == expected.spread);
  CHECK(actual.reps == expected.reps);
  CHECK(actual.default_time_us == expected.default_time_us);
  CHECK(actual.default_config == expected.default_config);
  CHECK(actual.jitune_version == expected.jitune_version);
  CHECK(actual.driver_version == expected.driver_version);
  CHECK(actual.created_at == expected.created_at);
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs raw SQL on a database file (to craft files the store must refuse).
void run_sql(const fs::path& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  const std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  REQUIRE_MESSAGE(rc == SQLITE_OK, message);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const StoreError& error) {
    return error.what();
  }
  return "(no StoreError thrown)";
}

// Runs `body` in a child process and returns its exit code. With `as_nobody` and root privileges the child
// first becomes user nobody, so file permissions apply to it; 77 means that was not possible.
int run_in_child(bool as_nobody, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 1;
    try {
      if (as_nobody && ::geteuid() == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
      }
      code = body();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), error.what());
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("utc_now is ISO 8601 UTC with Z and close to the system clock") {
  const std::string now = utc_now();
  REQUIRE(std::regex_match(now, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  std::tm parsed{};
  std::istringstream in(now);
  in >> std::get_time(&parsed, "%Y-%m-%dT%H:%M:%SZ");
  REQUIRE(!in.fail());
  const std::time_t seconds = ::timegm(&parsed);
  CHECK(std::llabs(static_cast<long long>(seconds - std::time(nullptr))) <= 5);
}

TEST_CASE("put then find_exact returns every field unchanged, and the same key is replaced") {
  TempDir dir;
  const fs::path db = dir / "nested/folders/tuning.db";  // the folders do not exist yet
  const Record record = make_record("f32[64,128,3] perm=2,0,1");
  {
    Store store(db, OpenMode::kReadWrite);
    CHECK(store.path() == db);
    CHECK_FALSE(store.read_only());
    store.put(record);
    const auto found = store.find_exact(record.key.family, record.key.template_hash, record.key.signature,
                                        record.key.device_name, record.key.cc, record.key.sm_count,
                                        record.key.nvrtc_version);
    REQUIRE(found.has_value());
    check_same(*found, record);
  }
  CHECK(Store::schema_version() == 1);
  Store reopened(db, OpenMode::kReadWrite);  // persisted on disk
  REQUIRE(reopened.records().size() == 1);
  check_same(reopened.records()[0], record);

  Record faster = record;
  faster.config = "block=512,pack=4,unroll=4";
  faster.time_us = 9.75;
  reopened.put(faster);
  const auto all = reopened.records();
  REQUIRE(all.size() == 1);
  check_same(all[0], faster);
}

TEST_CASE("put refuses numbers the store cannot keep") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  Record record = make_record("a");
  record.features[2] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(store.put(record), InvalidArgument);
  record = make_record("a");
  record.time_us = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(store.put(record), InvalidArgument);
  Measurement measurement = make_measurement(record.key, "block=1", "ok", 1.0);
  measurement.time_us = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(store.put(measurement), InvalidArgument);
  CHECK(store.records().empty());
  CHECK(store.measurements(record.key).empty());
}

TEST_CASE("find_exact prefers the requested NVRTC version, then the newest record") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  auto put = [&](const std::string& nvrtc, const std::string& created_at, const std::string& config) {
    Record record = make_record("sig");
    record.key.nvrtc_version = nvrtc;
    record.created_at = created_at;
    record.config = config;
    store.put(record);
  };
  put("12.4", "2026-01-02T00:00:00Z", "newest");
  put("13.0", "2026-01-01T00:00:00Z", "middle");
  put("12.8", "2025-06-01T00:00:00Z", "oldest");
  const RecordKey key = make_key("sig");
  auto config_for = [&](const std::string& nvrtc) {
    const auto found = store.find_exact(key.family, key.template_hash, key.signature, key.device_name, key.cc,
                                        key.sm_count, nvrtc);
    return found ? found->config + "@" + found->key.nvrtc_version : std::string("none");
  };
  CHECK(config_for("13.0") == "middle@13.0");
  CHECK(config_for("12.8") == "oldest@12.8");
  CHECK(config_for("12.4") == "newest@12.4");
  CHECK(config_for("11.0") == "newest@12.4");  // not present: newest wins

  CHECK_FALSE(
      store.find_exact(key.family, "tmpl-2", key.signature, key.device_name, key.cc, key.sm_count, "13.0"));
  CHECK_FALSE(store.find_exact(key.family, key.template_hash, "other", key.device_name, key.cc, key.sm_count,
                               "13.0"));
  CHECK_FALSE(store.find_exact(key.family, key.template_hash, key.signature, "NVIDIA H200", key.cc,
                               key.sm_count, "13.0"));
  CHECK_FALSE(store.find_exact(key.family, key.template_hash, key.signature, key.device_name, 89,
                               key.sm_count, "13.0"));
  CHECK_FALSE(
      store.find_exact(key.family, key.template_hash, key.signature, key.device_name, key.cc, 114, "13.0"));
  CHECK_FALSE(store.find_exact("conv2d", key.template_hash, key.signature, key.device_name, key.cc,
                               key.sm_count, "13.0"));
}

TEST_CASE("find_group and find_same_arch filter by family, template hash, group, device and cc") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  auto put = [&](const std::string& signature, auto&& change) {
    Record record = make_record(signature);
    record.group = "g1";
    change(record);
    store.put(record);
  };
  auto same = [](Record&) {};
  put("s1", same);
  put("s2", same);
  put("s3", [](Record& r) { r.group = "g2"; });
  put("s1", [](Record& r) { r.key.device_name = "NVIDIA H200"; });
  put("s1", [](Record& r) {
    r.key.device_name = "NVIDIA H100 PCIe";
    r.key.sm_count = 114;
  });
  put("s1", [](Record& r) {
    r.key.device_name = "NVIDIA A100";
    r.key.cc = 80;
    r.key.sm_count = 108;
  });
  put("s4", [](Record& r) { r.key.template_hash = "tmpl-0"; });  // stale: tuned with an older template
  put("s1", [](Record& r) { r.key.family = "conv2d"; });

  auto signatures = [](const std::vector<Record>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(r.key.signature + "@" + r.key.device_name);
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  CHECK(signatures(store.find_group("permute", "tmpl-1", "g1", h100, 90, 132)) ==
        std::vector<std::string>{"s1@" + h100, "s2@" + h100});
  CHECK(signatures(store.find_group("permute", "tmpl-1", "g2", h100, 90, 132)) ==
        std::vector<std::string>{"s3@" + h100});
  CHECK(signatures(store.find_group("permute", "tmpl-0", "g1", h100, 90, 132)) ==
        std::vector<std::string>{"s4@" + h100});
  CHECK(store.find_group("permute", "tmpl-9", "g1", h100, 90, 132).empty());
  CHECK(store.find_group("permute", "tmpl-1", "g1", h100, 90, 114).empty());
  CHECK(store.find_group("permute", "tmpl-1", "g1", h100, 80, 132).empty());

  CHECK(signatures(store.find_same_arch("permute", "tmpl-1", "g1", 90, h100)) ==
        std::vector<std::string>{"s1@NVIDIA H100 PCIe", "s1@NVIDIA H200"});
  CHECK(signatures(store.find_same_arch("permute", "tmpl-1", "g1", 80, h100)) ==
        std::vector<std::string>{"s1@NVIDIA A100"});
  CHECK(store.find_same_arch("permute", "tmpl-9", "g1", 90, h100).empty());

  // A record whose template hash no longer matches must never come back.
  const RecordKey stale = make_key("s4");
  CHECK_FALSE(store.find_exact("permute", "tmpl-1", "s4", stale.device_name, 90, 132, "13.0"));
  CHECK(store.find_group("permute", "tmpl-1", "g1", h100, 90, 132).size() == 2);
}

TEST_CASE("records() order and erase") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  for (const char* family : {"permute", "conv2d", "elementwise"}) {
    for (const char* signature : {"b", "a", "c"}) {
      for (int sm_count : {132, 114}) {
        Record record = make_record(signature);
        record.key.family = family;
        record.key.sm_count = sm_count;
        store.put(record);
      }
    }
  }
  const auto all = store.records();
  REQUIRE(all.size() == 18);
  auto order = [](const Record& r) {
    return std::tie(r.key.family, r.key.signature, r.key.device_name, r.key.cc, r.key.sm_count,
                    r.key.nvrtc_version, r.key.template_hash);
  };
  CHECK(std::is_sorted(all.begin(), all.end(),
                       [&](const Record& a, const Record& b) { return order(a) < order(b); }));
  CHECK(all.front().key.family == "conv2d");
  CHECK(all.front().key.sm_count == 114);

  CHECK(store.erase("permute", "a") == 2);
  CHECK(store.erase("permute", "a") == 0);
  CHECK(store.records().size() == 16);
  CHECK(store.erase("permute", "") == 4);
  CHECK(store.erase("nothing", "") == 0);
  const auto left = store.records();
  CHECK(left.size() == 12);
  for (const auto& record : left) CHECK(record.key.family != "permute");
}

TEST_CASE("measurements: same config replaces, fastest ok first, keys kept apart") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  const RecordKey key = make_key("m");
  RecordKey other = key;
  other.nvrtc_version = "12.8";
  store.put(make_measurement(key, "block=64", "ok", 5.0));
  store.put(make_measurement(key, "block=128", "ok", 3.0));
  store.put(make_measurement(key, "block=1024", "compile_failed", 0.0));
  store.put(make_measurement(key, "block=32", "cut", 9.0));
  store.put(make_measurement(key, "block=256", "ok", 4.0));
  store.put(make_measurement(other, "block=64", "ok", 1.0));

  auto configs = [&] {
    std::vector<std::string> out;
    for (const auto& m : store.measurements(key)) out.push_back(m.config);
    return out;
  };
  CHECK(configs() ==
        std::vector<std::string>{"block=128", "block=256", "block=64", "block=1024", "block=32"});

  store.put(make_measurement(key, "block=64", "ok", 1.5));  // re-measured: replaces the older one
  CHECK(configs() ==
        std::vector<std::string>{"block=64", "block=128", "block=256", "block=1024", "block=32"});

  const auto all = store.measurements(key);
  REQUIRE(all.size() == 5);
  const Measurement expected = make_measurement(key, "block=1024", "compile_failed", 0.0);
  const Measurement& failed = all[3];
  CHECK(failed.key == key);
  CHECK(failed.status == "compile_failed");
  CHECK(failed.reason == expected.reason);
  CHECK(failed.time_us == 0.0);
  CHECK(failed.spread == expected.spread);
  CHECK(failed.reps == 0);
  CHECK(failed.created_at == expected.created_at);
  CHECK(all[0].time_us == 1.5);
  CHECK(all[0].reps == 21);

  const auto other_measurements = store.measurements(other);
  REQUIRE(other_measurements.size() == 1);
  CHECK(other_measurements[0].time_us == 1.0);
  CHECK(store.measurements(make_key("none")).empty());
}

TEST_CASE("to_json_line / from_json_line round trip with sorted keys and say what is wrong") {
  Record record = make_record("sig \"quoted\"\nnewline");
  record.key.device_name = "Gerät";
  const std::string line = to_json_line(record);
  CHECK(line.find('\n') == std::string::npos);
  const auto parsed = nlohmann::json::parse(line);
  CHECK(parsed.dump() == line);  // nlohmann's default object is sorted: same text means sorted keys
  std::vector<std::string> keys;
  for (const auto& item : parsed.items()) keys.push_back(item.key());
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  CHECK(keys.size() == 18);
  check_same(from_json_line(line), record);

  auto error_for = [](const std::string& text) {
    try {
      from_json_line(text);
    } catch (const InvalidArgument& error) {
      return std::string(error.what());
    }
    return std::string("(accepted)");
  };
  nlohmann::json missing = parsed;
  missing.erase("sm_count");
  CHECK(error_for(missing.dump()).find("sm_count") != std::string::npos);
  nlohmann::json wrong = parsed;
  wrong["cc"] = "ninety";
  CHECK(error_for(wrong.dump()).find("\"cc\" must be an integer") != std::string::npos);
  wrong = parsed;
  wrong["features"] = {1, "x"};
  CHECK(error_for(wrong.dump()).find("features") != std::string::npos);
  CHECK(error_for("{\"family\": ").find("not valid JSON") != std::string::npos);
  // A number no double holds is an out_of_range error of the JSON parser, not a parse_error (found by
  // fuzz_cache_import: "99999E3990[4" ended the process).
  CHECK(error_for("99999E3990[4").find("not valid JSON") != std::string::npos);
  CHECK(error_for("{\"cc\": 1e999}").find("not valid JSON") != std::string::npos);
  CHECK(error_for("[1, 2]").find("not a JSON object") != std::string::npos);
}

TEST_CASE("check_record_shape accepts the edges and names each bad field") {
  CHECK(check_record_shape(make_record("ok")) == "");
  auto problem = [](auto&& change) {
    Record record = make_record("x");
    change(record);
    return check_record_shape(record);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(problem([](Record& r) { r.key.cc = 10; }) == "");
  CHECK(problem([](Record& r) { r.key.cc = 200; }) == "");
  CHECK(problem([](Record& r) { r.key.sm_count = 1; }) == "");
  CHECK(problem([](Record& r) { r.key.sm_count = 10000; }) == "");
  CHECK(problem([](Record& r) { r.default_time_us = 0; }) == "");
  CHECK(problem([](Record& r) { r.spread = 0; }) == "");
  CHECK(problem([](Record& r) { r.features.clear(); }) == "");

  const std::vector<std::pair<std::string, std::function<void(Record&)>>> bad = {
      {"family", [](Record& r) { r.key.family.clear(); }},
      {"template_hash", [](Record& r) { r.key.template_hash.clear(); }},
      {"signature", [](Record& r) { r.key.signature.clear(); }},
      {"device_name", [](Record& r) { r.key.device_name.clear(); }},
      {"config", [](Record& r) { r.config.clear(); }},
      {"nvrtc_version", [](Record& r) { r.key.nvrtc_version.clear(); }},
      {"cc", [](Record& r) { r.key.cc = 9; }},
      {"cc", [](Record& r) { r.key.cc = 201; }},
      {"sm_count", [](Record& r) { r.key.sm_count = 0; }},
      {"sm_count", [](Record& r) { r.key.sm_count = 10001; }},
      {"time_us", [](Record& r) { r.time_us = 0; }},
      {"time_us", [](Record& r) { r.time_us = -1; }},
      {"time_us", [&](Record& r) { r.time_us = nan; }},
      {"time_us", [&](Record& r) { r.time_us = inf; }},
      {"default_time_us", [](Record& r) { r.default_time_us = -0.5; }},
      {"default_time_us", [&](Record& r) { r.default_time_us = nan; }},
      {"spread", [](Record& r) { r.spread = -0.1; }},
      {"spread", [&](Record& r) { r.spread = inf; }},
      {"reps", [](Record& r) { r.reps = 0; }},
      {"features", [&](Record& r) { r.features[1] = nan; }},
  };
  for (const auto& [field, change] : bad) {
    const std::string message = problem(change);
    INFO("field ", field, ": ", message);
    CHECK(message.rfind(field, 0) == 0);
  }
}

TEST_CASE("export_jsonl then import_jsonl into a fresh store gives the same records") {
  TempDir dir;
  Store original(dir / "a.db", OpenMode::kReadWrite);
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> uniform(1e-3, 1e4);
  for (int i = 0; i < 25; ++i) {
    Record record = make_record("sig" + std::to_string(i * 7 % 25), uniform(random));
    record.key.family = i % 2 == 0 ? "permute" : "elementwise";
    record.key.sm_count = 100 + i % 3;
    record.features = {uniform(random), uniform(random) * 1e-200, -uniform(random)};
    record.spread = uniform(random) / 1e4;
    original.put(record);
  }
  const fs::path out = dir / "exports/cache.jsonl";  // folder created by the export
  original.export_jsonl(out);
  original.export_jsonl(out);  // replacing an existing export works too

  const auto expected = original.records();
  const auto lines = read_lines(out);
  REQUIRE(lines.size() == expected.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    CHECK(lines[i] == to_json_line(expected[i]));  // records() order, sorted keys
    CHECK(nlohmann::json::parse(lines[i]).dump() == lines[i]);
  }
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(out.parent_path()))
    files.push_back(entry.path().filename());
  CHECK(files == std::vector<std::string>{"cache.jsonl"});  // no temporary file left behind

  Store copy(dir / "b.db", OpenMode::kReadWrite);
  const ImportReport report = copy.import_jsonl(out, nullptr);
  CHECK(report.added == expected.size());
  CHECK(report.replaced == 0);
  CHECK(report.kept == 0);
  CHECK(report.rejected == 0);
  CHECK(report.issues.empty());
  const auto imported = copy.records();
  REQUIRE(imported.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) check_same(imported[i], expected[i]);

  // Importing the same file again changes nothing: every incoming record is as fast as the stored one.
  const ImportReport again = copy.import_jsonl(out, nullptr);
  CHECK(again.added == 0);
  CHECK(again.kept == expected.size());
}

TEST_CASE("import_jsonl rejects bad lines with their line numbers and takes the good ones") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  auto line_of = [](const Record& record) { return to_json_line(record); };
  nlohmann::json missing = nlohmann::json::parse(line_of(make_record("missing")));
  missing.erase("time_us");
  Record negative = make_record("negative");
  negative.time_us = -3;
  Record refused = make_record("refused");
  refused.config = "block=7";
  nlohmann::json wrong_type = nlohmann::json::parse(line_of(make_record("wrong")));
  wrong_type["reps"] = 2.5;
  const std::string text = line_of(make_record("good1")) + "\n" +  // 1
                           "{\"family\": \"permute\", \n" +        // 2 malformed
                           missing.dump() + "\n" +                 // 3
                           line_of(negative) + "\n" +              // 4
                           line_of(refused) + "\r\n" +             // 5 validator says no (CRLF line)
                           "\n" +                                  // 6 blank: skipped
                           line_of(make_record("good2")) + "\n" +  // 7
                           wrong_type.dump() + "\n";               // 8
  const fs::path in = dir / "in.jsonl";
  write_text(in, text);
  std::vector<std::string> validated;
  const RecordValidator validate = [&](const Record& record) -> std::string {
    validated.push_back(record.key.signature);
    return record.config == "block=7" ? "config block=7 is outside the permute space" : "";
  };
  const ImportReport report = store.import_jsonl(in, validate);
  CHECK(report.added == 2);
  CHECK(report.rejected == 5);
  CHECK(report.replaced == 0);
  CHECK(report.kept == 0);
  REQUIRE(report.issues.size() == 5);
  const std::vector<std::size_t> lines = {2, 3, 4, 5, 8};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO(report.issues[i].message);
    CHECK(report.issues[i].line == lines[i]);
    CHECK(report.issues[i].message.rfind("line " + std::to_string(lines[i]) + ": ", 0) == 0);
  }
  CHECK(report.issues[0].message.find("not valid JSON") != std::string::npos);
  CHECK(report.issues[1].message.find("\"time_us\"") != std::string::npos);
  CHECK(report.issues[2].message.find("time_us must be finite and > 0") != std::string::npos);
  CHECK(report.issues[3].message.find("outside the permute space") != std::string::npos);
  CHECK(report.issues[4].message.find("\"reps\"") != std::string::npos);
  // The validator only sees records whose shape is fine.
  CHECK(validated == std::vector<std::string>{"good1", "refused", "good2"});

  const auto records = store.records();
  REQUIRE(records.size() == 2);
  check_same(records[0], make_record("good1"));
  check_same(records[1], make_record("good2"));
}

TEST_CASE("import_jsonl of a file that cannot be read writes nothing") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  store.put(make_record("kept"));
  const std::string missing = error_of([&] { store.import_jsonl(dir / "no-such.jsonl", nullptr); });
  CHECK(missing.find("no-such.jsonl") != std::string::npos);
  CHECK(missing.find("nothing was imported") != std::string::npos);
  CHECK_THROWS_AS(store.import_jsonl(dir.path(), nullptr), StoreError);  // a folder
  CHECK(store.records().size() == 1);
}

TEST_CASE("import_jsonl and merge_from keep the faster record and report replacements") {
  TempDir dir;
  const RecordValidator accept_all = [](const Record&) { return std::string(); };
  auto with = [](const std::string& signature, double time_us, const std::string& config) {
    Record record = make_record(signature, time_us);
    record.config = config;
    return record;
  };
  auto config_of = [](const Store& store, const std::string& signature) {
    const RecordKey key = make_key(signature);
    const auto found = store.find_exact(key.family, key.template_hash, key.signature, key.device_name, key.cc,
                                        key.sm_count, key.nvrtc_version);
    return found ? found->config + " " + std::to_string(found->time_us) : std::string("none");
  };

  SUBCASE("import_jsonl") {
    Store store(dir / "s.db", OpenMode::kReadWrite);
    store.put(with("slow", 12.3, "block=128"));
    store.put(with("fast", 5.0, "block=64"));
    const fs::path in = dir / "in.jsonl";
    write_text(in, to_json_line(with("new", 7.0, "block=32")) + "\n" +
                       to_json_line(with("slow", 10.1, "block=256")) + "\n" +
                       to_json_line(with("fast", 6.0, "block=512")) + "\n");
    const ImportReport report = store.import_jsonl(in, accept_all);
    CHECK(report.added == 1);
    CHECK(report.replaced == 1);
    CHECK(report.kept == 1);
    CHECK(report.rejected == 0);
    REQUIRE(report.issues.size() == 1);
    CHECK(report.issues[0].line == 2);
    INFO(report.issues[0].message);
    CHECK(report.issues[0].message.find("replaced permute [slow]") != std::string::npos);
    CHECK(report.issues[0].message.find("12.3 us -> 10.1 us") != std::string::npos);
    CHECK(config_of(store, "slow") == "block=256 " + std::to_string(10.1));
    CHECK(config_of(store, "fast") == "block=64 " + std::to_string(5.0));
    CHECK(config_of(store, "new") == "block=32 " + std::to_string(7.0));
  }
  SUBCASE("merge_from") {
    Store store(dir / "s.db", OpenMode::kReadWrite);
    store.put(with("slow", 12.3, "block=128"));
    store.put(with("fast", 5.0, "block=64"));
    Store other(dir / "other.db", OpenMode::kReadWrite);
    other.put(with("slow", 10.1, "block=256"));
    other.put(with("fast", 6.0, "block=512"));
    other.put(with("new", 7.0, "block=32"));
    other.put(with("refused", 1.0, "block=7"));
    Store other_read_only(dir / "other.db", OpenMode::kReadOnly);
    const ImportReport report = store.merge_from(other_read_only, [](const Record& record) {
      return record.config == "block=7" ? std::string("config outside the space") : std::string();
    });
    CHECK(report.added == 1);
    CHECK(report.replaced == 1);
    CHECK(report.kept == 1);
    CHECK(report.rejected == 1);
    REQUIRE(report.issues.size() == 2);
    std::string all_messages;
    for (const auto& issue : report.issues) {
      CHECK(issue.line == 0);
      all_messages += issue.message + "\n";
    }
    INFO(all_messages);
    CHECK(all_messages.find("12.3 us -> 10.1 us") != std::string::npos);
    CHECK(all_messages.find("config outside the space") != std::string::npos);
    CHECK(config_of(store, "slow") == "block=256 " + std::to_string(10.1));
    CHECK(config_of(store, "fast") == "block=64 " + std::to_string(5.0));
    CHECK(config_of(store, "refused") == "none");
    CHECK(store.records().size() == 3);

    const ImportReport self =
        store.merge_from(store, nullptr);  // merging a store into itself changes nothing
    CHECK(self.kept == 3);
    CHECK(self.added + self.replaced + self.rejected == 0);
  }
}

TEST_CASE("a store written by a newer jitune is refused and left byte for byte unchanged") {
  TempDir dir;
  const fs::path db = dir / "s.db";
  { Store(db, OpenMode::kReadWrite).put(make_record("a")); }
  run_sql(db, "UPDATE schema_version SET version = 99");
  const std::string before = read_bytes(db);
  REQUIRE(!before.empty());
  for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
    const std::string message = error_of([&] { Store store(db, mode); });
    INFO(message);
    CHECK(message.find("newer jitune (schema 99 > 1") != std::string::npos);
    CHECK(message.find("upgrade jitune or point JITUNE_CACHE_DIR elsewhere") != std::string::npos);
    CHECK(message.find(db.string()) != std::string::npos);
  }
  CHECK(read_bytes(db) == before);
}

TEST_CASE("a file that is not SQLite is refused and left untouched") {
  TempDir dir;
  const fs::path db = dir / "tuning.db";
  std::mt19937 random(7);
  std::string text;
  for (int i = 0; i < 5000; ++i) text += static_cast<char>(' ' + random() % 94);
  write_text(db, text);
  for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
    const std::string message = error_of([&] { Store store(db, mode); });
    INFO(message);
    CHECK(message.find(db.string()) != std::string::npos);
    CHECK(message.find("left untouched") != std::string::npos);
  }
  CHECK(read_bytes(db) == text);
  CHECK_FALSE(fs::exists(dir / "tuning.db-wal"));
}

TEST_CASE("an SQLite database of something else is refused and left untouched") {
  TempDir dir;
  const fs::path db = dir / "other.db";
  run_sql(db, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')");
  const std::string before = read_bytes(db);
  for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
    const std::string message = error_of([&] { Store store(db, mode); });
    INFO(message);
    CHECK(message.find("not a jitune tuning store") != std::string::npos);
  }
  CHECK(read_bytes(db) == before);
}

TEST_CASE("read-only stores read, refuse every write, and never create files") {
  TempDir dir;
  const fs::path db = dir / "s.db";
  {
    Store writer(db, OpenMode::kReadWrite);
    writer.put(make_record("a"));
    writer.put(make_measurement(make_key("a"), "block=64", "ok", 2.0));
  }
  const fs::path jsonl = dir / "in.jsonl";
  write_text(jsonl, to_json_line(make_record("b")) + "\n");
  Store store(db, OpenMode::kReadOnly);
  CHECK(store.read_only());
  CHECK(store.records().size() == 1);
  CHECK(store.measurements(make_key("a")).size() == 1);
  Store source(dir / "source.db", OpenMode::kReadWrite);
  source.put(make_record("c"));
  const std::vector<std::function<void()>> writes = {
      [&] { store.put(make_record("b")); },
      [&] { store.put(make_measurement(make_key("b"), "block=1", "ok", 1.0)); },
      [&] { store.erase("permute", ""); },
      [&] { store.import_jsonl(jsonl, nullptr); },
      [&] { store.merge_from(source, nullptr); },
  };
  for (const auto& write : writes) CHECK(error_of(write).find("read-only") != std::string::npos);
  CHECK(Store(db, OpenMode::kReadWrite).records().size() == 1);
  CHECK(store.measurements(make_key("b")).empty());

  // Export only reads, so it works read-only.
  store.export_jsonl(dir / "out.jsonl");
  CHECK(read_lines(dir / "out.jsonl").size() == 1);

  const fs::path missing = dir / "missing.db";
  CHECK(error_of([&] { Store s(missing, OpenMode::kReadOnly); }).find("does not exist") != std::string::npos);
  CHECK_FALSE(fs::exists(missing));
}

TEST_CASE("a read-only open of an empty database reads as empty until the schema appears") {
  TempDir dir;
  const fs::path db = dir / "s.db";
  write_text(db, "");  // a zero-length file is an empty SQLite database
  Store reader(db, OpenMode::kReadOnly);
  CHECK(reader.records().empty());
  CHECK_FALSE(reader.find_exact("permute", "tmpl-1", "a", "NVIDIA H100 80GB HBM3", 90, 132, "13.0"));
  CHECK(reader.find_group("permute", "tmpl-1", "g", "NVIDIA H100 80GB HBM3", 90, 132).empty());
  CHECK(reader.measurements(make_key("a")).empty());
  {
    Store writer(db, OpenMode::kReadWrite);
    writer.put(make_record("a"));
  }
  CHECK(reader.records().size() == 1);
}

TEST_CASE("read-only open of a chmod 0444 file, and of a folder that cannot be written") {
  TempDir dir;
  const fs::path db = dir / "s.db";
  {
    Store writer(db, OpenMode::kReadWrite);
    for (int i = 0; i < 3; ++i) writer.put(make_record("r" + std::to_string(i)));
  }
  REQUIRE_FALSE(fs::exists(dir / "s.db-wal"));  // the last connection checkpointed and removed it
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  {
    Store reader(db, OpenMode::kReadOnly);
    CHECK(reader.records().size() == 3);
  }
  // A read-only connection may leave empty -wal / -shm files; a shipped cache file comes without them.
  if (fs::exists(dir / "s.db-wal")) REQUIRE(fs::file_size(dir / "s.db-wal") == 0);
  fs::remove(dir / "s.db-wal");
  fs::remove(dir / "s.db-shm");
  // The next checks need file permissions to apply: as root they run in a child that becomes user nobody.
  const bool root = ::geteuid() == 0;
  auto read_only_checks = [&] {
    try {
      Store writable(db, OpenMode::kReadWrite);
      return 2;  // a read-write open of a file we cannot write must fail
    } catch (const StoreError&) {
    }
    Store reader(db, OpenMode::kReadOnly);
    return reader.records().size() == 3 ? 0 : 3;
  };
  int code = run_in_child(true, read_only_checks);
  if (code == 77) {
    MESSAGE("running as root and cannot become nobody: skipping the permission-dependent checks");
  } else {
    CHECK(code == 0);
    // A folder nobody may write (a shipped cache under /usr/share): SQLite cannot create the -shm file there.
    fs::permissions(dir.path(), fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                    fs::perm_options::remove);
    code = run_in_child(true, read_only_checks);
    fs::permissions(dir.path(), fs::perms::owner_write, fs::perm_options::add);
    CHECK(code == 0);
  }
  if (root) MESSAGE("running as root: the permission checks ran as user nobody in a child process");
}

TEST_CASE("threads share one store") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 50; ++i) {
          const std::string signature = "t" + std::to_string(t) + "_" + std::to_string(i);
          store.put(make_record(signature));
          store.put(make_measurement(make_key(signature), "block=64", "ok", 1.0 + i));
          const RecordKey key = make_key(signature);
          if (!store.find_exact(key.family, key.template_hash, key.signature, key.device_name, key.cc,
                                key.sm_count, key.nvrtc_version)) {
            ++failures;
          }
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(store.records().size() == 200);
}

TEST_CASE("4 writer processes on one file: no 'database is locked', every record kept") {
  TempDir dir;
  const fs::path db = dir / "shared/tuning.db";  // created by the children, racing each other
  constexpr int kChildren = 4;
  constexpr int kEach = 100;
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(gate[1]);
      char byte;
      while (::read(gate[0], &byte, 1) > 0) {
      }  // start together: wait until the parent closes the pipe
      try {
        Store store(db, OpenMode::kReadWrite);
        for (int i = 0; i < kEach; ++i) {
          const std::string signature = "child" + std::to_string(c) + "_" + std::to_string(i);
          store.put(make_record(signature, 1.0 + i));
          store.put(
              make_measurement(make_key(signature), "block=" + std::to_string(32 << (i % 4)), "ok", 2.0));
        }
      } catch (const std::exception& error) {
        std::fprintf(stderr, "writer %d: %s\n", c, error.what());
        ::_exit(1);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  for (const pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  Store store(db, OpenMode::kReadOnly);
  const auto records = store.records();
  CHECK(records.size() == kChildren * kEach);
  std::set<std::string> signatures;
  for (const auto& record : records) signatures.insert(record.key.signature);
  CHECK(signatures.size() == kChildren * kEach);
  CHECK(store.measurements(make_key("child3_99")).size() == 1);
  CHECK(store.measurements(make_key("child0_0")).size() == 1);
}
