// Broken user caches: each gives a clear note and the runtime carries on (read-only: use it; unreadable: leave it
// untouched and run from the shipped caches / heuristics). Nothing a user stored is ever deleted or rewritten.
#include <doctest/doctest.h>

#include <pwd.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

#include "runtime/runtime_impl.hpp"
#include "runtime/stores.hpp"
#include "templates/elementwise/elementwise.hpp"

namespace jitune {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path path = fs::temp_directory_path() / ("jitune_broken_" + std::to_string(std::random_device{}()));
  Dir() { fs::create_directories(path); }
  ~Dir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
};

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

cache::Record record(std::int64_t n) {
  const auto& fam = templates::elementwise::elementwise_family();
  auto p = fam.make_problem({{"expr", "z = x * y"}, {"dtype", "float32"}, {"n", std::to_string(n)}});
  cache::Record r;
  r.key = record_key(fam, *p, Config::parse("block=256,pack=4,unroll=2,waves=8"), nominal_device(90), "13.0");
  r.group = p->group();
  r.features = p->features();
  r.config = "block=256,pack=4,unroll=2,waves=8";
  r.time_us = 5;
  r.reps = 10;
  r.default_time_us = 6;
  r.default_config = "block=256,pack=4,unroll=1,waves=32";
  r.jitune_version = "test";
  r.created_at = cache::utc_now();
  return r;
}

bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  for (const auto& n : notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

// Runs `body` in a child process where file permissions apply: as root (which ignores them) the child first
// becomes user nobody; any other user runs it as itself. True when it returned true.
template <class F>
bool as_nobody(F&& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("nobody");
      if (!pw || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) _exit(3);
    }
    _exit(body() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("a file that is not SQLite: noted with its path, left untouched, lookups fall back") {
  Dir dir;
  const fs::path file = dir.path / "tuning.sqlite";
  std::ofstream(file) << "these are somebody's notes, not a database\n";
  const std::string before = bytes_of(file);
  std::vector<std::string> notes;
  auto store = open_user_store(file, notes);
  CHECK(store == nullptr);
  CHECK(mentions(notes, file.string()));
  CHECK(mentions(notes, "left untouched"));
  CHECK(bytes_of(file) == before);
  auto p = templates::elementwise::elementwise_family().make_problem({{"expr", "z = x"}, {"dtype", "float32"}, {"n", "10"}});
  CHECK(lookup_decision(templates::elementwise::elementwise_family(), *p, nominal_device(90), "13.0", {}).explanation.level ==
        MatchLevel::kHeuristic);
}

TEST_CASE("a truncated database is noted and never rewritten") {
  Dir dir;
  const fs::path file = dir.path / "tuning.sqlite";
  {
    cache::Store s(file, cache::OpenMode::kReadWrite);
    for (int i = 1; i <= 300; ++i) s.put(record(1000 + i));
  }
  fs::remove(dir.path / "tuning.sqlite-wal");
  fs::remove(dir.path / "tuning.sqlite-shm");
  fs::resize_file(file, fs::file_size(file) / 3);
  const std::string before = bytes_of(file);
  std::vector<std::string> notes;
  auto store = open_user_store(file, notes);
  if (store) {
    // SQLite may open a truncated file; reading what is gone must then fail cleanly, not crash.
    CHECK_THROWS_AS(store->records(), StoreError);
  } else {
    CHECK(!notes.empty());
  }
  store.reset();
  CHECK(bytes_of(file) == before);
}

TEST_CASE("a database from a newer schema is refused with what to do, unchanged") {
  Dir dir;
  const fs::path file = dir.path / "tuning.sqlite";
  { cache::Store s(file, cache::OpenMode::kReadWrite); }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "UPDATE schema_version SET version = 999", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  const std::string before = bytes_of(file);
  std::vector<std::string> notes;
  CHECK(open_user_store(file, notes) == nullptr);
  CHECK(mentions(notes, "newer"));
  CHECK(bytes_of(file) == before);
}

TEST_CASE("a read-only cache file is used read-only") {
  Dir dir;
  const fs::path file = dir.path / "tuning.sqlite";
  {
    cache::Store s(file, cache::OpenMode::kReadWrite);
    s.put(record(4242));
  }
  fs::permissions(file, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  CHECK(as_nobody([&] {
    std::vector<std::string> notes;
    auto store = open_user_store(file, notes);
    return store && store->read_only() && store->records().size() == 1 && mentions(notes, "read-only");
  }));
}

TEST_CASE("no cache file in a read-only folder: run without one, say how to fix it") {
  Dir dir;
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  CHECK(as_nobody([&] {
    std::vector<std::string> notes;
    auto store = open_user_store(dir.path / "tuning.sqlite", notes);
    return !store && mentions(notes, "JITUNE_CACHE_DIR") && !fs::exists(dir.path / "tuning.sqlite");
  }));
}

TEST_CASE("a full disk: writes fail with a clear error and what was stored stays readable") {
  Dir dir;
  const fs::path file = dir.path / "tuning.sqlite";
  {
    cache::Store s(file, cache::OpenMode::kReadWrite);
    s.put(record(1));
  }
  const pid_t pid = fork();
  if (pid == 0) {
    // The file-size limit stands in for a full disk: writes past it fail with EFBIG.
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{static_cast<rlim_t>(fs::file_size(file) + 64 * 1024), static_cast<rlim_t>(fs::file_size(file) + 64 * 1024)};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      cache::Store s(file, cache::OpenMode::kReadWrite);
      for (int i = 2; i < 100000; ++i) s.put(record(i));
      _exit(1);  // the limit was never hit
    } catch (const StoreError& e) {
      const std::string what = e.what();
      _exit(what.find(file.string()) != std::string::npos ? 0 : 2);
    } catch (...) {
      _exit(3);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  cache::Store after(file, cache::OpenMode::kReadWrite);
  auto records = after.records();
  CHECK(records.size() >= 1);
  bool first = false;
  for (const auto& r : records) first |= r.key.signature == record(1).key.signature;
  CHECK(first);
}

}  // namespace jitune

namespace jitune {
namespace {

TEST_CASE("without a home the default cache folder is this user's own, never one others can write") {
  Dir dir;
  const fs::path own = dir.path / ("jitune-" + std::to_string(::geteuid()));
  // Missing: made with mode 0700 and used.
  CHECK(private_cache_dir_under(dir.path) == own);
  struct stat st{};
  REQUIRE(::lstat(own.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(default_cache_dir_note().empty());
  // Writable by others (as a shared /tmp/jitune made by someone else would be): a private folder instead, the
  // same one for the rest of the process, and a note that says why and what to set.
  fs::permissions(own, fs::perms::all);
  const fs::path fallback = private_cache_dir_under(dir.path);
  CHECK(fallback != own);
  CHECK(fallback.parent_path() == dir.path);
  REQUIRE(::lstat(fallback.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(st.st_uid == ::geteuid());
  const std::string note = default_cache_dir_note();
  CHECK_MESSAGE(note.find("can be written by other users") != std::string::npos, note);
  CHECK_MESSAGE(note.find("JITUNE_CACHE_DIR") != std::string::npos, note);
  CHECK(private_cache_dir_under(dir.path) == fallback);
  // A symbolic link planted there is not followed either.
  fs::remove(own);
  fs::create_directory_symlink(dir.path, own);
  CHECK(private_cache_dir_under(dir.path) == fallback);
}

}  // namespace
}  // namespace jitune
