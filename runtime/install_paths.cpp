// The folder of the binary holding this code (dladdr on one of its functions; the executable through
// /proc/self/exe when the code is linked into it), and the shipped-cache and worker locations relative to it.
#include "runtime/install_paths.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <system_error>

#include <jitune/runtime.hpp>

#include "runtime/stores.hpp"

// Defined (weak, so several targets of one program may compile it) by jitune-package-location.cpp, which the
// installed CMake package adds to programs that link jitune::runtime; absent everywhere else.
extern "C" const char* jitune_package_location() __attribute__((weak));

namespace jitune {

std::filesystem::path module_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&module_dir), &info) != 0 && info.dli_fname && *info.dli_fname) {
    // For code inside the executable glibc reports the name the program was started by (maybe relative):
    // prefer /proc/self/exe when it is that same file.
    const std::filesystem::path named(info.dli_fname);
    if (!exe.empty() && std::filesystem::equivalent(named, exe, ec) && !ec) return exe.parent_path();
    const std::filesystem::path full = std::filesystem::weakly_canonical(named, ec);
    if (!ec && !full.empty()) return full.parent_path();
  }
  return exe.empty() ? std::filesystem::path() : exe.parent_path();
}

std::filesystem::path package_prefix() {
  if (jitune_package_location == nullptr) return {};
  const char* location = jitune_package_location();  // "<prefix>/<libdir>/cmake/jitune/<file>.cpp/../../../.."
  if (location == nullptr || *location == '\0') return {};
  return std::filesystem::path(location).lexically_normal();
}

std::vector<std::filesystem::path> shipped_dirs() {
  std::vector<std::filesystem::path> out;
  if (const auto dir = module_dir(); !dir.empty())
    out = {dir / "shipped", dir.parent_path() / "shipped", dir.parent_path() / "share" / "jitune"};
  if (const auto prefix = package_prefix(); !prefix.empty()) out.push_back(prefix / "share" / "jitune");
  return out;
}

std::vector<std::filesystem::path> worker_paths() {
  std::vector<std::filesystem::path> out;
  if (const auto dir = module_dir(); !dir.empty())
    out = {dir / "jitune-worker", dir.parent_path() / "jitune-worker",
           dir.parent_path() / "libexec" / "jitune" / "jitune-worker"};
  if (const auto prefix = package_prefix(); !prefix.empty())
    out.push_back(prefix / "libexec" / "jitune" / "jitune-worker");
  return out;
}

std::filesystem::path find_worker_executable() {
  auto usable = [](const std::filesystem::path& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; };
  if (const char* v = std::getenv("JITUNE_WORKER"); v && *v) return usable(v) ? std::filesystem::path(v) : "";
  for (const auto& p : worker_paths())
    if (usable(p)) return p;
  return {};
}

InstalledFiles installed_files() { return {builtin_shipped_caches(), find_worker_executable()}; }

}  // namespace jitune
