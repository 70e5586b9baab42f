// Disk format: "JITUNEB2", u32 name length, name, u64 image length, image, then the 32-byte SHA-256 of the key
// (the file's name: itself a SHA-256 of the program, kernel name, options and NVRTC version), the lengths, the name
// and the image. An image renamed to another key, cut, extended or altered fails the check and is compiled again.
#include "runtime/binary_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>

#include "runtime/sha256.hpp"

namespace jitune {
namespace {

constexpr char kMagic[8] = {'J', 'I', 'T', 'U', 'N', 'E', 'B', '2'};

using Digest = std::array<std::uint8_t, 32>;

Digest checksum(const std::string& key, const CachedBinary& b) {
  Sha256 h;
  const auto name_len = static_cast<std::uint32_t>(b.lowered_name.size());
  const auto image_len = static_cast<std::uint64_t>(b.cubin.size());
  h.update("jitune binary v2");
  h.update(key.data(), key.size() + 1);  // with its terminating NUL: the key cannot run into the lengths
  h.update(&name_len, sizeof name_len);
  h.update(b.lowered_name);
  h.update(&image_len, sizeof image_len);
  h.update(b.cubin.data(), b.cubin.size());
  return h.digest();
}

template <class T>
bool read_pod(std::ifstream& in, T& v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&v), sizeof v));
}

// Why `path` (a folder or file, links followed) could hold something another user wrote; empty when it cannot.
std::string untrusted_because(const std::filesystem::path& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return std::string("cannot be examined: ") + std::strerror(errno);
  if (st.st_uid != ::geteuid() && st.st_uid != 0) return "belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  if ((st.st_mode & 022) != 0) return "can be written by other users";
  return {};
}

}  // namespace

BinaryCache::BinaryCache(std::filesystem::path folder) : folder_(std::move(folder)) {}

namespace {

// The image `key` names in `path` (see the disk format above); nullopt when it is not one or fails its checksum.
std::optional<CachedBinary> read_binary(const std::filesystem::path& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  char magic[8];
  std::uint32_t name_len = 0;
  std::uint64_t image_len = 0;
  Digest sum{};
  CachedBinary b;
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !read_pod(in, name_len) || name_len > 4096)
    return std::nullopt;
  b.lowered_name.resize(name_len);
  if (!in.read(b.lowered_name.data(), name_len) || !read_pod(in, image_len) || image_len > (1ull << 30))
    return std::nullopt;
  b.cubin.resize(image_len);
  if (!in.read(b.cubin.data(), static_cast<std::streamsize>(image_len)) || !read_pod(in, sum) ||
      in.peek() != std::ifstream::traits_type::eof() || sum != checksum(key, b))
    return std::nullopt;
  return b;
}

}  // namespace

std::optional<CachedBinary> BinaryCache::get(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) return it->second;
  }
  if (folder_.empty()) return std::nullopt;
  const auto path = folder_ / (key + ".bin");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  if (!untrusted_because(folder_).empty() || !untrusted_because(path).empty()) return std::nullopt;  // recompiled
  std::optional<CachedBinary> b = read_binary(path, key);
  if (!b) return std::nullopt;
  std::lock_guard lock(mutex_);
  return memory_.emplace(key, std::move(*b)).first->second;
}

void BinaryCache::put(const std::string& key, const CachedBinary& binary) {
  {
    std::lock_guard lock(mutex_);
    memory_[key] = binary;
  }
  if (folder_.empty()) return;
  std::error_code ec;
  // A folder made here is writable by this user only, whatever the umask (002 would make it group-writable, and
  // get() would not trust it). A folder that was there is left as it is.
  if (std::filesystem::create_directories(folder_, ec)) ::chmod(folder_.c_str(), 0755);
  const auto final_path = folder_ / (key + ".bin");
  const auto tmp = folder_ / (key + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}()));
  bool ok = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) {
      const auto name_len = static_cast<std::uint32_t>(binary.lowered_name.size());
      const auto image_len = static_cast<std::uint64_t>(binary.cubin.size());
      const Digest sum = checksum(key, binary);
      out.write(kMagic, 8);
      out.write(reinterpret_cast<const char*>(&name_len), sizeof name_len);
      out.write(binary.lowered_name.data(), name_len);
      out.write(reinterpret_cast<const char*>(&image_len), sizeof image_len);
      out.write(binary.cubin.data(), static_cast<std::streamsize>(image_len));
      out.write(reinterpret_cast<const char*>(sum.data()), sum.size());
      out.flush();
      ok = static_cast<bool>(out);
    }
  }
  if (ok) ok = ::chmod(tmp.c_str(), 0644) == 0;  // whatever the umask: writable by this user only
  if (ok) std::filesystem::rename(tmp, final_path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    std::lock_guard lock(mutex_);
    last_write_error_ = "could not write " + final_path.string() + " (disk full or read-only?); kernels stay in memory";
  }
}

std::string BinaryCache::untrusted_note() const {
  std::error_code ec;
  if (folder_.empty() || !std::filesystem::exists(folder_, ec)) return {};
  const std::string why = untrusted_because(folder_);
  if (why.empty()) return {};
  return "compiled kernels in " + folder_.string() + " are not loaded: the folder " + why +
         "; kernels are compiled again each run. Use a folder of your own (JITUNE_CACHE_DIR, or binary_cache_dir)";
}

std::string BinaryCache::last_write_error() const {
  std::lock_guard lock(mutex_);
  return last_write_error_;
}

}  // namespace jitune
