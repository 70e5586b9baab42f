// JSON Lines, the export format of a tuning store: one record a line with sorted keys, written atomically (a
// temporary file renamed over the target) and read back line by line, each bad line named by its number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/record.hpp"
#include "cache/store.hpp"

namespace jitune::cache {

/// Limits of an import, checked before anything is parsed (a line past one is rejected, the others still read).
inline constexpr std::uintmax_t kMaxImportBytes = 256ull << 20;  ///< The whole file: 256 MiB.
inline constexpr std::size_t kMaxLineBytes = 64 << 10;           ///< One line: 64 KiB.
inline constexpr std::size_t kMaxJsonDepth = 8;                  ///< Nesting of arrays / objects (a record: 2).
inline constexpr std::size_t kMaxFieldBytes = 16 << 10;          ///< One text field: 16 KiB.
inline constexpr std::size_t kMaxFeatures = 64;                  ///< Entries of "features".
inline constexpr std::size_t kMaxImportRecords = 200000;          ///< Records in one file (about 200 MB in memory).
inline constexpr std::size_t kMaxReportedIssues = 1000;          ///< Rejected lines reported one by one.

/// Serializes one record as a single-line JSON object with sorted keys (the export format).
std::string to_json_line(const Record& record);
/// Parses one export line; throws InvalidArgument saying which field is missing, has the wrong type or is over
/// its limit (line length, nesting depth, field length, feature count: checked before or while parsing, never by
/// recursing over a bad value).
Record from_json_line(const std::string& line);

/// Writes `records`, one line each, to `out` through a temporary file in the same folder renamed over it, so
/// a reader never sees half a file. Only a regular file is ever replaced: a FIFO, device, socket or folder at
/// `out` is refused, and a symbolic link is replaced (the link itself, never the file it points to) only with
/// `replace_symlink`. Throws StoreError saying what failed and what to do.
void write_jsonl(const std::filesystem::path& out, const std::vector<Record>& records, bool replace_symlink = false);

/// A JSON Lines file read: the records that parsed (with their 1-based line numbers) and the lines that did
/// not.
struct JsonlContents {
  struct Line {
    std::size_t line = 0;
    Record record;
  };
  std::vector<Line> records;
  /// "line N: rejected: <why>" for the first kMaxReportedIssues lines that did not parse, then one line saying how
  /// many more were rejected.
  std::vector<ImportIssue> rejected;
  std::size_t rejected_count = 0;  ///< Every line that did not parse.
};
/// Reads `in` (blank lines skipped, CRLF accepted). Throws StoreError, with nothing read, when it is not a regular
/// file (a folder, FIFO, device), is larger than kMaxImportBytes, holds more than `max_records` records, or cannot
/// be read.
JsonlContents read_jsonl(const std::filesystem::path& in, std::size_t max_records = kMaxImportRecords);

}  // namespace jitune::cache
