// Store layering: the default user cache folder, the shipped caches installed with jitune, opening the user
// cache (read-write, else read-only, else none, each step noted), and the registry check for imported
// records.
#include "runtime/stores.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <jitune/error.hpp>

#include "templates/family.hpp"

#ifndef JITUNE_SHIPPED_DIRS
#define JITUNE_SHIPPED_DIRS ""
#endif

namespace jitune {

std::filesystem::path default_cache_dir() {
  if (const char* v = std::getenv("JITUNE_CACHE_DIR"); v && *v) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return std::filesystem::path(v) / "jitune";
  if (const char* v = std::getenv("HOME"); v && *v) return std::filesystem::path(v) / ".cache" / "jitune";
  return std::filesystem::temp_directory_path() / "jitune";
}

std::vector<std::filesystem::path> builtin_shipped_caches() {
  std::vector<std::filesystem::path> out;
  auto add_list = [&](std::string_view list) {
    while (!list.empty()) {
      std::size_t colon = list.find(':');
      std::filesystem::path p(std::string(list.substr(0, colon)));
      std::error_code ec;
      if (!p.empty() && std::filesystem::is_directory(p, ec)) {
        std::vector<std::filesystem::path> files;
        for (const auto& entry : std::filesystem::directory_iterator(p, ec))
          if (entry.path().extension() == ".sqlite") files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        out.insert(out.end(), files.begin(), files.end());
      } else if (!p.empty() && std::filesystem::exists(p, ec)) {
        out.push_back(p);
      }
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  };
  if (const char* v = std::getenv("JITUNE_SHIPPED_CACHES")) add_list(v);
  add_list(JITUNE_SHIPPED_DIRS);
  return out;
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
  return check_tuned_config(record.key.family, record.key.signature, record.config);
}

}  // namespace jitune
