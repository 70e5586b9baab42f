// Where an installed (or built, or pip-installed) jitune finds its own files: the shipped tuning caches and the
// tuner's worker, relative to the binary that holds jitune's code, never through paths fixed at build time, so
// an install prefix or a Python package can be moved. A program linked with the static libraries of an installed
// CMake package (jitune::runtime) also looks in that package's prefix: the package compiles
// jitune-package-location.cpp into the program, which names where it was found.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace jitune {

/// The folder of the binary holding jitune's code: libjitune.so's folder, or the executable's when jitune is
/// linked statically. Empty when it cannot be found.
std::filesystem::path module_dir();

/// The install prefix of the CMake package a statically linked program was built against; empty when the
/// program was not built through find_package(jitune) (libjitune, the CLI, the build tree, the Python package).
std::filesystem::path package_prefix();

/// Folders searched for shipped caches (*.sqlite), in order: for the module's folder `dir`, `dir/shipped` (the
/// build tree's top, the Python package), `dir/../shipped` (build-tree subfolders such as tests/ and capi/) and
/// `dir/../share/jitune` (an install prefix's bin/ or lib/); then `<package_prefix()>/share/jitune`.
std::vector<std::filesystem::path> shipped_dirs();

/// Paths tried for the tuner's worker, in order: `dir/jitune-worker`, `dir/../jitune-worker` and
/// `dir/../libexec/jitune/jitune-worker` for the module's folder `dir`, then
/// `<package_prefix()>/libexec/jitune/jitune-worker`.
std::vector<std::filesystem::path> worker_paths();

/// The tuner's worker: $JITUNE_WORKER when it is executable (empty when it is set but is not), else the first
/// executable of worker_paths(); empty when none is.
std::filesystem::path find_worker_executable();

}  // namespace jitune
