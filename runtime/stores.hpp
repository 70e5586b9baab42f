// Store layering: where the user cache and the shipped caches are, how the user cache is opened when it is
// not writable, and the validator that imports and merges check incoming records with.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/store.hpp"

namespace jitune {

/// Folder of the default user cache: $JITUNE_CACHE_DIR, else $XDG_CACHE_HOME/jitune, else $HOME/.cache/jitune,
/// else (HOME unset) the account's home from the password database, else a folder of this user's own under
/// the temp dir, `<tmp>/jitune-<uid>`, created with mode 0700 and used only when it is a real folder owned by
/// this user that nobody else can write; when it is not, a fresh private folder (mkdtemp) for this process.
/// Throws StoreError only when no private folder can be made at all.
std::filesystem::path default_cache_dir();
/// `base`/jitune-<uid> when it is this user's own folder that nobody else can write (created 0700 when missing),
/// else a private mkdtemp folder under `base`, made once per process, with default_cache_dir_note() saying why.
/// default_cache_dir()'s last resort, with `base` the temp dir.
std::filesystem::path private_cache_dir_under(const std::filesystem::path& base);
/// Why default_cache_dir() could not use `<tmp>/jitune-<uid>` (someone else's, a link, writable by others) and
/// took a private folder whose results are not kept; empty when it did not have to.
std::string default_cache_dir_note();
/// Shipped cache files: those named by $JITUNE_SHIPPED_CACHES, then the *.sqlite files of the folders
/// shipped_dirs() names (found relative to the jitune binary or its package, so installs can move), each file
/// once.
std::vector<std::filesystem::path> builtin_shipped_caches();

/// Opens the user cache read-write; when that fails, read-only if the file is readable; else nullptr. Every
/// step that did not work adds a note saying what and what to do. Never creates, deletes or rewrites a file
/// it cannot understand.
std::unique_ptr<cache::Store> open_user_store(const std::filesystem::path& path,
                                              std::vector<std::string>& notes);

/// Times no GPU can beat: a kernel launch and its completion take at least kLaunchFloorUs, and no GPU moves data
/// (its L2 included) faster than kPeakBytesPerSecond (H100: HBM3 3.35 TB/s, L2 under 12 TB/s).
inline constexpr double kLaunchFloorUs = 0.5;
inline constexpr double kPeakBytesPerSecond = 40e12;

/// What is wrong with an incoming record as the family registry sees it: unknown family, non-canonical
/// signature, config outside the family's space, or a time below what a GPU could physically do (the launch
/// floor, or the problem's bytes moved at kPeakBytesPerSecond); empty when nothing. The validator
/// Store::import_jsonl and merge_from take.
std::string check_with_registry(const cache::Record& record);

}  // namespace jitune
