// JSON Lines, the export format of a tuning store: one record a line with sorted keys, written atomically (a
// temporary file renamed over the target) and read back line by line, each bad line named by its number.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/record.hpp"
#include "cache/store.hpp"

namespace jitune::cache {

/// Serializes one record as a single-line JSON object with sorted keys (the export format).
std::string to_json_line(const Record& record);
/// Parses one export line; throws InvalidArgument saying which field is missing or has the wrong type.
Record from_json_line(const std::string& line);

/// Writes `records`, one line each, to `out` through a temporary file in the same folder renamed over it, so
/// a reader never sees half a file. Throws StoreError saying what failed and what to check.
void write_jsonl(const std::filesystem::path& out, const std::vector<Record>& records);

/// A JSON Lines file read: the records that parsed (with their 1-based line numbers) and the lines that did
/// not.
struct JsonlContents {
  struct Line {
    std::size_t line = 0;
    Record record;
  };
  std::vector<Line> records;
  std::vector<ImportIssue> rejected;  ///< "line N: rejected: <why>", one per line that did not parse.
};
/// Reads `in` (blank lines skipped, CRLF accepted). Throws StoreError when it is a folder or cannot be read.
JsonlContents read_jsonl(const std::filesystem::path& in);

}  // namespace jitune::cache
