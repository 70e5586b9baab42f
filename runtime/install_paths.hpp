// Where an installed (or built, or pip-installed) jitune finds its own files: the shipped tuning caches and the
// tuner's worker, relative to the binary that holds jitune's code, never through paths fixed at build time, so
// an install prefix or a Python package can be moved.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace jitune {

/// The folder of the binary holding jitune's code: libjitune.so's folder, or the executable's when jitune is
/// linked statically. Empty when it cannot be found.
std::filesystem::path module_dir();

/// Folders searched for shipped caches (*.sqlite), in order, for a module in `dir`: `dir/shipped` (the build
/// tree's top, the Python package), `dir/../shipped` (build-tree subfolders such as tests/ and capi/) and
/// `dir/../share/jitune` (an install prefix's bin/ or lib/).
std::vector<std::filesystem::path> shipped_dirs_for(const std::filesystem::path& dir);

/// Paths tried for the tuner's worker, in order, for a module in `dir`: `dir/jitune-worker`,
/// `dir/../jitune-worker` and `dir/../libexec/jitune/jitune-worker`.
std::vector<std::filesystem::path> worker_paths_for(const std::filesystem::path& dir);

}  // namespace jitune
