// Store layering: where the user cache and the shipped caches are, how the user cache is opened when it is
// not writable, and the validator that imports and merges check incoming records with.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/store.hpp"

namespace jitune {

/// Folder of the default user cache: $JITUNE_CACHE_DIR, else $XDG_CACHE_HOME/jitune, else ~/.cache/jitune.
std::filesystem::path default_cache_dir();
/// Shipped cache files installed with jitune (the build tree's and the install prefix's
/// share/jitune/*.sqlite) and those named by $JITUNE_SHIPPED_CACHES.
std::vector<std::filesystem::path> builtin_shipped_caches();

/// Opens the user cache read-write; when that fails, read-only if the file is readable; else nullptr. Every
/// step that did not work adds a note saying what and what to do. Never creates, deletes or rewrites a file
/// it cannot understand.
std::unique_ptr<cache::Store> open_user_store(const std::filesystem::path& path,
                                              std::vector<std::string>& notes);

/// What is wrong with an incoming record as the family registry sees it (unknown family, non-canonical
/// signature, config outside the family's space); empty when nothing. The validator Store::import_jsonl and
/// merge_from take.
std::string check_with_registry(const cache::Record& record);

}  // namespace jitune
