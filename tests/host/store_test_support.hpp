// Shared helpers of the store tests (store_test.cpp, store_import_test.cpp): a temporary folder, records and
// measurements with every field set, field-by-field comparison, file and SQL helpers, and a child-process
// runner.
#pragma once

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
#include <initializer_list>
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

#include "cache/jsonl.hpp"
#include "cache/store.hpp"

namespace store_test {

namespace fs = std::filesystem;
using namespace jitune::cache;
using jitune::InvalidArgument;
using jitune::StoreError;

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

inline RecordKey make_key(const std::string& signature) {
  return RecordKey{"permute", "tmpl-1", signature, "NVIDIA H100 80GB HBM3", 90, 132, "13.0"};
}

// A record with awkward values in every field, so a lossy round trip shows.
inline Record make_record(const std::string& signature, double time_us = 12.5) {
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
  record.memory_mb = 81559;
  record.sm_clock_mhz = 1980;
  record.memory_clock_mhz = 2619;
  record.host = "node-7 \"a\"";
  record.shard = "3/8";
  return record;
}

inline Measurement make_measurement(const RecordKey& key, const std::string& config,
                                    const std::string& status, double time_us) {
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

inline void check_same(const Record& actual, const Record& expected) {
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
  CHECK(actual.memory_mb == expected.memory_mb);
  CHECK(actual.sm_clock_mhz == expected.sm_clock_mhz);
  CHECK(actual.memory_clock_mhz == expected.memory_clock_mhz);
  CHECK(actual.host == expected.host);
  CHECK(actual.shard == expected.shard);
}

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The JSON Lines file of `records`, one a line, in order.
inline std::string jsonl_of(std::initializer_list<Record> records) {
  std::string text;
  for (const Record& r : records) text += to_json_line(r) + "\n";
  return text;
}

inline std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs raw SQL on a database file (to craft files the store must refuse).
inline void run_sql(const fs::path& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  const std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  REQUIRE_MESSAGE(rc == SQLITE_OK, message);
}

inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const StoreError& error) {
    return error.what();
  }
  return "(no StoreError thrown)";
}

// Runs `body` in a child process and returns its exit code. With `as_nobody` and root privileges the child
// first becomes user nobody, so file permissions apply to it; 77 means that was not possible.
inline int run_in_child(bool as_nobody, const std::function<int()>& body) {
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

// Whether file permissions can be made to apply to a child: always for a non-root user; as root only when a
// child can become user nobody (not in some containers). Checked once, before any test runs (for doctest::skip).
inline bool permissions_can_apply() {
  if (::geteuid() != 0) return true;
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0)
    ::_exit(::setgroups(0, nullptr) == 0 && ::setgid(65534) == 0 && ::setuid(65534) == 0 ? 0 : 77);
  int status = 0;
  return ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace store_test
