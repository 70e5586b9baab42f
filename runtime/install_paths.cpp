// The folder of the binary holding this code (dladdr on one of its functions; the executable through
// /proc/self/exe when the code is linked into it), and the shipped-cache and worker locations relative to it.
#include "runtime/install_paths.hpp"

#include <dlfcn.h>

#include <system_error>

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

std::vector<std::filesystem::path> shipped_dirs_for(const std::filesystem::path& dir) {
  if (dir.empty()) return {};
  return {dir / "shipped", dir.parent_path() / "shipped", dir.parent_path() / "share" / "jitune"};
}

std::vector<std::filesystem::path> worker_paths_for(const std::filesystem::path& dir) {
  if (dir.empty()) return {};
  return {dir / "jitune-worker", dir.parent_path() / "jitune-worker",
          dir.parent_path() / "libexec" / "jitune" / "jitune-worker"};
}

}  // namespace jitune
