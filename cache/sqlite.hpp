// The SQLite wrapper the store is built on: one connection with its prepared-statement cache, bound queries,
// operations retried while SQLite reports BUSY / LOCKED, BEGIN IMMEDIATE write transactions, and errors that
// say which file, what SQLite said and what to do. Internal to cache/ (sqlite3.h never reaches a public
// header).
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <jitune/error.hpp>

namespace jitune::cache::sqlite {

inline constexpr const char* kUntouched = "the file was left untouched";
inline constexpr const char* kWhatToDo = "move it away or point JITUNE_CACHE_DIR elsewhere";

// A failed SQLite call, with its result code so callers can tell "not a database" from "read-only" apart.
class SqliteError : public StoreError {
 public:
  SqliteError(const std::string& message, int code) : StoreError(message), code_(code) {}
  int primary_code() const noexcept { return code_ & 0xff; }

 private:
  int code_;
};

// Thrown for SQLITE_BUSY / SQLITE_LOCKED so Database::retry can start the whole operation again.
class Busy : public SqliteError {
 public:
  using SqliteError::SqliteError;
};

/// What to do about a failed call's result code ("check that the file ... is writable"), empty when nothing
/// useful.
std::string advice_for(int rc);
/// Throws Busy or SqliteError: "jitune store <path>: <what> failed: <SQLite's message>; <advice>".
[[noreturn]] void fail(sqlite3* db, int rc, const std::filesystem::path& path, const std::string& what);
/// Percent-encodes a path for an SQLite URI filename ("file:/a%20b/c.db").
std::string uri_path(const std::filesystem::path& path);

// One use of a prepared statement: binds, steps and reads columns; resets the statement when it goes out of
// scope so the cached statement can be used again (and holds no read lock in between).
class Query {
 public:
  Query(sqlite3* db, sqlite3_stmt* statement, const std::filesystem::path& path)
      : db_(db), statement_(statement), path_(path) {}
  ~Query() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  Query& bind(int index, std::string_view text) {
    check(sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT),
          "binding a value");
    return *this;
  }
  Query& bind(int index, int value) {
    check(sqlite3_bind_int(statement_, index, value), "binding a value");
    return *this;
  }
  Query& bind(int index, double value) {
    check(sqlite3_bind_double(statement_, index, value), "binding a value");
    return *this;
  }
  template <typename... Values>
  Query& bind_all(const Values&... values) {
    int index = 0;
    (bind(++index, values), ...);
    return *this;
  }

  /// True when a row is available, false when done.
  bool step() {
    const int rc = sqlite3_step(statement_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, rc, path_, std::string("running \"") + sqlite3_sql(statement_) + "\"");
  }
  void run() {
    while (step()) {
    }
  }

  std::string text(int column) const {
    const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(statement_, column));
    if (data == nullptr) return {};
    return std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
  }
  int integer(int column) const { return sqlite3_column_int(statement_, column); }
  double real(int column) const { return sqlite3_column_double(statement_, column); }

 private:
  void check(int rc, const char* what) const {
    if (rc != SQLITE_OK) fail(db_, rc, path_, what);
  }

  sqlite3* db_;
  sqlite3_stmt* statement_;
  const std::filesystem::path& path_;
};

/// One connection to one database file. Not thread-safe: the store serializes its use.
class Database {
 public:
  Database(std::filesystem::path path, bool read_only);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  bool read_only() const noexcept { return read_only_; }
  sqlite3* handle() const noexcept { return db_.get(); }

  /// (Re)opens the connection on `filename` (a path or a "file:" URI) with `flags`; extended result codes and
  /// the busy timeout on. Throws StoreError saying what SQLite said and what to do.
  void open(const std::string& filename, int flags);
  /// The cached prepared statement for `sql` (constant text), ready to bind.
  Query query(const char* sql);
  [[noreturn]] void fail_here(int rc, const std::string& what) const { fail(db_.get(), rc, path_, what); }
  /// Throws StoreError when the database was opened read-only; `what` says what could not be done.
  void require_writable(const std::string& what) const;

  /// Runs `operation` again while SQLite reports BUSY / LOCKED, with growing randomized sleeps, for up to
  /// kLockRetryBudget: the busy timeout alone does not cover every case (WAL recovery, lock upgrades,
  /// COMMIT).
  template <typename Operation>
  auto retry(const std::string& what, Operation&& operation) -> decltype(operation()) {
    const auto deadline = std::chrono::steady_clock::now() + kLockRetryBudget;
    auto backoff = std::chrono::microseconds(500);
    for (;;) {
      try {
        return operation();
      } catch (const Busy& busy) {
        if (std::chrono::steady_clock::now() >= deadline) throw_still_locked(what, busy);
        const auto sleep = backoff + std::chrono::microseconds(
                                         std::uniform_int_distribution<long>(0, backoff.count())(jitter_));
        std::this_thread::sleep_for(sleep);
        backoff = std::min(backoff * 2, std::chrono::microseconds(100'000));
      }
    }
  }

  /// One BEGIN IMMEDIATE transaction around `body`, retried as a whole on BUSY / LOCKED.
  template <typename Body>
  auto write(const std::string& what, Body&& body) -> decltype(body()) {
    require_writable(what);
    return retry(what, [&] {
      Transaction transaction(*this);
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        transaction.commit();
      } else {
        auto result = body();
        transaction.commit();
        return result;
      }
    });
  }

  /// Rows changed by the last statement.
  int changes() const noexcept { return sqlite3_changes(db_.get()); }

 private:
  static constexpr int kBusyTimeoutMs = 10'000;
  static constexpr auto kLockRetryBudget = std::chrono::seconds(30);

  // Rolls back in its destructor unless committed.
  class Transaction {
   public:
    explicit Transaction(Database& db);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

   private:
    Database& db_;
    bool committed_ = false;
  };

  struct Closer {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };
  struct Finalizer {
    void operator()(sqlite3_stmt* statement) const noexcept { sqlite3_finalize(statement); }
  };

  [[noreturn]] void throw_still_locked(const std::string& what, const Busy& busy) const;

  std::filesystem::path path_;
  bool read_only_;
  std::unique_ptr<sqlite3, Closer>
      db_;  // declared before `statements_` so the statements are finalized first
  std::unordered_map<const char*, std::unique_ptr<sqlite3_stmt, Finalizer>> statements_;
  std::mt19937 jitter_;
};

}  // namespace jitune::cache::sqlite
