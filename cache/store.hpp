// Store: the SQLite tuning database (schema + migrations, keys, lookups with fallback levels' raw queries,
// import / export / merge). WAL mode, busy timeout, prepared statements only. sqlite3.h stays in store.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <jitune/error.hpp>

struct sqlite3;

namespace jitune::cache {

/// What a tuning record is keyed by (DESIGN.md): family, template hash, problem signature, device name, compute
/// capability, SM count, NVRTC version.
struct RecordKey {
  std::string family;
  std::string template_hash;   ///< template_hash() of the family's template when tuned.
  std::string signature;       ///< Problem::signature().
  std::string device_name;     ///< e.g. "NVIDIA H100 80GB HBM3".
  int cc = 0;                  ///< Compute capability as one number (90).
  int sm_count = 0;
  std::string nvrtc_version;   ///< "13.0".
  friend bool operator==(const RecordKey&, const RecordKey&) = default;
};

/// A tuned winner: what the dispatcher looks up.
struct Record {
  RecordKey key;
  std::string group;              ///< Problem::group(), for the nearest-problem lookup.
  std::vector<double> features;   ///< Problem::features().
  std::string config;             ///< Canonical config text of the winner.
  double time_us = 0;             ///< Median time of the winner.
  double spread = 0;              ///< Relative spread of its repetitions ((p90 - p10) / median).
  int reps = 0;                   ///< Repetitions behind the median.
  double default_time_us = 0;     ///< Heuristic default's median on the same problem (0 if not measured).
  std::string default_config;     ///< The heuristic default's config text.
  std::string jitune_version;
  int driver_version = 0;         ///< cuDriverGetVersion of the machine that tuned.
  std::string created_at;         ///< UTC, ISO 8601 ("2026-11-21T19:40:00Z").
};

/// One candidate's outcome, failures included (KTT-style reasons). Written as soon as it is measured.
struct Measurement {
  RecordKey key;
  std::string config;
  std::string status;   ///< "ok", "cut" (stopped early, slower), "compile_failed", "wrong_result",
                        ///< "launch_failed", "resources_exceeded", "timeout", "invalid".
  std::string reason;   ///< Compiler log excerpt, mismatch description, ... (empty for ok).
  double time_us = 0;   ///< Median (0 when not timed).
  double spread = 0;
  int reps = 0;
  std::string created_at;
};

/// Whether a Store may write.
enum class OpenMode { kReadWrite, kReadOnly };

/// A record that import/merge did not take, or replaced.
struct ImportIssue {
  std::size_t line = 0;   ///< 1-based line in the JSONL file (0 for merges from SQLite).
  std::string message;    ///< What was wrong or what was replaced ("line N: " first for JSONL imports).
};

/// Outcome of import / merge.
struct ImportReport {
  std::size_t added = 0;       ///< New keys.
  std::size_t replaced = 0;    ///< Existing keys whose record was slower than the incoming one.
  std::size_t kept = 0;        ///< Existing keys whose record was as fast or faster (incoming dropped).
  std::size_t rejected = 0;    ///< Invalid incoming records.
  std::vector<ImportIssue> issues;  ///< One entry per rejected or replaced record.
};

/// Checks an incoming record (known family, config inside its space, parseable signature); returns what is wrong,
/// empty when acceptable. The CLI passes one built on the family registry.
using RecordValidator = std::function<std::string(const Record&)>;

/// One SQLite tuning database. Thread-safe (one connection, serialized by a mutex); several processes may use the
/// same file at once (WAL + busy timeout + retried BEGIN IMMEDIATE).
class Store {
 public:
  /// Opens (read-write: creates the file, its folder and the schema if missing). Throws StoreError saying which
  /// file, what SQLite said, and what to do (not a database, newer schema, read-only, ...). Never deletes or
  /// rewrites a file it cannot understand. Read-only: a missing file throws; an empty SQLite database (no tables
  /// yet, e.g. one another process is just creating) reads as an empty store until its schema appears; a database
  /// with other tables but no jitune schema throws. A WAL file in a folder that cannot be written is read as
  /// immutable.
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

  /// The record for family+template_hash+signature+device (name, cc, sm_count); prefers `nvrtc_version`, then the
  /// newest. nullopt when none.
  std::optional<Record> find_exact(const std::string& family, const std::string& template_hash,
                                   const std::string& signature, const std::string& device_name, int cc,
                                   int sm_count, const std::string& nvrtc_version) const;
  /// Records of one family+template_hash+group on one device (for the nearest-problem search).
  std::vector<Record> find_group(const std::string& family, const std::string& template_hash,
                                 const std::string& group, const std::string& device_name, int cc,
                                 int sm_count) const;
  /// Records of one family+template_hash+group tuned on other devices of compute capability `cc`.
  std::vector<Record> find_same_arch(const std::string& family, const std::string& template_hash,
                                     const std::string& group, int cc, const std::string& exclude_device) const;
  /// Every record, ordered by (family, signature, device_name, cc, sm_count, nvrtc_version, template_hash).
  std::vector<Record> records() const;
  /// Measurements of one key (all configs), fastest ok first.
  std::vector<Measurement> measurements(const RecordKey& key) const;
  /// Deletes the records matching family (and signature when not empty); returns how many.
  std::size_t erase(const std::string& family, const std::string& signature);

  /// Writes every record as JSON Lines (one record a line, keys sorted, records in records() order) to `out`.
  void export_jsonl(const std::filesystem::path& out) const;
  /// Reads JSON Lines; each record is validated (shape, numbers, then `validate`); for a key already present the
  /// faster record stays. Malformed lines are rejected with their line number; nothing is written on a read error.
  ImportReport import_jsonl(const std::filesystem::path& in, const RecordValidator& validate);
  /// Same policy as import_jsonl, from another SQLite store.
  ImportReport merge_from(const Store& other, const RecordValidator& validate);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Serializes one record as a single-line JSON object with sorted keys (the export format).
std::string to_json_line(const Record& record);
/// Parses one export line; throws InvalidArgument saying which field is missing or has the wrong type.
Record from_json_line(const std::string& line);
/// Checks the numbers and key fields of a record (finite positive time, reps >= 1, cc 10..200, ...): what is
/// wrong, empty if nothing.
std::string check_record_shape(const Record& record);
/// The validator import and merge use: known family, canonical signature its family parses, config inside the
/// family's space. Returns what is wrong, empty if nothing.
std::string validate_with_registry(const Record& record);
/// Current UTC time in ISO 8601, e.g. "2026-11-21T19:40:00Z".
std::string utc_now();

}  // namespace jitune::cache
