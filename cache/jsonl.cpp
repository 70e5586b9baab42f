// JSON Lines export and import of tuning records: the line format (sorted keys, every field typed and
// checked), the atomic file write, and the line-by-line read.
#include "cache/jsonl.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#include <nlohmann/json.hpp>

namespace jitune::cache {
namespace {

using Json = nlohmann::json;

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

const Json& field(const Json& object, const char* name) {
  const auto found = object.find(name);
  if (found == object.end()) throw InvalidArgument(std::string("missing field \"") + name + "\"");
  return *found;
}

// A value for a message: its JSON text, cut to 60 bytes (values are shallow here: the depth was checked first).
std::string brief(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

[[noreturn]] void wrong_type(const char* name, const char* expected, const Json& value) {
  throw InvalidArgument(std::string("field \"") + name + "\" must be " + expected + " (got " + brief(value) +
                        ")");
}

std::string string_field(const Json& object, const char* name) {
  const Json& value = field(object, name);
  if (!value.is_string()) wrong_type(name, "a string", value);
  const auto& text = value.get_ref<const std::string&>();
  if (text.size() > kMaxFieldBytes)
    throw InvalidArgument(std::string("field \"") + name + "\" is " + std::to_string(text.size()) +
                          " bytes long; the limit is " + std::to_string(kMaxFieldBytes));
  return text;
}

// Whether arrays and objects nest deeper than `limit` in `line` (brackets inside strings do not count). A linear
// scan before parsing, so neither the parser nor a message ever recurses over a hostile nesting.
bool nests_deeper_than(const std::string& line, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : line) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
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

// Export replaces only a regular file (rename() would replace a FIFO, a device node or a link just the same):
// throws StoreError for anything else at `out`, and for a symbolic link unless `replace_symlink`.
void refuse_unsafe_target(const std::filesystem::path& out, bool replace_symlink) {
  struct stat existing{};
  if (::lstat(out.c_str(), &existing) != 0) return;  // nothing there yet
  const auto refuse = [&](const std::string& why) {
    throw StoreError("jitune export to " + out.string() + ": " + why + "; nothing was written");
  };
  if (S_ISLNK(existing.st_mode) && !replace_symlink)
    refuse("it is a symbolic link; export would replace the link itself (not the file it points to) with a "
           "regular file: pass --force to do that, or give the link's target as the path");
  if (S_ISDIR(existing.st_mode)) refuse("it is a folder; give a file path such as " + (out / "cache.jsonl").string());
  if (!S_ISREG(existing.st_mode) && !S_ISLNK(existing.st_mode))
    refuse("it is not a regular file (a FIFO, device or socket); export writes only regular files: choose "
           "another path");
}

}  // namespace

std::string to_json_line(const Record& record) {
  Json line = {
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
  // The fingerprint and provenance only where known: a record made before them (the shipped files' older lines)
  // exports as it was imported, so a refreshed shipped file's diff shows only what was tuned again.
  for (const auto& [name, value] : {std::pair<const char*, int>{"memory_mb", record.memory_mb},
                                    {"sm_clock_mhz", record.sm_clock_mhz},
                                    {"memory_clock_mhz", record.memory_clock_mhz}})
    if (value != 0) line[name] = value;
  if (!record.host.empty()) line["host"] = record.host;
  if (!record.shard.empty()) line["shard"] = record.shard;
  try {
    return line.dump();
  } catch (const Json::exception& error) {
    throw InvalidArgument("cannot write the record " + describe(record.key) + " as JSON: " + error.what() +
                          " (its text fields must be valid UTF-8)");
  }
}

Record from_json_line(const std::string& line) {
  if (line.size() > kMaxLineBytes)
    throw InvalidArgument("the line is " + std::to_string(line.size()) + " bytes long; the limit is " +
                          std::to_string(kMaxLineBytes) + " (a record takes a few hundred)");
  if (nests_deeper_than(line, kMaxJsonDepth))
    throw InvalidArgument("arrays / objects nested deeper than " + std::to_string(kMaxJsonDepth) +
                          " levels (a record has 2)");
  Json object;
  try {
    object = Json::parse(line);
  } catch (const Json::exception& error) {  // a syntax error, or a number too large for a double (1e999)
    std::string what = error.what();  // quotes the last token read: cut it
    if (what.size() > 200) what = what.substr(0, 197) + "...";
    throw InvalidArgument("not valid JSON: " + what);
  }
  if (!object.is_object()) throw InvalidArgument("not a JSON object (got " + brief(object) + ")");
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
  if (features.size() > kMaxFeatures)
    throw InvalidArgument("field \"features\" has " + std::to_string(features.size()) + " entries; the limit is " +
                          std::to_string(kMaxFeatures));
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
  // The fingerprint and provenance fields came later (jitune's schema 2): absent means not recorded.
  auto optional = [&](const char* name) { return object.contains(name); };
  if (optional("memory_mb")) record.memory_mb = int_field(object, "memory_mb");
  if (optional("sm_clock_mhz")) record.sm_clock_mhz = int_field(object, "sm_clock_mhz");
  if (optional("memory_clock_mhz")) record.memory_clock_mhz = int_field(object, "memory_clock_mhz");
  if (optional("host")) record.host = string_field(object, "host");
  if (optional("shard")) record.shard = string_field(object, "shard");
  return record;
}

void write_jsonl(const std::filesystem::path& out, const std::vector<Record>& records, bool replace_symlink) {
  refuse_unsafe_target(out, replace_symlink);
  std::string text;
  for (const Record& record : records) text += to_json_line(record) + '\n';

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
  std::string temp_name = ".";  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "." + string + ...
  temp_name += out.filename().string();
  temp_name += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(random());
  const std::filesystem::path temp = folder / temp_name;
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

JsonlContents read_jsonl(const std::filesystem::path& in, std::size_t max_records) {
  struct stat info{};
  if (::stat(in.c_str(), &info) == 0) {  // a missing file falls through to the open error below
    if (S_ISDIR(info.st_mode))
      throw StoreError("jitune import of " + in.string() +
                       ": it is a folder, not a JSON Lines file; nothing was imported");
    if (!S_ISREG(info.st_mode))
      throw StoreError("jitune import of " + in.string() +
                       ": it is not a regular file (a FIFO, device or socket); import reads only regular files: "
                       "copy it to a file first; nothing was imported");
    if (static_cast<std::uintmax_t>(info.st_size) > kMaxImportBytes)
      throw StoreError("jitune import of " + in.string() + ": it is " + std::to_string(info.st_size) +
                       " bytes; the limit is " + std::to_string(kMaxImportBytes) +
                       " (256 MiB): split it into smaller files; nothing was imported");
  }
  std::ifstream file(in, std::ios::binary);
  if (!file) {
    const int code = errno;
    throw StoreError("jitune import of " + in.string() + ": cannot open it: " + std::strerror(code) +
                     "; check the path and permissions; nothing was imported");
  }
  JsonlContents contents;
  std::string line;
  std::size_t number = 0;
  while (std::getline(file, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      Record record = from_json_line(line);
      if (contents.records.size() == max_records)
        throw StoreError("jitune import of " + in.string() + ": it holds more than " + std::to_string(max_records) +
                         " records (line " + std::to_string(number) + "); the limit keeps an import's memory "
                         "bounded: split the file; nothing was imported");
      contents.records.push_back({number, std::move(record)});
    } catch (const InvalidArgument& bad) {
      if (++contents.rejected_count <= kMaxReportedIssues)
        contents.rejected.push_back({number, "line " + std::to_string(number) + ": rejected: " + bad.what()});
    }
  }
  if (contents.rejected_count > kMaxReportedIssues)
    contents.rejected.push_back({0, std::to_string(contents.rejected_count - kMaxReportedIssues) +
                                        " more lines were rejected (the first " +
                                        std::to_string(kMaxReportedIssues) + " are listed)"});
  if (file.bad()) {
    const int code = errno;
    throw StoreError("jitune import of " + in.string() + ": reading failed after line " +
                     std::to_string(number) + ": " + std::strerror(code) + "; nothing was imported");
  }
  return contents;
}

}  // namespace jitune::cache
