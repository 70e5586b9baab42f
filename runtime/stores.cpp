// Store layering: the default user cache folder, the shipped caches installed with jitune, opening the user
// cache (read-write, else read-only, else none, each step noted), and the registry check for imported
// records.
#include "runtime/stores.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include <jitune/error.hpp>

#include "runtime/install_paths.hpp"
#include "templates/family.hpp"
#include "templates/sources.hpp"

namespace jitune {
namespace {

struct PrivateFallback {
  std::mutex mutex;
  std::filesystem::path folder;  ///< The mkdtemp folder, made once per process when needed.
  std::string note;
};

PrivateFallback& private_fallback() {
  static PrivateFallback state;
  return state;
}

}  // namespace

std::filesystem::path private_cache_dir_under(const std::filesystem::path& base) {
  const uid_t uid = ::geteuid();
  const std::filesystem::path shared = base / ("jitune-" + std::to_string(uid));
  ::mkdir(shared.c_str(), 0700);  // an existing entry is examined below
  struct stat st{};
  std::string why;
  if (::lstat(shared.c_str(), &st) != 0) why = std::string("cannot be made: ") + std::strerror(errno);
  else if (!S_ISDIR(st.st_mode)) why = "is not a folder (a symbolic link or a file)";
  else if (st.st_uid != uid) why = "belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  else if ((st.st_mode & 022) != 0) why = "can be written by other users";
  if (why.empty()) return shared;
  PrivateFallback& fallback = private_fallback();
  std::lock_guard lock(fallback.mutex);
  if (fallback.folder.empty()) {
    std::string pattern = (base / ("jitune-" + std::to_string(uid) + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw StoreError("no private cache folder: " + shared.string() + " " + why + ", and mkdtemp in " +
                       base.string() + " failed (" + std::strerror(errno) + "); set JITUNE_CACHE_DIR to a folder of your own");
    fallback.folder = pattern;
    fallback.note = "the default cache folder " + shared.string() + " " + why + "; this process uses the private " +
                    "folder " + pattern + " instead, so its tuning results are not kept: set HOME or JITUNE_CACHE_DIR";
  }
  return fallback.folder;
}

std::filesystem::path default_cache_dir() {
  if (const char* v = std::getenv("JITUNE_CACHE_DIR"); v && *v) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return std::filesystem::path(v) / "jitune";
  if (const char* v = std::getenv("HOME"); v && *v) return std::filesystem::path(v) / ".cache" / "jitune";
  // No HOME (a service, a container): the account's home, never a folder shared with other users.
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found && found->pw_dir &&
      found->pw_dir[0] == '/' && std::string_view(found->pw_dir) != "/")
    return std::filesystem::path(found->pw_dir) / ".cache" / "jitune";
  std::error_code ec;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  return private_cache_dir_under(ec ? std::filesystem::path("/tmp") : temp);
}

std::string default_cache_dir_note() {
  PrivateFallback& fallback = private_fallback();
  std::lock_guard lock(fallback.mutex);
  return fallback.note;
}

std::vector<std::filesystem::path> builtin_shipped_caches() {
  std::vector<std::filesystem::path> out;
  auto add = [&](const std::filesystem::path& p) {
    std::error_code ec;
    if (p.empty()) return;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(p, ec))
        if (entry.path().extension() == ".sqlite") files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) out.push_back(f);
    } else if (std::filesystem::exists(p, ec)) {
      out.push_back(p);
    }
  };
  if (const char* v = std::getenv("JITUNE_SHIPPED_CACHES")) {
    std::string_view list = v;
    while (!list.empty()) {
      const std::size_t colon = list.find(':');
      add(std::filesystem::path(std::string(list.substr(0, colon))));
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  }
  for (const auto& dir : shipped_dirs()) add(dir);
  // Each file once (the build tree's top and a subfolder may both reach build/shipped).
  std::vector<std::filesystem::path> unique;
  std::vector<std::filesystem::path> seen;
  for (const auto& p : out) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(p, ec);
    const auto& key = ec ? p : canonical;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    unique.push_back(p);
  }
  return unique;
}

std::unique_ptr<cache::Store> open_user_store(const std::filesystem::path& path,
                                              std::vector<std::string>& notes) {
  try {
    return std::make_unique<cache::Store>(path, cache::OpenMode::kReadWrite);
  } catch (const StoreError& e) {
    notes.push_back(e.what());
  }
  // A cache that cannot be written is still worth reading; one that cannot be read is left alone.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    notes.push_back(
        "running without a user cache: tuned results will not be kept (set JITUNE_CACHE_DIR to a "
        "writable folder)");
    return nullptr;
  }
  try {
    auto store = std::make_unique<cache::Store>(path, cache::OpenMode::kReadOnly);
    notes.push_back("using the user cache " + path.string() +
                    " read-only: lookups work, new results are not stored");
    return store;
  } catch (const StoreError&) {
    notes.push_back("running without the user cache " + path.string() +
                    " (left untouched); lookups use the shipped caches and heuristics");
    return nullptr;
  }
}
std::string check_with_registry(const cache::Record& record) {
  // A record of another version of its family's templates (stale) is kept as it is: lookups never use it (they
  // take only this build's template hashes), and its config and signature belong to that version's space. So an
  // older export still imports after a template gains a parameter, and `cache list` shows it as stale.
  const Family* f = find_family(record.key.family);
  if (f != nullptr) {
    const std::vector<std::string> current = template_hashes(*f);
    if (std::find(current.begin(), current.end(), record.key.template_hash) == current.end()) return {};
  }
  if (std::string why = check_tuned_config(record.key.family, record.key.signature, record.config); !why.empty())
    return why;
  // check_tuned_config found the family and read the config. A config of one of the family's templates must not
  // carry another one's hash (lookups would skip it).
  if (const Config config = Config::parse(record.config); config_template_hash(*f, config) != record.key.template_hash)
    return "config " + record.config + " runs the kernel of template " + std::string(f->template_of(config)) +
           ", whose hash is not the record's template_hash " + record.key.template_hash;
  // A shared file must not decide every user's kernel with an impossible time (1e-300 us once replaced a real
  // measurement): the floors below hold on any GPU.
  const std::string claimed = " us is faster than any GPU could run it";
  if (record.time_us < kLaunchFloorUs)
    return "time_us " + cache::format_number(record.time_us) + claimed + " (a launch alone takes over " +
           cache::format_number(kLaunchFloorUs) + " us)";
  const Family& family = jitune::family(record.key.family);
  const double bytes = family.parse_problem(record.key.signature)->bytes_moved();
  const double floor_us = bytes / kPeakBytesPerSecond * 1e6;
  if (record.time_us < floor_us)
    return "time_us " + cache::format_number(record.time_us) + claimed + ": it moves " +
           cache::format_number(bytes / 1e6) + " MB, at least " + cache::format_number(floor_us) + " us at 40 TB/s";
  return {};
}

}  // namespace jitune
