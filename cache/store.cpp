// Store implementation: one SQLite connection behind a mutex, RAII wrappers for the connection, prepared
// statements and transactions, schema creation / version checks, retried write transactions, and the JSON
// Lines export / import / merge policy (validate, then keep the faster record per key).
#include "cache/store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#ifndef JITUNE_VERSION
#define JITUNE_VERSION "0.0.0-dev"
#endif

namespace jitune::cache {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 10'000;
constexpr auto kLockRetryBudget = std::chrono::seconds(30);

constexpr const char* kUntouched = "the file was left untouched";
constexpr const char* kWhatToDo = "move it away or point JITUNE_CACHE_DIR elsewhere";

// A failed SQLite call, with its result code so callers can tell "not a database" from "read-only" apart.
class SqliteError : public StoreError {
 public:
  SqliteError(const std::string& message, int code) : StoreError(message), code_(code) {}
  int primary_code() const noexcept { return code_ & 0xff; }

 private:
  int code_;
};

// Thrown for SQLITE_BUSY / SQLITE_LOCKED so retry() can start the whole operation again.
class Busy : public SqliteError {
 public:
  using SqliteError::SqliteError;
};

bool is_busy(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

std::string advice_for(int rc) {
  switch (rc & 0xff) {
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return "check that the file and its folder exist and are writable, or point JITUNE_CACHE_DIR elsewhere";
    case SQLITE_FULL:
      return "the disk is full; free some space and retry";
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return std::string(kUntouched) + "; " + kWhatToDo;
    case SQLITE_IOERR:
      return "check the disk and the file's permissions";
    default:
      return "";
  }
}

[[noreturn]] void fail(sqlite3* db, int rc, const std::filesystem::path& path, const std::string& what) {
  std::string message = "jitune store " + path.string() + ": " + what +
                        " failed: " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) + " (" +
                        sqlite3_errstr(rc) + ")";
  const std::string advice = advice_for(rc);
  if (!advice.empty()) message += "; " + advice;
  if (is_busy(rc)) throw Busy(message, rc);
  throw SqliteError(message, rc);
}

struct DbCloser {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;

struct StatementFinalizer {
  void operator()(sqlite3_stmt* statement) const noexcept { sqlite3_finalize(statement); }
};
using StatementHandle = std::unique_ptr<sqlite3_stmt, StatementFinalizer>;

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

// ---- SQL (constant text only; every value is bound) ----

constexpr const char* kCreateSchema[] = {
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " version INTEGER NOT NULL,"
    " jitune_version TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records ("
    " family TEXT NOT NULL, template_hash TEXT NOT NULL, signature TEXT NOT NULL, device_name TEXT NOT NULL,"
    " cc INTEGER NOT NULL, sm_count INTEGER NOT NULL, nvrtc_version TEXT NOT NULL,"
    " problem_group TEXT NOT NULL, features TEXT NOT NULL, config TEXT NOT NULL, time_us REAL NOT NULL,"
    " spread REAL NOT NULL, reps INTEGER NOT NULL, default_time_us REAL NOT NULL,"
    " default_config TEXT NOT NULL,"
    " jitune_version TEXT NOT NULL, driver_version INTEGER NOT NULL, created_at TEXT NOT NULL,"
    " PRIMARY KEY (family, template_hash, signature, device_name, cc, sm_count, nvrtc_version))",
    "CREATE INDEX IF NOT EXISTS records_by_group ON records (family, template_hash, problem_group, cc)",
    "CREATE TABLE IF NOT EXISTS measurements ("
    " family TEXT NOT NULL, template_hash TEXT NOT NULL, signature TEXT NOT NULL, device_name TEXT NOT NULL,"
    " cc INTEGER NOT NULL, sm_count INTEGER NOT NULL, nvrtc_version TEXT NOT NULL, config TEXT NOT NULL,"
    " status TEXT NOT NULL, reason TEXT NOT NULL, time_us REAL NOT NULL, spread REAL NOT NULL,"
    " reps INTEGER NOT NULL, created_at TEXT NOT NULL,"
    " PRIMARY KEY (family, template_hash, signature, device_name, cc, sm_count, nvrtc_version, config))",
};

constexpr const char* kListTables = "SELECT name FROM sqlite_master WHERE type = 'table'";
constexpr const char* kReadVersion = "SELECT version, jitune_version FROM schema_version WHERE id = 1";
constexpr const char* kWriteVersion =
    "INSERT OR REPLACE INTO schema_version (id, version, jitune_version) VALUES (1, ?1, ?2)";

#define JITUNE_RECORD_COLUMNS                                                                             \
  "family, template_hash, signature, device_name, cc, sm_count, nvrtc_version, problem_group, features, " \
  "config, time_us, spread, reps, default_time_us, default_config, jitune_version, driver_version, "      \
  "created_at"
#define JITUNE_KEY_MATCH                                                                    \
  "family = ?1 AND template_hash = ?2 AND signature = ?3 AND device_name = ?4 AND cc = ?5 " \
  "AND sm_count = ?6 AND nvrtc_version = ?7"

constexpr const char* kPutRecord =
    "INSERT OR REPLACE INTO records (" JITUNE_RECORD_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)";
constexpr const char* kTimeOfKey = "SELECT time_us FROM records WHERE " JITUNE_KEY_MATCH;
constexpr const char* kFindExact =
    "SELECT " JITUNE_RECORD_COLUMNS
    " FROM records WHERE family = ?1 AND template_hash = ?2 AND signature = ?3 AND device_name = ?4"
    " AND cc = ?5 AND sm_count = ?6"
    " ORDER BY nvrtc_version = ?7 DESC, created_at DESC, nvrtc_version DESC LIMIT 1";
constexpr const char* kFindGroup =
    "SELECT " JITUNE_RECORD_COLUMNS
    " FROM records WHERE family = ?1 AND template_hash = ?2 AND problem_group = ?3 AND device_name = ?4"
    " AND cc = ?5 AND sm_count = ?6 ORDER BY signature, nvrtc_version";
constexpr const char* kFindSameArch =
    "SELECT " JITUNE_RECORD_COLUMNS
    " FROM records WHERE family = ?1 AND template_hash = ?2 AND problem_group = ?3 AND cc = ?4"
    " AND device_name <> ?5 ORDER BY device_name, sm_count, signature, nvrtc_version";
constexpr const char* kAllRecords =
    "SELECT " JITUNE_RECORD_COLUMNS
    " FROM records ORDER BY family, signature, device_name, cc, sm_count, nvrtc_version, template_hash";
constexpr const char* kErase = "DELETE FROM records WHERE family = ?1 AND (?2 = '' OR signature = ?2)";
constexpr const char* kPutMeasurement =
    "INSERT OR REPLACE INTO measurements (family, template_hash, signature, device_name, cc, sm_count,"
    " nvrtc_version, config, status, reason, time_us, spread, reps, created_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
constexpr const char* kMeasurementsOfKey =
    "SELECT config, status, reason, time_us, spread, reps, created_at FROM measurements "
    "WHERE " JITUNE_KEY_MATCH
    " ORDER BY status <> 'ok', CASE WHEN status = 'ok' THEN time_us END, status, time_us, config";

#undef JITUNE_RECORD_COLUMNS
#undef JITUNE_KEY_MATCH

void bind_key(Query& query, const RecordKey& key) {
  query.bind_all(key.family, key.template_hash, key.signature, key.device_name, key.cc, key.sm_count,
                 key.nvrtc_version);
}

std::string format_number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string describe(const RecordKey& key) {
  return key.family + " [" + key.signature + "] on " + key.device_name + " (cc " + std::to_string(key.cc) +
         ", " + std::to_string(key.sm_count) + " SMs, NVRTC " + key.nvrtc_version + ", template " +
         key.template_hash + ")";
}

std::string features_to_json(const std::vector<double>& features) {
  return Json(features).dump();
}

std::string check_finite(const Record& record) {
  if (!std::isfinite(record.time_us)) return "time_us is not finite";
  if (!std::isfinite(record.spread)) return "spread is not finite";
  if (!std::isfinite(record.default_time_us)) return "default_time_us is not finite";
  for (std::size_t i = 0; i < record.features.size(); ++i) {
    if (!std::isfinite(record.features[i])) return "features[" + std::to_string(i) + "] is not finite";
  }
  return {};
}

// Percent-encodes a path for an SQLite URI filename ("file:/a%20b/c.db").
std::string uri_path(const std::filesystem::path& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : std::filesystem::absolute(path).string()) {
    if (std::isalnum(c) != 0 || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Closes a POSIX file descriptor.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const noexcept { return fd_; }
  /// Closes now; false (errno set) when close reported an error, e.g. a delayed write failure.
  bool close() {
    const int fd = std::exchange(fd_, -1);
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// Removes a temporary file unless it was renamed into place.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::filesystem::path path) : path_(std::move(path)) {}
  ~TempFileGuard() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

// Tables found in the file and, when it is a jitune store, its schema version.
struct SchemaState {
  bool empty = true;    // no user tables at all
  bool jitune = false;  // has a schema_version row
  int version = 0;
  std::string written_by;  // jitune version that created / last migrated it
};

}  // namespace

struct Store::Impl {
  std::filesystem::path path;
  bool read_only;
  std::mutex mutex;
  DbHandle db;  // declared before `statements` so the statements are finalized first
  std::unordered_map<const char*, StatementHandle> statements;
  bool has_schema = false;
  std::mt19937 jitter{std::random_device{}() ^ static_cast<unsigned>(::getpid())};

  Impl(std::filesystem::path p, OpenMode mode) : path(std::move(p)), read_only(mode == OpenMode::kReadOnly) {}

  [[noreturn]] void fail_here(int rc, const std::string& what) const { fail(db.get(), rc, path, what); }

  Query query(const char* sql) {
    auto found = statements.find(sql);
    if (found == statements.end()) {
      sqlite3_stmt* raw = nullptr;
      const int rc = sqlite3_prepare_v3(db.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
      StatementHandle handle(raw);
      if (rc != SQLITE_OK) fail_here(rc, std::string("preparing \"") + sql + "\"");
      found = statements.emplace(sql, std::move(handle)).first;
    }
    return Query(db.get(), found->second.get(), path);
  }

  // Runs `operation` again while SQLite reports BUSY / LOCKED, with growing randomized sleeps, for up to
  // kLockRetryBudget: the busy timeout alone does not cover every case (WAL recovery, lock upgrades, COMMIT).
  template <typename Operation>
  auto retry(const std::string& what, Operation&& operation) -> decltype(operation()) {
    const auto deadline = Clock::now() + kLockRetryBudget;
    auto backoff = std::chrono::microseconds(500);
    for (;;) {
      try {
        return operation();
      } catch (const Busy& busy) {
        if (Clock::now() >= deadline) {
          throw StoreError("jitune store " + path.string() + " stayed locked for " +
                           std::to_string(kLockRetryBudget.count()) + " s while " + what +
                           "; another process holds it (a hung jitune process?); stop it or retry later (" +
                           busy.what() + ")");
        }
        const auto sleep = backoff + std::chrono::microseconds(
                                         std::uniform_int_distribution<long>(0, backoff.count())(jitter));
        std::this_thread::sleep_for(sleep);
        backoff = std::min(backoff * 2, std::chrono::microseconds(100'000));
      }
    }
  }

  void require_writable(const std::string& what) const {
    if (read_only) {
      throw StoreError("jitune store " + path.string() + " was opened read-only; cannot " + what +
                       "; open it read-write (OpenMode::kReadWrite) to change it");
    }
  }

  // One BEGIN IMMEDIATE transaction around `body`, retried as a whole on BUSY / LOCKED.
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

  // Rolls back in its destructor unless committed.
  class Transaction {
   public:
    explicit Transaction(Impl& impl) : impl_(impl) { impl_.query("BEGIN IMMEDIATE").run(); }
    ~Transaction() {
      if (!committed_ && sqlite3_get_autocommit(impl_.db.get()) == 0) {
        sqlite3_exec(impl_.db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      }
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit() {
      impl_.query("COMMIT").run();
      committed_ = true;
    }

   private:
    Impl& impl_;
    bool committed_ = false;
  };

  void open_connection(const std::string& filename, int flags) {
    statements.clear();
    db.reset();
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(filename.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
    db.reset(raw);
    if (rc != SQLITE_OK) {
      std::string message = "jitune store " + path.string() + ": cannot open it: " +
                            (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
      const std::string advice = advice_for(rc);
      if (!advice.empty()) message += "; " + advice;
      throw StoreError(message);
    }
    sqlite3_extended_result_codes(db.get(), 1);
    sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  }

  SchemaState read_schema_state() {
    SchemaState state;
    bool has_version_table = false;
    {
      Query tables = query(kListTables);
      while (tables.step()) {
        const std::string name = tables.text(0);
        if (name.rfind("sqlite_", 0) == 0) continue;
        state.empty = false;
        if (name == "schema_version") has_version_table = true;
      }
    }
    if (has_version_table) {
      Query version = query(kReadVersion);
      if (version.step()) {
        state.jitune = true;
        state.version = version.integer(0);
        state.written_by = version.text(1);
      }
    }
    return state;
  }

  // Reads the schema state, turning "not a database" into a message that says the file was not touched.
  SchemaState probe() {
    try {
      return retry("reading its schema", [&] { return read_schema_state(); });
    } catch (const SqliteError& error) {
      if (error.primary_code() == SQLITE_NOTADB || error.primary_code() == SQLITE_CORRUPT) {
        throw StoreError("jitune store " + path.string() + " is not a readable SQLite database (" +
                         sqlite3_errstr(error.primary_code()) + "); " + kUntouched + "; " + kWhatToDo);
      }
      throw;
    }
  }

  void check_understood(const SchemaState& state) const {
    if (state.jitune && state.version > kSchemaVersion) {
      throw StoreError("jitune store " + path.string() + " was written by a newer jitune (schema " +
                       std::to_string(state.version) + " > " + std::to_string(kSchemaVersion) +
                       (state.written_by.empty() ? "" : ", jitune " + state.written_by) +
                       "); upgrade jitune or point JITUNE_CACHE_DIR elsewhere; " + kUntouched);
    }
    if (state.jitune && state.version < 1) {
      throw StoreError("jitune store " + path.string() + " has an invalid schema version " +
                       std::to_string(state.version) + "; " + kUntouched + "; " + kWhatToDo);
    }
    if (!state.empty && !state.jitune) {
      throw StoreError("jitune store " + path.string() +
                       " is an SQLite database but not a jitune tuning store (no schema_version row); " +
                       kUntouched + "; " + kWhatToDo);
    }
  }

  void open_read_write() {
    std::error_code error;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
    if (error) {
      throw StoreError("jitune store " + path.string() + ": cannot create its folder " +
                       path.parent_path().string() + ": " + error.message() +
                       "; create it or point JITUNE_CACHE_DIR at a writable folder");
    }
    open_connection(path.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (sqlite3_db_readonly(db.get(), "main") == 1) {
      throw StoreError(
          "jitune store " + path.string() +
          " cannot be opened read-write (the file is not writable); fix its permissions, open it "
          "read-only, or point JITUNE_CACHE_DIR elsewhere");
    }
    const SchemaState state = probe();
    check_understood(state);
    // Only switched when needed: the switch takes an exclusive lock, and a store is opened by many processes.
    const bool wal = retry("reading its journal mode", [&] {
      Query mode = query("PRAGMA journal_mode");
      return mode.step() && mode.text(0) == "wal";
    });
    if (!wal) retry("switching it to WAL mode", [&] { query("PRAGMA journal_mode = WAL").run(); });
    query("PRAGMA synchronous = NORMAL").run();
    if (state.jitune && state.version == kSchemaVersion) {
      has_schema = true;
      return;
    }
    write("creating its schema", [&] {
      // Checked again inside the transaction: another process may have created or upgraded it meanwhile.
      const SchemaState current = read_schema_state();
      check_understood(current);
      if (current.jitune && current.version == kSchemaVersion) return;
      // Version 1 is the first schema; a later version adds its migration steps from current.version here.
      for (const char* sql : kCreateSchema) query(sql).run();
      query(kWriteVersion).bind_all(kSchemaVersion, std::string_view(JITUNE_VERSION)).run();
    });
    has_schema = true;
  }

  void open_read_only() {
    std::error_code exists_error;
    if (!std::filesystem::exists(path, exists_error)) {
      throw StoreError("jitune store " + path.string() +
                       " does not exist (opened read-only, so it is not created); check the path, or open it "
                       "read-write to create it");
    }
    open_connection(path.string(), SQLITE_OPEN_READONLY);
    SchemaState state;
    try {
      state = probe();
    } catch (const SqliteError& error) {
      // A WAL database in a folder we cannot write, without its -shm file, cannot be opened the normal way.
      // Nobody can be writing it then, so reading it as immutable is safe.
      if (error.primary_code() != SQLITE_READONLY && error.primary_code() != SQLITE_CANTOPEN) throw;
      open_connection("file:" + uri_path(path) + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      state = probe();
    }
    check_understood(state);
    has_schema = state.jitune;
  }

  // Read-only stores opened before any schema existed look again, so a store created meanwhile is seen.
  bool ready() {
    if (has_schema) return true;
    const SchemaState state = probe();
    check_understood(state);
    has_schema = state.jitune;
    return has_schema;
  }

  Record read_record(const Query& row) const {
    Record record;
    record.key.family = row.text(0);
    record.key.template_hash = row.text(1);
    record.key.signature = row.text(2);
    record.key.device_name = row.text(3);
    record.key.cc = row.integer(4);
    record.key.sm_count = row.integer(5);
    record.key.nvrtc_version = row.text(6);
    record.group = row.text(7);
    const std::string features = row.text(8);
    try {
      record.features = Json::parse(features).get<std::vector<double>>();
    } catch (const Json::exception& error) {
      throw StoreError("jitune store " + path.string() + ": the record " + describe(record.key) +
                       " has unreadable features '" + features + "' (" + error.what() +
                       "); erase it (jitune erase) and tune again");
    }
    record.config = row.text(9);
    record.time_us = row.real(10);
    record.spread = row.real(11);
    record.reps = row.integer(12);
    record.default_time_us = row.real(13);
    record.default_config = row.text(14);
    record.jitune_version = row.text(15);
    record.driver_version = row.integer(16);
    record.created_at = row.text(17);
    return record;
  }

  std::vector<Record> read_records(Query& query_rows) const {
    std::vector<Record> records;
    while (query_rows.step()) records.push_back(read_record(query_rows));
    return records;
  }

  void insert_record(const Record& record) {
    Query insert = query(kPutRecord);
    bind_key(insert, record.key);
    insert.bind(8, record.group)
        .bind(9, features_to_json(record.features))
        .bind(10, record.config)
        .bind(11, record.time_us)
        .bind(12, record.spread)
        .bind(13, record.reps)
        .bind(14, record.default_time_us)
        .bind(15, record.default_config)
        .bind(16, record.jitune_version)
        .bind(17, record.driver_version)
        .bind(18, record.created_at)
        .run();
  }

  struct Incoming {
    std::size_t line;  // 0 for merges
    Record record;
  };

  // Validates `incoming` (shape, then `validate`), then writes the accepted records in one transaction,
  // keeping the faster record per key.
  ImportReport import_records(std::vector<Incoming> incoming, ImportReport report,
                              const RecordValidator& validate, const std::string& what) {
    auto prefix = [](std::size_t line) {
      return line == 0 ? std::string() : "line " + std::to_string(line) + ": ";
    };
    std::vector<Incoming> accepted;
    for (auto& item : incoming) {
      std::string problem = check_record_shape(item.record);
      if (problem.empty() && validate) problem = validate(item.record);
      if (problem.empty()) {
        accepted.push_back(std::move(item));
        continue;
      }
      ++report.rejected;
      report.issues.push_back(
          {item.line, prefix(item.line) + "rejected " + describe(item.record.key) + ": " + problem});
    }
    std::lock_guard lock(mutex);
    ImportReport result = write(what, [&] {
      ImportReport attempt = report;
      for (const auto& item : accepted) {
        std::optional<double> existing_time;
        {
          Query existing = query(kTimeOfKey);
          bind_key(existing, item.record.key);
          if (existing.step()) existing_time = existing.real(0);
        }
        if (!existing_time) {
          ++attempt.added;
        } else if (item.record.time_us < *existing_time) {
          ++attempt.replaced;
          attempt.issues.push_back({item.line, prefix(item.line) + "replaced " + describe(item.record.key) +
                                                   ": " + format_number(*existing_time) + " us -> " +
                                                   format_number(item.record.time_us) + " us"});
        } else {
          ++attempt.kept;
          continue;
        }
        insert_record(item.record);
      }
      return attempt;
    });
    std::stable_sort(result.issues.begin(), result.issues.end(),
                     [](const ImportIssue& a, const ImportIssue& b) { return a.line < b.line; });
    return result;
  }
};

Store::Store(const std::filesystem::path& path, OpenMode mode) : impl_(std::make_unique<Impl>(path, mode)) {
  if (path.empty()) throw InvalidArgument("jitune store: the path is empty; pass the database file to open");
  if (impl_->read_only) {
    impl_->open_read_only();
  } else {
    impl_->open_read_write();
  }
}

Store::~Store() = default;

const std::filesystem::path& Store::path() const noexcept {
  return impl_->path;
}

bool Store::read_only() const noexcept {
  return impl_->read_only;
}

int Store::schema_version() noexcept {
  return kSchemaVersion;
}

void Store::put(const Record& record) {
  if (const std::string problem = check_finite(record); !problem.empty()) {
    throw InvalidArgument("jitune store " + impl_->path.string() + ": cannot store the record " +
                          describe(record.key) + ": " + problem + "; only finite numbers can be stored");
  }
  std::lock_guard lock(impl_->mutex);
  impl_->write("store a record", [&] { impl_->insert_record(record); });
}

void Store::put(const Measurement& measurement) {
  if (!std::isfinite(measurement.time_us) || !std::isfinite(measurement.spread)) {
    throw InvalidArgument("jitune store " + impl_->path.string() + ": cannot store the measurement of " +
                          measurement.config + " for " + describe(measurement.key) + ": time_us (" +
                          format_number(measurement.time_us) + ") and spread (" +
                          format_number(measurement.spread) + ") must be finite");
  }
  std::lock_guard lock(impl_->mutex);
  impl_->write("store a measurement", [&] {
    Query insert = impl_->query(kPutMeasurement);
    bind_key(insert, measurement.key);
    insert.bind(8, measurement.config)
        .bind(9, measurement.status)
        .bind(10, measurement.reason)
        .bind(11, measurement.time_us)
        .bind(12, measurement.spread)
        .bind(13, measurement.reps)
        .bind(14, measurement.created_at)
        .run();
  });
}

std::optional<Record> Store::find_exact(const std::string& family, const std::string& template_hash,
                                        const std::string& signature, const std::string& device_name, int cc,
                                        int sm_count, const std::string& nvrtc_version) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->retry("looking up a record", [&]() -> std::optional<Record> {
    if (!impl_->ready()) return std::nullopt;
    Query find = impl_->query(kFindExact);
    find.bind_all(family, template_hash, signature, device_name, cc, sm_count, nvrtc_version);
    if (!find.step()) return std::nullopt;
    return impl_->read_record(find);
  });
}

std::vector<Record> Store::find_group(const std::string& family, const std::string& template_hash,
                                      const std::string& group, const std::string& device_name, int cc,
                                      int sm_count) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->retry("looking up a problem group", [&]() -> std::vector<Record> {
    if (!impl_->ready()) return {};
    Query find = impl_->query(kFindGroup);
    find.bind_all(family, template_hash, group, device_name, cc, sm_count);
    return impl_->read_records(find);
  });
}

std::vector<Record> Store::find_same_arch(const std::string& family, const std::string& template_hash,
                                          const std::string& group, int cc,
                                          const std::string& exclude_device) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->retry("looking up records of the same architecture", [&]() -> std::vector<Record> {
    if (!impl_->ready()) return {};
    Query find = impl_->query(kFindSameArch);
    find.bind_all(family, template_hash, group, cc, exclude_device);
    return impl_->read_records(find);
  });
}

std::vector<Record> Store::records() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->retry("listing records", [&]() -> std::vector<Record> {
    if (!impl_->ready()) return {};
    Query all = impl_->query(kAllRecords);
    return impl_->read_records(all);
  });
}

std::vector<Measurement> Store::measurements(const RecordKey& key) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->retry("listing measurements", [&]() -> std::vector<Measurement> {
    if (!impl_->ready()) return {};
    Query find = impl_->query(kMeasurementsOfKey);
    bind_key(find, key);
    std::vector<Measurement> measurements;
    while (find.step()) {
      Measurement measurement;
      measurement.key = key;
      measurement.config = find.text(0);
      measurement.status = find.text(1);
      measurement.reason = find.text(2);
      measurement.time_us = find.real(3);
      measurement.spread = find.real(4);
      measurement.reps = find.integer(5);
      measurement.created_at = find.text(6);
      measurements.push_back(std::move(measurement));
    }
    return measurements;
  });
}

std::size_t Store::erase(const std::string& family, const std::string& signature) {
  std::lock_guard lock(impl_->mutex);
  return impl_->write("erase records", [&] {
    impl_->query(kErase).bind_all(family, signature).run();
    return static_cast<std::size_t>(sqlite3_changes(impl_->db.get()));
  });
}

void Store::export_jsonl(const std::filesystem::path& out) const {
  std::string text;
  for (const Record& record : records()) text += to_json_line(record) + '\n';

  auto fail_export = [&](const char* what) {
    const int code = errno;  // saved before the message's allocations can change it
    throw StoreError("jitune export to " + out.string() + ": " + what + ": " + std::strerror(code) +
                     "; check that the folder exists and is writable and the disk has space");
  };
  const std::filesystem::path folder = out.has_parent_path() ? out.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    throw StoreError("jitune export to " + out.string() + ": cannot create the folder " + folder.string() +
                     ": " + error.message());
  }
  // Written next to the target and renamed over it, so readers never see a half-written file.
  std::random_device random;
  const std::filesystem::path temp = folder / ("." + out.filename().string() + ".tmp." +
                                               std::to_string(::getpid()) + "." + std::to_string(random()));
  FileDescriptor file(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (file.get() < 0) fail_export("cannot create the temporary file");
  TempFileGuard guard(temp);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(file.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_export("cannot write the temporary file");
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(file.get()) != 0) fail_export("cannot flush the temporary file");
  if (!file.close()) fail_export("cannot close the temporary file");
  if (::rename(temp.c_str(), out.c_str()) != 0) fail_export("cannot rename the temporary file over it");
  guard.release();
}

ImportReport Store::import_jsonl(const std::filesystem::path& in, const RecordValidator& validate) {
  impl_->require_writable("import " + in.string());
  std::error_code error;
  if (std::filesystem::is_directory(in, error)) {
    throw StoreError("jitune import of " + in.string() +
                     ": it is a folder, not a JSON Lines file; nothing was "
                     "imported");
  }
  std::ifstream file(in, std::ios::binary);
  if (!file) {
    const int code = errno;
    throw StoreError("jitune import of " + in.string() + ": cannot open it: " + std::strerror(code) +
                     "; check the path and permissions; nothing was imported");
  }
  std::vector<Impl::Incoming> incoming;
  ImportReport report;
  std::string line;
  std::size_t number = 0;
  while (std::getline(file, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      incoming.push_back({number, from_json_line(line)});
    } catch (const InvalidArgument& bad) {
      ++report.rejected;
      report.issues.push_back({number, "line " + std::to_string(number) + ": rejected: " + bad.what()});
    }
  }
  if (file.bad()) {
    const int code = errno;
    throw StoreError("jitune import of " + in.string() + ": reading failed after line " +
                     std::to_string(number) + ": " + std::strerror(code) + "; nothing was imported");
  }
  return impl_->import_records(std::move(incoming), std::move(report), validate, "import " + in.string());
}

ImportReport Store::merge_from(const Store& other, const RecordValidator& validate) {
  impl_->require_writable("merge " + other.path().string() + " into it");
  std::vector<Impl::Incoming> incoming;
  for (Record& record : other.records()) incoming.push_back({0, std::move(record)});
  return impl_->import_records(std::move(incoming), ImportReport{}, validate,
                               "merge " + other.path().string());
}

std::string to_json_line(const Record& record) {
  const Json object = {
      {"family", record.key.family},
      {"template_hash", record.key.template_hash},
      {"signature", record.key.signature},
      {"device_name", record.key.device_name},
      {"cc", record.key.cc},
      {"sm_count", record.key.sm_count},
      {"nvrtc_version", record.key.nvrtc_version},
      {"group", record.group},
      {"features", record.features},
      {"config", record.config},
      {"time_us", record.time_us},
      {"spread", record.spread},
      {"reps", record.reps},
      {"default_time_us", record.default_time_us},
      {"default_config", record.default_config},
      {"jitune_version", record.jitune_version},
      {"driver_version", record.driver_version},
      {"created_at", record.created_at},
  };
  try {
    return object.dump();
  } catch (const Json::exception& error) {
    throw InvalidArgument("cannot write the record " + describe(record.key) + " as JSON: " + error.what() +
                          " (its text fields must be valid UTF-8)");
  }
}

namespace {

const Json& field(const Json& object, const char* name) {
  const auto found = object.find(name);
  if (found == object.end()) throw InvalidArgument(std::string("missing field \"") + name + "\"");
  return *found;
}

[[noreturn]] void wrong_type(const char* name, const char* expected, const Json& value) {
  throw InvalidArgument(std::string("field \"") + name + "\" must be " + expected + " (got " + value.dump() +
                        ")");
}

std::string string_field(const Json& object, const char* name) {
  const Json& value = field(object, name);
  if (!value.is_string()) wrong_type(name, "a string", value);
  return value.get<std::string>();
}

int int_field(const Json& object, const char* name) {
  const Json& value = field(object, name);
  if (!value.is_number_integer()) wrong_type(name, "an integer", value);
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT32_MAX)) {
    wrong_type(name, "a 32-bit integer", value);
  }
  const auto number = value.get<std::int64_t>();
  if (number < INT32_MIN || number > INT32_MAX) wrong_type(name, "a 32-bit integer", value);
  return static_cast<int>(number);
}

double double_field(const Json& object, const char* name) {
  const Json& value = field(object, name);
  if (!value.is_number()) wrong_type(name, "a number", value);
  return value.get<double>();
}

}  // namespace

Record from_json_line(const std::string& line) {
  Json object;
  try {
    object = Json::parse(line);
  } catch (const Json::exception& error) {  // a syntax error, or a number too large for a double (1e999)
    throw InvalidArgument(std::string("not valid JSON: ") + error.what());
  }
  if (!object.is_object()) throw InvalidArgument("not a JSON object (got " + object.dump() + ")");
  Record record;
  record.key.family = string_field(object, "family");
  record.key.template_hash = string_field(object, "template_hash");
  record.key.signature = string_field(object, "signature");
  record.key.device_name = string_field(object, "device_name");
  record.key.cc = int_field(object, "cc");
  record.key.sm_count = int_field(object, "sm_count");
  record.key.nvrtc_version = string_field(object, "nvrtc_version");
  record.group = string_field(object, "group");
  const Json& features = field(object, "features");
  if (!features.is_array()) wrong_type("features", "an array of numbers", features);
  for (const Json& value : features) {
    if (!value.is_number()) wrong_type("features", "an array of numbers", features);
    record.features.push_back(value.get<double>());
  }
  record.config = string_field(object, "config");
  record.time_us = double_field(object, "time_us");
  record.spread = double_field(object, "spread");
  record.reps = int_field(object, "reps");
  record.default_time_us = double_field(object, "default_time_us");
  record.default_config = string_field(object, "default_config");
  record.jitune_version = string_field(object, "jitune_version");
  record.driver_version = int_field(object, "driver_version");
  record.created_at = string_field(object, "created_at");
  return record;
}

std::string check_record_shape(const Record& record) {
  const std::pair<const char*, const std::string*> required[] = {
      {"family", &record.key.family},       {"template_hash", &record.key.template_hash},
      {"signature", &record.key.signature}, {"device_name", &record.key.device_name},
      {"config", &record.config},           {"nvrtc_version", &record.key.nvrtc_version},
  };
  for (const auto& [name, value] : required) {
    if (value->empty()) return std::string(name) + " is empty";
  }
  if (record.key.cc < 10 || record.key.cc > 200) {
    return "cc must be in 10..200 (got " + std::to_string(record.key.cc) + ")";
  }
  if (record.key.sm_count < 1 || record.key.sm_count > 10000) {
    return "sm_count must be in 1..10000 (got " + std::to_string(record.key.sm_count) + ")";
  }
  if (!std::isfinite(record.time_us) || record.time_us <= 0) {
    return "time_us must be finite and > 0 (got " + format_number(record.time_us) + ")";
  }
  if (!std::isfinite(record.default_time_us) || record.default_time_us < 0) {
    return "default_time_us must be finite and >= 0 (got " + format_number(record.default_time_us) + ")";
  }
  if (!std::isfinite(record.spread) || record.spread < 0) {
    return "spread must be finite and >= 0 (got " + format_number(record.spread) + ")";
  }
  if (record.reps < 1) return "reps must be >= 1 (got " + std::to_string(record.reps) + ")";
  for (std::size_t i = 0; i < record.features.size(); ++i) {
    if (!std::isfinite(record.features[i])) {
      return "features[" + std::to_string(i) + "] must be finite (got " + format_number(record.features[i]) +
             ")";
    }
  }
  return {};
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

}  // namespace jitune::cache
