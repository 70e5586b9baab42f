// Template sources (embedded table or $JITUNE_TEMPLATE_DIR) and their hashes.
#include "templates/sources.hpp"

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <jitune/error.hpp>

namespace jitune {

std::uint64_t hash64(std::string_view bytes, std::uint64_t seed) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  // Final avalanche (splitmix64) so nearby inputs differ in every digit.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

std::string hex64(std::uint64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) s[i] = digits[value & 15];
  return s;
}

const std::vector<SourceFile>& template_sources() {
  static const std::vector<SourceFile> sources = [] {
    std::vector<SourceFile> out;
    const char* dir = std::getenv("JITUNE_TEMPLATE_DIR");
    for (const EmbeddedFile& f : detail::embedded_templates()) {
      if (dir && *dir) {
        std::string path = std::string(dir) + "/" + f.name;
        std::ifstream in(path, std::ios::binary);
        if (!in)
          throw InvalidArgument("JITUNE_TEMPLATE_DIR is set to '" + std::string(dir) + "' but '" + path +
                                "' cannot be read; point it at the repository's templates/ folder or unset it");
        std::ostringstream text;
        text << in.rdbuf();
        out.push_back({f.name, text.str()});
      } else {
        out.push_back({f.name, f.contents});
      }
    }
    return out;
  }();
  return sources;
}

const std::string& template_source(std::string_view name) {
  for (const SourceFile& f : template_sources())
    if (f.name == name) return f.contents;
  throw InvalidArgument("no kernel template named '" + std::string(name) + "' is embedded in this build");
}

std::vector<std::string> quoted_includes(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    std::size_t p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line.compare(p, 8, "#include") != 0) continue;
    std::size_t open = line.find('"', p);
    std::size_t close = open == std::string::npos ? open : line.find('"', open + 1);
    if (close != std::string::npos) out.push_back(line.substr(open + 1, close - open - 1));
  }
  return out;
}

std::string template_hash(std::string_view name) {
  static std::mutex mutex;
  static std::map<std::string, std::string, std::less<>> memo;
  std::lock_guard lock(mutex);
  if (auto it = memo.find(name); it != memo.end()) return it->second;
  std::set<std::string> seen;
  std::vector<std::string> todo{std::string(name)};
  while (!todo.empty()) {
    std::string next = todo.back();
    todo.pop_back();
    if (!seen.insert(next).second) continue;
    for (std::string& inc : quoted_includes(template_source(next))) todo.push_back(std::move(inc));
  }
  std::uint64_t h = 0;
  for (const std::string& file : seen) h = hash64(template_source(file), hash64(file, h));
  return memo.emplace(std::string(name), hex64(h)).first->second;
}

}  // namespace jitune
