// The SQLite wrapper's out-of-line parts: error texts and advice, URI paths, opening a connection, the
// statement cache and write transactions.
#include "cache/sqlite.hpp"

#include <unistd.h>

#include <cctype>
#include <utility>

namespace jitune::cache::sqlite {
namespace {

bool is_busy(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

}  // namespace

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

Database::Database(std::filesystem::path path, bool read_only)
    : path_(std::move(path)),
      read_only_(read_only),
      jitter_(std::random_device{}() ^ static_cast<unsigned>(::getpid())) {}

void Database::open(const std::string& filename, int flags) {
  statements_.clear();
  db_.reset();
  std::error_code ec;
  if (std::filesystem::is_directory(path_, ec))  // SQLite would say "disk I/O error"
    throw StoreError("jitune store " + path_.string() + " is a folder, not a database file; give a file such as " +
                     (path_ / "tuning.sqlite").string());
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(filename.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  db_.reset(raw);
  if (rc != SQLITE_OK) {
    std::string message = "jitune store " + path_.string() +
                          ": cannot open it: " + (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
    const std::string advice = advice_for(rc);
    if (!advice.empty()) message += "; " + advice;
    throw StoreError(message);
  }
  sqlite3_extended_result_codes(db_.get(), 1);
  sqlite3_busy_timeout(db_.get(), kBusyTimeoutMs);
}

Query Database::query(const char* sql) {
  auto found = statements_.find(sql);
  if (found == statements_.end()) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v3(db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    std::unique_ptr<sqlite3_stmt, Finalizer> handle(raw);
    if (rc != SQLITE_OK) fail_here(rc, std::string("preparing \"") + sql + "\"");
    found = statements_.emplace(sql, std::move(handle)).first;
  }
  return Query(db_.get(), found->second.get(), path_);
}

void Database::require_writable(const std::string& what) const {
  if (read_only_) {
    throw StoreError("jitune store " + path_.string() + " was opened read-only; cannot " + what +
                     "; open it read-write (OpenMode::kReadWrite) to change it");
  }
}

void Database::throw_still_locked(const std::string& what, const Busy& busy) const {
  throw StoreError("jitune store " + path_.string() + " stayed locked for " +
                   std::to_string(kLockRetryBudget.count()) + " s while " + what +
                   "; another process holds it (a hung jitune process?); stop it or retry later (" +
                   busy.what() + ")");
}

Database::Transaction::Transaction(Database& db) : db_(db) {
  db_.query("BEGIN IMMEDIATE").run();
}

Database::Transaction::~Transaction() {
  if (!committed_ && sqlite3_get_autocommit(db_.handle()) == 0) {
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Database::Transaction::commit() {
  db_.query("COMMIT").run();
  committed_ = true;
}

}  // namespace jitune::cache::sqlite
