// Store implementation: the schema (creation, version checks), opening read-write or read-only, the records'
// and measurements' queries, and the import / merge policies (validate; new keys added, a stored record replaced
// by a faster one only when trusted, or by the majority of repeated shards when merged by vote) over the SQLite
// wrapper (cache/sqlite.hpp) and the JSON Lines format (cache/jsonl.hpp).
#include "cache/store.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "cache/jsonl.hpp"
#include "cache/sqlite.hpp"

#ifndef JITUNE_VERSION
#define JITUNE_VERSION "0.0.0-dev"
#endif

namespace jitune::cache {
namespace {

using Json = nlohmann::json;
using sqlite::Query;

// 1: the first schema. 2: records gained the tuning GPU's fingerprint (memory_mb, sm_clock_mhz, memory_clock_mhz)
// and provenance (host, shard); a version-1 store opened read-write is migrated in place (its records keep 0 and
// '' there: not recorded), one opened read-only is read as it is.
constexpr int kSchemaVersion = 2;

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
    " memory_mb INTEGER NOT NULL DEFAULT 0, sm_clock_mhz INTEGER NOT NULL DEFAULT 0,"
    " memory_clock_mhz INTEGER NOT NULL DEFAULT 0, host TEXT NOT NULL DEFAULT '', shard TEXT NOT NULL DEFAULT '',"
    " PRIMARY KEY (family, template_hash, signature, device_name, cc, sm_count, nvrtc_version))",
    "CREATE INDEX IF NOT EXISTS records_by_group ON records (family, template_hash, problem_group, cc)",
    "CREATE TABLE IF NOT EXISTS measurements ("
    " family TEXT NOT NULL, template_hash TEXT NOT NULL, signature TEXT NOT NULL, device_name TEXT NOT NULL,"
    " cc INTEGER NOT NULL, sm_count INTEGER NOT NULL, nvrtc_version TEXT NOT NULL, config TEXT NOT NULL,"
    " status TEXT NOT NULL, reason TEXT NOT NULL, time_us REAL NOT NULL, spread REAL NOT NULL,"
    " reps INTEGER NOT NULL, created_at TEXT NOT NULL,"
    " PRIMARY KEY (family, template_hash, signature, device_name, cc, sm_count, nvrtc_version, config))",
};

// Version 1 -> 2, in one transaction with the version row.
constexpr const char* kMigrateToV2[] = {
    "ALTER TABLE records ADD COLUMN memory_mb INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE records ADD COLUMN sm_clock_mhz INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE records ADD COLUMN memory_clock_mhz INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE records ADD COLUMN host TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE records ADD COLUMN shard TEXT NOT NULL DEFAULT ''",
};

// One record per device name and fingerprint, for the import's conflict check (the fingerprint columns only).
constexpr const char* kDeviceFingerprints =
    "SELECT DISTINCT device_name, cc, memory_mb, sm_clock_mhz, memory_clock_mhz FROM records";
constexpr const char* kListTables = "SELECT name FROM sqlite_master WHERE type = 'table'";
constexpr const char* kReadVersion = "SELECT version, jitune_version FROM schema_version WHERE id = 1";
constexpr const char* kWriteVersion =
    "INSERT OR REPLACE INTO schema_version (id, version, jitune_version) VALUES (1, ?1, ?2)";

#define JITUNE_RECORD_BASE_COLUMNS                                                                        \
  "family, template_hash, signature, device_name, cc, sm_count, nvrtc_version, problem_group, features, " \
  "config, time_us, spread, reps, default_time_us, default_config, jitune_version, driver_version, "      \
  "created_at"
#define JITUNE_RECORD_COLUMNS JITUNE_RECORD_BASE_COLUMNS ", memory_mb, sm_clock_mhz, memory_clock_mhz, host, shard"
// A version-1 store read as it is (read-only): the same columns, the fingerprint and provenance not recorded.
#define JITUNE_RECORD_COLUMNS_V1 JITUNE_RECORD_BASE_COLUMNS ", 0, 0, 0, '', ''"
// ?2 is a set of template hashes, ",h1,h2,": a family's kernels may live in several templates (Family::templates).
#define JITUNE_HASH_IN "instr(?2, ',' || template_hash || ',') > 0"
#define JITUNE_KEY_MATCH                                                                    \
  "family = ?1 AND template_hash = ?2 AND signature = ?3 AND device_name = ?4 AND cc = ?5 " \
  "AND sm_count = ?6 AND nvrtc_version = ?7"

constexpr const char* kPutRecord =
    "INSERT OR REPLACE INTO records (" JITUNE_RECORD_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,"
    " ?23)";
constexpr const char* kTimeOfKey = "SELECT time_us FROM records WHERE " JITUNE_KEY_MATCH;
// Each record query in two forms: [0] for the current schema, [1] for a version-1 store opened read-only.
#define JITUNE_BOTH(query) {"SELECT " JITUNE_RECORD_COLUMNS query, "SELECT " JITUNE_RECORD_COLUMNS_V1 query}
constexpr const char* kFindExact[2] = JITUNE_BOTH(
    " FROM records WHERE family = ?1 AND " JITUNE_HASH_IN " AND signature = ?3 AND device_name = ?4"
    " AND cc = ?5 AND sm_count = ?6"
    " ORDER BY nvrtc_version = ?7 DESC, created_at DESC, nvrtc_version DESC LIMIT 1");
constexpr const char* kFindGroup[2] = JITUNE_BOTH(
    " FROM records WHERE family = ?1 AND " JITUNE_HASH_IN " AND problem_group = ?3 AND device_name = ?4"
    " AND cc = ?5 AND sm_count = ?6 ORDER BY signature, nvrtc_version");
constexpr const char* kFindSameArch[2] = JITUNE_BOTH(
    " FROM records WHERE family = ?1 AND " JITUNE_HASH_IN " AND problem_group = ?3 AND cc = ?4"
    " AND device_name <> ?5 ORDER BY device_name, sm_count, signature, nvrtc_version");
constexpr const char* kAllRecords[2] = JITUNE_BOTH(
    " FROM records ORDER BY family, signature, device_name, cc, sm_count, nvrtc_version, template_hash");
#undef JITUNE_BOTH
constexpr const char* kErase = "DELETE FROM records WHERE family = ?1 AND (?2 = '' OR signature = ?2)";
constexpr const char* kPutMeasurement =
    "INSERT OR REPLACE INTO measurements (family, template_hash, signature, device_name, cc, sm_count,"
    " nvrtc_version, config, status, reason, time_us, spread, reps, created_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
constexpr const char* kMeasurementsOfKey =
    "SELECT config, status, reason, time_us, spread, reps, created_at, template_hash FROM measurements "
    "WHERE family = ?1 AND " JITUNE_HASH_IN " AND signature = ?3 AND device_name = ?4 AND cc = ?5 "
    "AND sm_count = ?6 AND nvrtc_version = ?7"
    " ORDER BY status <> 'ok', CASE WHEN status = 'ok' THEN time_us END, status, time_us, config";

#undef JITUNE_RECORD_COLUMNS
#undef JITUNE_RECORD_COLUMNS_V1
#undef JITUNE_RECORD_BASE_COLUMNS
#undef JITUNE_KEY_MATCH
#undef JITUNE_HASH_IN

// The hashes as one text for JITUNE_HASH_IN: ",h1,h2,". A template hash is hex digits; a text with a comma in it is
// not one and is left out (it would match a pair of others).
std::string hash_set(const std::vector<std::string>& hashes) {
  std::string out = ",";
  for (const std::string& h : hashes)
    if (!h.empty() && h.find(',') == std::string::npos) out += h + ",";
  return out;
}

void bind_key(Query& query, const RecordKey& key) {
  query.bind_all(key.family, key.template_hash, key.signature, key.device_name, key.cc, key.sm_count,
                 key.nvrtc_version);
}

std::string features_to_json(const std::vector<double>& features) {
  return Json(features).dump();
}

// Tables found in the file and, when it is a jitune store, its schema version.
struct SchemaState {
  bool empty = true;    // no user tables at all
  bool jitune = false;  // has a schema_version row
  int version = 0;
  std::string written_by;  // jitune version that created / last migrated it
};

}  // namespace

struct Store::Impl {
  sqlite::Database db;
  std::mutex mutex;
  bool has_schema = false;
  int store_schema = kSchemaVersion;  // the open store's schema version (1: a version-1 store opened read-only)

  // Index of a record query's form for this store (kFindExact etc.).
  int form() const noexcept { return store_schema < 2 ? 1 : 0; }

  Impl(std::filesystem::path path, OpenMode mode) : db(std::move(path), mode == OpenMode::kReadOnly) {}

  SchemaState read_schema_state() {
    SchemaState state;
    bool has_version_table = false;
    {
      Query tables = db.query(kListTables);
      while (tables.step()) {
        const std::string name = tables.text(0);
        if (name.rfind("sqlite_", 0) == 0) continue;
        state.empty = false;
        if (name == "schema_version") has_version_table = true;
      }
    }
    if (has_version_table) {
      Query version = db.query(kReadVersion);
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
      return db.retry("reading its schema", [&] { return read_schema_state(); });
    } catch (const sqlite::SqliteError& error) {
      if (error.primary_code() == SQLITE_NOTADB || error.primary_code() == SQLITE_CORRUPT) {
        throw StoreError("jitune store " + db.path().string() + " is not a readable SQLite database (" +
                         sqlite3_errstr(error.primary_code()) + "); " + sqlite::kUntouched + "; " +
                         sqlite::kWhatToDo);
      }
      throw;
    }
  }

  void check_understood(const SchemaState& state) const {
    if (state.jitune && state.version > kSchemaVersion) {
      throw StoreError("jitune store " + db.path().string() + " was written by a newer jitune (schema " +
                       std::to_string(state.version) + " > " + std::to_string(kSchemaVersion) +
                       (state.written_by.empty() ? "" : ", jitune " + state.written_by) +
                       "); upgrade jitune or point JITUNE_CACHE_DIR elsewhere; " + sqlite::kUntouched);
    }
    if (state.jitune && state.version < 1) {
      throw StoreError("jitune store " + db.path().string() + " has an invalid schema version " +
                       std::to_string(state.version) + "; " + sqlite::kUntouched + "; " + sqlite::kWhatToDo);
    }
    if (!state.empty && !state.jitune) {
      throw StoreError("jitune store " + db.path().string() +
                       " is an SQLite database but not a jitune tuning store (no schema_version row); " +
                       sqlite::kUntouched + "; " + sqlite::kWhatToDo);
    }
  }

  void open_read_write() {
    std::error_code error;
    if (db.path().has_parent_path()) std::filesystem::create_directories(db.path().parent_path(), error);
    if (error) {
      throw StoreError("jitune store " + db.path().string() + ": cannot create its folder " +
                       db.path().parent_path().string() + ": " + error.message() +
                       "; create it or point JITUNE_CACHE_DIR at a writable folder");
    }
    db.open(db.path().string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (sqlite3_db_readonly(db.handle(), "main") == 1) {
      throw StoreError(
          "jitune store " + db.path().string() +
          " cannot be opened read-write (the file is not writable); fix its permissions, open it "
          "read-only, or point JITUNE_CACHE_DIR elsewhere");
    }
    const SchemaState state = probe();
    check_understood(state);
    // Only switched when needed: the switch takes an exclusive lock, and a store is opened by many processes.
    const bool wal = db.retry("reading its journal mode", [&] {
      Query mode = db.query("PRAGMA journal_mode");
      return mode.step() && mode.text(0) == "wal";
    });
    if (!wal) db.retry("switching it to WAL mode", [&] { db.query("PRAGMA journal_mode = WAL").run(); });
    db.query("PRAGMA synchronous = NORMAL").run();
    if (state.jitune && state.version == kSchemaVersion) {
      has_schema = true;
      return;
    }
    db.write("creating its schema", [&] {
      // Checked again inside the transaction: another process may have created or upgraded it meanwhile.
      const SchemaState current = read_schema_state();
      check_understood(current);
      if (current.jitune && current.version == kSchemaVersion) return;
      if (current.jitune && current.version == 1)
        for (const char* sql : kMigrateToV2) db.query(sql).run();
      for (const char* sql : kCreateSchema) db.query(sql).run();
      db.query(kWriteVersion).bind_all(kSchemaVersion, std::string_view(JITUNE_VERSION)).run();
    });
    has_schema = true;
  }

  void open_read_only() {
    std::error_code exists_error;
    if (!std::filesystem::exists(db.path(), exists_error)) {
      throw StoreError("jitune store " + db.path().string() +
                       " does not exist (opened read-only, so it is not created); check the path, or open it "
                       "read-write to create it");
    }
    db.open(db.path().string(), SQLITE_OPEN_READONLY);
    SchemaState state;
    try {
      state = probe();
    } catch (const sqlite::SqliteError& error) {
      // A WAL database in a folder we cannot write, without its -shm file, cannot be opened the normal way.
      // Nobody can be writing it then, so reading it as immutable is safe.
      if (error.primary_code() != SQLITE_READONLY && error.primary_code() != SQLITE_CANTOPEN) throw;
      db.open("file:" + sqlite::uri_path(db.path()) + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      state = probe();
    }
    check_understood(state);
    has_schema = state.jitune;
    if (state.jitune) store_schema = state.version;
  }

  // Read-only stores opened before any schema existed look again, so a store created meanwhile is seen.
  bool ready() {
    if (has_schema) return true;
    const SchemaState state = probe();
    check_understood(state);
    has_schema = state.jitune;
    if (state.jitune) store_schema = state.version;
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
      throw StoreError("jitune store " + db.path().string() + ": the record " + describe(record.key) +
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
    record.memory_mb = row.integer(18);
    record.sm_clock_mhz = row.integer(19);
    record.memory_clock_mhz = row.integer(20);
    record.host = row.text(21);
    record.shard = row.text(22);
    return record;
  }

  std::vector<Record> read_records(Query& query_rows) const {
    std::vector<Record> records;
    while (query_rows.step()) records.push_back(read_record(query_rows));
    return records;
  }

  void insert_record(const Record& record) {
    Query insert = db.query(kPutRecord);
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
        .bind(19, record.memory_mb)
        .bind(20, record.sm_clock_mhz)
        .bind(21, record.memory_clock_mhz)
        .bind(22, record.host)
        .bind(23, record.shard)
        .run();
  }

  struct Incoming {
    std::size_t line;  // 0 for merges
    Record record;
  };

  // Validates `incoming` (shape, then `validate`), then writes the accepted records in one transaction: new keys
  // added; a stored record replaced only when `trust` and the incoming one is faster.
  ImportReport import_records(std::vector<Incoming> incoming, ImportReport report,
                              const RecordValidator& validate, const std::string& what, bool trust,
                              bool replace = false) {
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
    ImportReport result = db.write(what, [&] {
      ImportReport attempt = report;
      // A device model has one fingerprint (compute capability, memory size, clocks): a record naming a device the
      // store (or an earlier record of this import) knows with another one is mislabelled, and would be served to
      // the wrong GPU's lookups.
      std::map<std::string, std::vector<Record>> known;  // device name -> its fingerprints (key.cc and the fields)
      {
        Query rows = db.query(kDeviceFingerprints);  // imports write: the store is of the current schema
        while (rows.step()) {
          Record r;
          r.key.cc = rows.integer(1);
          r.memory_mb = rows.integer(2);
          r.sm_clock_mhz = rows.integer(3);
          r.memory_clock_mhz = rows.integer(4);
          known[rows.text(0)].push_back(std::move(r));
        }
      }
      for (const auto& item : accepted) {
        const RecordKey& key = item.record.key;
        std::string conflict;
        for (const Record& seen : known[key.device_name])
          if (conflict.empty()) conflict = fingerprint_conflict(seen, item.record);
        if (!conflict.empty()) {
          ++attempt.rejected;
          attempt.issues.push_back({item.line, prefix(item.line) + "rejected " + describe(key) +
                                                   ": fingerprint conflict: '" + key.device_name + "' has " +
                                                   conflict + " (this cache or earlier in this import, then this "
                                                   "record); records of one device model must agree: fix the "
                                                   "record, or keep it in another cache"});
          continue;
        }
        auto& fingerprints = known[key.device_name];
        const auto same = [&](const Record& r) {
          return r.key.cc == key.cc && r.memory_mb == item.record.memory_mb &&
                 r.sm_clock_mhz == item.record.sm_clock_mhz && r.memory_clock_mhz == item.record.memory_clock_mhz;
        };
        if (std::none_of(fingerprints.begin(), fingerprints.end(), same)) fingerprints.push_back(item.record);
        std::optional<double> existing_time;
        {
          Query existing = db.query(kTimeOfKey);
          bind_key(existing, item.record.key);
          if (existing.step()) existing_time = existing.real(0);
        }
        const bool faster = existing_time && item.record.time_us < *existing_time;
        if (!existing_time) {
          ++attempt.added;
        } else if (replace) {  // decided before (merge_majority), whichever is faster
          ++attempt.replaced;
          attempt.issues.push_back({item.line, prefix(item.line) + "replaced " + describe(item.record.key) + ": " +
                                                   format_number(*existing_time) + " us -> " +
                                                   format_number(item.record.time_us) + " us (" +
                                                   item.record.config + ")"});
        } else if (faster && trust) {
          ++attempt.replaced;
          attempt.issues.push_back({item.line, prefix(item.line) + "replaced " + describe(item.record.key) +
                                                   ": " + format_number(*existing_time) + " us -> " +
                                                   format_number(item.record.time_us) + " us"});
        } else {
          ++attempt.kept;
          if (faster)
            attempt.issues.push_back(
                {item.line, prefix(item.line) + "kept the stored " + describe(item.record.key) + " (" +
                                format_number(*existing_time) + " us) over the incoming claim of " +
                                format_number(item.record.time_us) + " us: an import never replaces a stored " +
                                "record; pass --trust to take it, or re-time here with jitune cache revalidate"});
          continue;
        }
        insert_record(item.record);
      }
      return attempt;
    });
    // By line; issues of no line (a merge's, the summary of rejected lines past the listed ones) after them.
    std::stable_sort(result.issues.begin(), result.issues.end(), [](const ImportIssue& a, const ImportIssue& b) {
      return a.line != 0 && (b.line == 0 || a.line < b.line);
    });
    return result;
  }
};

Store::Store(const std::filesystem::path& path, OpenMode mode) : impl_(std::make_unique<Impl>(path, mode)) {
  if (path.empty()) throw InvalidArgument("jitune store: the path is empty; pass the database file to open");
  if (impl_->db.read_only()) {
    impl_->open_read_only();
  } else {
    impl_->open_read_write();
  }
}

Store::~Store() = default;

const std::filesystem::path& Store::path() const noexcept {
  return impl_->db.path();
}

bool Store::read_only() const noexcept {
  return impl_->db.read_only();
}

int Store::schema_version() noexcept {
  return kSchemaVersion;
}

void Store::put(const Record& record) {
  if (const std::string problem = check_finite(record); !problem.empty()) {
    throw InvalidArgument("jitune store " + impl_->db.path().string() + ": cannot store the record " +
                          describe(record.key) + ": " + problem + "; only finite numbers can be stored");
  }
  std::lock_guard lock(impl_->mutex);
  impl_->db.write("store a record", [&] { impl_->insert_record(record); });
}

void Store::put(const Measurement& measurement) {
  if (!std::isfinite(measurement.time_us) || !std::isfinite(measurement.spread)) {
    throw InvalidArgument("jitune store " + impl_->db.path().string() + ": cannot store the measurement of " +
                          measurement.config + " for " + describe(measurement.key) + ": time_us (" +
                          format_number(measurement.time_us) + ") and spread (" +
                          format_number(measurement.spread) + ") must be finite");
  }
  std::lock_guard lock(impl_->mutex);
  impl_->db.write("store a measurement", [&] {
    Query insert = impl_->db.query(kPutMeasurement);
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

std::optional<Record> Store::find_exact(const std::string& family, const std::vector<std::string>& template_hashes,
                                        const std::string& signature, const std::string& device_name, int cc,
                                        int sm_count, const std::string& nvrtc_version) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.retry("looking up a record", [&]() -> std::optional<Record> {
    if (!impl_->ready()) return std::nullopt;
    Query find = impl_->db.query(kFindExact[impl_->form()]);
    find.bind_all(family, hash_set(template_hashes), signature, device_name, cc, sm_count, nvrtc_version);
    if (!find.step()) return std::nullopt;
    return impl_->read_record(find);
  });
}

std::vector<Record> Store::find_group(const std::string& family, const std::vector<std::string>& template_hashes,
                                      const std::string& group, const std::string& device_name, int cc,
                                      int sm_count) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.retry("looking up a problem group", [&]() -> std::vector<Record> {
    if (!impl_->ready()) return {};
    Query find = impl_->db.query(kFindGroup[impl_->form()]);
    find.bind_all(family, hash_set(template_hashes), group, device_name, cc, sm_count);
    return impl_->read_records(find);
  });
}

std::vector<Record> Store::find_same_arch(const std::string& family,
                                          const std::vector<std::string>& template_hashes,
                                          const std::string& group, int cc,
                                          const std::string& exclude_device) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.retry("looking up records of the same architecture", [&]() -> std::vector<Record> {
    if (!impl_->ready()) return {};
    Query find = impl_->db.query(kFindSameArch[impl_->form()]);
    find.bind_all(family, hash_set(template_hashes), group, cc, exclude_device);
    return impl_->read_records(find);
  });
}

std::vector<Record> Store::records() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.retry("listing records", [&]() -> std::vector<Record> {
    if (!impl_->ready()) return {};
    Query all = impl_->db.query(kAllRecords[impl_->form()]);
    return impl_->read_records(all);
  });
}

std::vector<Measurement> Store::measurements(const RecordKey& key,
                                            const std::vector<std::string>& template_hashes) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.retry("listing measurements", [&]() -> std::vector<Measurement> {
    if (!impl_->ready()) return {};
    Query find = impl_->db.query(kMeasurementsOfKey);
    find.bind_all(key.family, hash_set(template_hashes), key.signature, key.device_name, key.cc, key.sm_count,
                  key.nvrtc_version);
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
      measurement.key.template_hash = find.text(7);
      measurements.push_back(std::move(measurement));
    }
    return measurements;
  });
}

std::size_t Store::erase(const std::string& family, const std::string& signature) {
  std::lock_guard lock(impl_->mutex);
  return impl_->db.write("erase records", [&] {
    impl_->db.query(kErase).bind_all(family, signature).run();
    return static_cast<std::size_t>(impl_->db.changes());
  });
}

void Store::export_jsonl(const std::filesystem::path& out, bool replace_symlink) const {
  write_jsonl(out, records(), replace_symlink);
}

ImportReport Store::import_jsonl(const std::filesystem::path& in, const RecordValidator& validate, bool trust) {
  impl_->db.require_writable("import " + in.string());
  JsonlContents contents = read_jsonl(in);
  std::vector<Impl::Incoming> incoming;
  for (auto& [line, record] : contents.records) incoming.push_back({line, std::move(record)});
  ImportReport report;
  report.rejected = contents.rejected_count;
  report.issues = std::move(contents.rejected);
  return impl_->import_records(std::move(incoming), std::move(report), validate, "import " + in.string(), trust);
}

ImportReport Store::merge_from(const Store& other, const RecordValidator& validate, bool trust) {
  impl_->db.require_writable("merge " + other.path().string() + " into it");
  std::vector<Impl::Incoming> incoming;
  for (Record& record : other.records()) incoming.push_back({0, std::move(record)});
  return impl_->import_records(std::move(incoming), ImportReport{}, validate,
                               "merge " + other.path().string(), trust);
}

ImportReport Store::merge_majority(const std::vector<const Store*>& others, const RecordValidator& validate,
                                   double noise) {
  impl_->db.require_writable("merge into it");
  if (!(noise >= 0 && noise < 1))
    throw InvalidArgument("merge noise must be in [0, 1) (got " + format_number(noise) + ")");
  auto key_of = [](const RecordKey& k) {
    return std::tuple(k.family, k.template_hash, k.signature, k.device_name, k.cc, k.sm_count, k.nvrtc_version);
  };
  ImportReport report;
  std::map<decltype(key_of(RecordKey{})), std::vector<Record>> groups;
  for (const Store* other : others)
    for (Record& record : other->records()) {
      std::string problem = check_record_shape(record);
      if (problem.empty() && validate) problem = validate(record);
      if (!problem.empty()) {
        ++report.rejected;
        report.issues.push_back(
            {0, "rejected " + describe(record.key) + " of " + other->path().string() + ": " + problem});
        continue;
      }
      groups[key_of(record.key)].push_back(std::move(record));
    }
  std::map<decltype(key_of(RecordKey{})), Record> stored;
  for (Record& record : records()) stored.emplace(key_of(record.key), std::move(record));
  std::vector<Impl::Incoming> incoming;
  for (auto& [key, repeats] : groups) {
    const auto mine = stored.find(key);
    if (mine != stored.end()) repeats.push_back(mine->second);  // the stored record votes too
    int votes = 0;
    const Record& pick = majority_record(repeats, noise, &votes);
    if (mine != stored.end() && pick.config == mine->second.config) {
      ++report.kept;
      continue;
    }
    if (repeats.size() > 1)
      report.issues.push_back({0, "majority: " + describe(pick.key) + ": " + pick.config + " (" +
                                      format_number(pick.time_us) + " us), chosen by " + std::to_string(votes) +
                                      " of " + std::to_string(repeats.size()) + " records within " +
                                      format_number(noise * 100) + "% of the fastest"});
    incoming.push_back({0, pick});
  }
  return impl_->import_records(std::move(incoming), std::move(report), nullptr, "merge", false, /*replace=*/true);
}

}  // namespace jitune::cache
