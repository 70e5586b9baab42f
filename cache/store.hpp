// Store: the SQLite tuning database (schema + migrations, keys, the lookups' raw queries, the import / merge
// policy: validate; new keys added; a stored record replaced by a faster incoming one only when trusted). WAL mode, busy timeout, prepared statements only
// (cache/sqlite.hpp); the JSON Lines format is cache/jsonl.hpp. sqlite3.h stays out of this header.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <jitune/error.hpp>

#include "cache/record.hpp"

namespace jitune::cache {

/// Whether a Store may write.
enum class OpenMode { kReadWrite, kReadOnly };

/// A record that import/merge did not take, or replaced.
struct ImportIssue {
  std::size_t line = 0;  ///< 1-based line in the JSONL file (0 for merges from SQLite).
  std::string message;   ///< What was wrong or what was replaced ("line N: " first for JSONL imports).
};

/// Outcome of import / merge.
struct ImportReport {
  std::size_t added = 0;            ///< New keys.
  std::size_t replaced = 0;         ///< Existing keys whose record was slower than the incoming one (trusted).
  std::size_t kept = 0;             ///< Existing keys whose record stayed (incoming dropped).
  std::size_t rejected = 0;         ///< Invalid incoming records.
  /// One entry per rejected or replaced record, and per stored record kept over a faster incoming one.
  std::vector<ImportIssue> issues;
};

/// Checks an incoming record (known family, config inside its space, parseable signature); returns what is
/// wrong, empty when acceptable. Callers pass jitune::check_with_registry (runtime/stores.hpp); the store
/// itself knows no family.
using RecordValidator = std::function<std::string(const Record&)>;

/// One SQLite tuning database. Thread-safe (one connection, serialized by a mutex); several processes may use
/// the same file at once (WAL + busy timeout + retried BEGIN IMMEDIATE).
class Store {
 public:
  /// Opens (read-write: creates the file, its folder and the schema if missing). Throws StoreError saying
  /// which file, what SQLite said, and what to do (not a database, newer schema, read-only, ...). Never
  /// deletes or rewrites a file it cannot understand. Read-only: a missing file throws; an empty SQLite
  /// database (no tables yet, e.g. one another process is just creating) reads as an empty store until its
  /// schema appears; a database with other tables but no jitune schema throws. A WAL file in a folder that
  /// cannot be written is read as immutable.
  Store(const std::filesystem::path& path, OpenMode mode);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& path() const noexcept;
  bool read_only() const noexcept;
  /// The schema version this build writes.
  static int schema_version() noexcept;

  /// Inserts or replaces the record with the same key (all RecordKey fields). Throws InvalidArgument for a
  /// non-finite number (SQLite and JSON cannot keep NaN / infinity), StoreError on a read-only store.
  void put(const Record& record);
  /// Appends a measurement (the same key + config replaces the older one). Same errors as put(Record).
  void put(const Measurement& measurement);

  /// The record for family+signature+device (name, cc, sm_count) whose template hash is one of `template_hashes`
  /// (a family's kernels may live in several templates); prefers `nvrtc_version`, then the newest. nullopt when none.
  std::optional<Record> find_exact(const std::string& family, const std::vector<std::string>& template_hashes,
                                   const std::string& signature, const std::string& device_name, int cc,
                                   int sm_count, const std::string& nvrtc_version) const;
  /// Records of one family+group on one device, of any of `template_hashes` (for the nearest-problem search).
  std::vector<Record> find_group(const std::string& family, const std::vector<std::string>& template_hashes,
                                 const std::string& group, const std::string& device_name, int cc,
                                 int sm_count) const;
  /// Records of one family+group, of any of `template_hashes`, tuned on other devices of compute capability `cc`.
  std::vector<Record> find_same_arch(const std::string& family, const std::vector<std::string>& template_hashes,
                                     const std::string& group, int cc,
                                     const std::string& exclude_device) const;
  /// Every record, ordered by (family, signature, device_name, cc, sm_count, nvrtc_version, template_hash).
  std::vector<Record> records() const;
  /// Measurements of one key's problem and device (all configs) whose template hash is one of `template_hashes`
  /// (key.template_hash is not read), fastest ok first; each carries its own template hash.
  std::vector<Measurement> measurements(const RecordKey& key, const std::vector<std::string>& template_hashes) const;
  /// Deletes the records matching family (and signature when not empty); returns how many.
  std::size_t erase(const std::string& family, const std::string& signature);

  /// Writes every record as JSON Lines (one record a line, keys sorted, records in records() order) to `out`:
  /// a regular file (a symbolic link at `out` is replaced only with `replace_symlink`; see write_jsonl).
  void export_jsonl(const std::filesystem::path& out, bool replace_symlink = false) const;
  /// Reads JSON Lines; each record is validated (shape, numbers, then `validate`). A key not stored yet is added.
  /// A stored record is never replaced by an incoming one unless `trust`: then the faster of the two stays. (An
  /// incoming record is a claim made elsewhere; a stored one was measured or accepted here. A kept record that
  /// the incoming one claims to beat is listed in the issues, saying how to take it.) Malformed lines are
  /// rejected with their line number; nothing is written on a read error.
  ImportReport import_jsonl(const std::filesystem::path& in, const RecordValidator& validate, bool trust = false);
  /// Same policy as import_jsonl, from another SQLite store.
  ImportReport merge_from(const Store& other, const RecordValidator& validate, bool trust = false);
  /// Merges repeated tunings (shards or reruns that tuned the same keys): per key, the stored record (if any) and
  /// every other store's record vote, and majority_record(noise) decides; the winner replaces the stored record
  /// when it differs (the report says so, with the votes). Records are validated as import_jsonl's; keys held
  /// once are added as they are.
  ImportReport merge_majority(const std::vector<const Store*>& others, const RecordValidator& validate,
                              double noise);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace jitune::cache
