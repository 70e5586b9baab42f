// The jitune CLI's commands. Each returns the process exit code; only main() decides to exit.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace jitune::cli {

/// Exit codes: 0 success, 1 error, 2 bad usage, 3 no GPU for a command that needs one.
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDevice = 3;

struct Common {
  bool json = false;            ///< Machine-readable output on stdout.
  std::string cache;            ///< User cache file ("" = default).
  bool no_shipped = false;      ///< Ignore the shipped caches.
  int device = 0;
  std::string device_name;      ///< explain without a GPU: the device whose tuned records speak ("" = the only one).
};

struct TuneArgs {
  std::string family;                          ///< Empty with a suite.
  std::map<std::string, std::string> problem;  ///< Family problem options given on the command line.
  std::string signature;                       ///< Alternative to `problem`.
  std::string suite;                           ///< "default".
  std::vector<std::string> only_families;      ///< With a suite: restrict to these families.
  std::string strategy = "exhaustive";          ///< exhaustive, random or guided (after --effort is resolved).
  std::string effort;                          ///< --effort: quick (guided), default or exhaustive; "" = not given.
  std::size_t budget = 0;                      ///< random / guided: candidates to try (0: the strategy's default).
  double time_s = 0;                           ///< guided: no new round after this many seconds per problem.
  std::uint64_t seed = 0;
  double min_time_ms = 2.0;
  unsigned threads = 0;
  bool dry_run = false;
  std::string arch = "sm_90";                  ///< Dry run target.
  bool no_store = false;
  std::string l2 = "auto";                     ///< auto, warm or flush (tuner::L2Mode).
  bool in_process = false;                     ///< Measure in this process, not in a worker.
  std::string configs;                         ///< "a=1,b=2;a=2,b=2": time only these (and the default).
  std::string shard;                           ///< "i/N" or "auto": this process's share of the suite (tuner/shard).
  bool plan = false;                           ///< Print this shard's work items and stop (no GPU, no compile).
  bool missing = false;                        ///< Only the suite cases this device's caches do not serve exactly.
  std::string devices;                         ///< "all" or "0,1,...": one worker per GPU, each a shard (tune_devices).
  std::string compile_share;                   ///< A folder of compiled programs shared with the other workers of a
                                               ///< --devices run (tuner::SharedCompiles); set by tune_devices.
  std::string claims;                          ///< A folder of work claims shared with the other workers of a
                                               ///< --devices run (tuner::WorkClaims): with --shard, this worker
                                               ///< also tunes the others' items nobody has started; set by
                                               ///< tune_devices.
  std::vector<std::string> argv;               ///< The command line as given (the workers get it, adapted).
};

struct WarmupArgs {
  std::vector<std::string> only_families;  ///< Only these families of the suite.
  std::string into;                        ///< Binary folder to fill ("" = the runtime's, <user cache>/kernels).
  bool all_devices = false;                ///< Without a GPU: every device the caches hold records for.
  unsigned threads = 0;                    ///< NVRTC threads (0 = all cores).
  bool quiet = false;                      ///< Only the summary line (and failures).
};

/// The user cache file the command works on: --cache, else tuning.sqlite in the default cache folder.
std::filesystem::path cache_path(const Common& common);
int devices(const Common& common);
int tune(const Common& common, const TuneArgs& args);
/// The GPU ordinals of --devices ("all" or "0,1,..."): no duplicates, each present (unless `plan`: no GPU needed).
std::vector<int> device_list(const std::string& spec, bool plan);
/// tune --suite with --devices: shard k of N in a worker process per GPU (this executable, its own store), the
/// workers' output prefixed by GPU, their stores merged into the user cache at the end (also after a worker died).
/// With --plan each GPU's shard is listed.
int tune_devices(const Common& common, const TuneArgs& args);
int explain(const Common& common, const std::string& family, const std::map<std::string, std::string>& problem,
            const std::string& signature);
int explain_suite(const Common& common);
int cache_list(const Common& common, const std::string& family);
int cache_show(const Common& common, const std::string& family, const std::map<std::string, std::string>& problem,
               const std::string& signature);
/// `current_only`: only the records this build can serve (a known family, its current template).
int cache_export(const Common& common, const std::string& file, bool replace_symlink, bool current_only);
/// Imports / merges records; a stored record is replaced (by a faster incoming one) only with `trust`.
int cache_import(const Common& common, const std::string& file, bool trust);
/// Imports with every record of this device re-timed here first (its config side by side with the stored winner
/// and the default; the winner measured here is stored); records of other devices follow the plain policy.
int cache_import_verified(const Common& common, const std::string& file);
/// Merges `files` in order (trust: a faster incoming record replaces a stored one), or with `majority_noise` >= 0
/// all of them at once by Store::merge_majority.
int cache_merge(const Common& common, const std::vector<std::string>& files, bool trust, double majority_noise);
int cache_revalidate(const Common& common, const std::string& family, int runners_up);
/// Compiles the kernel each default-suite case would run (the config explain decides: on this GPU, or without one
/// for --device-name / every device with --all-devices) into a binary folder, so a later process's first call on
/// that case loads a module instead of running NVRTC. Needs no GPU.
int warmup(const Common& common, const WarmupArgs& args);
/// Where this jitune looks: the user cache (and any note about its folder), the shipped caches it found, the
/// tuner's worker. Needs no GPU.
int cache_paths(const Common& common);

}  // namespace jitune::cli
