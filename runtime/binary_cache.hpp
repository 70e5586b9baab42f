// BinaryCache: compiled kernel images in memory and on disk (one file per key, written atomically via a temp file
// and rename, with a SHA-256 bound to its key so a damaged, swapped or forged file is compiled again, never
// loaded). A file is loaded only from a folder that other users cannot write and only when they cannot write the
// file either: a planted image would run as this process's kernel.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace jitune {

/// One cached binary: the image and the lowered name of the kernel the key names.
struct CachedBinary {
  std::vector<char> cubin;
  std::string lowered_name;
};

class BinaryCache {
 public:
  /// `folder` empty: memory only.
  explicit BinaryCache(std::filesystem::path folder);
  /// Memory first, then disk; nullopt on a miss, an unreadable/damaged file, or a file or folder that another user
  /// could have written (owned by someone other than this user or root, or writable by group or others).
  std::optional<CachedBinary> get(const std::string& key);
  /// Stores in memory and (best effort: a full or read-only disk only loses the disk copy) on disk.
  void put(const std::string& key, const CachedBinary& binary);
  const std::filesystem::path& folder() const noexcept { return folder_; }
  /// Why the last disk write failed, empty if none did.
  std::string last_write_error() const;
  /// Why disk binaries are not loaded (the folder is not this user's own), empty when they are.
  std::string untrusted_note() const;

 private:
  std::filesystem::path folder_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, CachedBinary> memory_;
  std::string last_write_error_;
};

}  // namespace jitune
