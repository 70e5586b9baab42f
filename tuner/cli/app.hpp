// CliApp: the jitune command line, parsed (CLI11) and executed. Parsing is separate from running so the argument
// handling can be fuzzed without touching a GPU or NVRTC.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <optional>
#include <string>

#include "tuner/cli/commands.hpp"

namespace jitune::cli {

class CliApp {
 public:
  CliApp();
  /// Parses the arguments. Returns nullopt when a command is ready for run(), else the exit code (0 after --help,
  /// kExitUsage on a bad command line). With `print` false nothing is written (fuzzing).
  std::optional<int> parse(int argc, const char* const* argv, bool print = true);
  /// Runs the parsed command and returns the exit code; errors are printed, never thrown.
  int run();
  /// Builds the problem the parsed command names (if any) through its family, throwing InvalidArgument for bad
  /// values; what run() does first, without the rest.
  void check_problem() const;

 private:
  struct FamilyOptions {
    std::map<std::string, std::map<std::string, std::string>> values;
    std::map<std::string, CLI::App*> subs;
  };
  void add_problem_options(CLI::App& parent, FamilyOptions& into, const std::string& what);
  /// `jitune cache` and its subcommands.
  void add_cache_commands();
  /// Reports an error: with --json one object {"error": {exit_code, kind, message}} on stdout, else the message on
  /// stderr (prefixed "jitune: " unless it names jitune already); returns `code`. Silent unless `print`.
  int fail(int code, const std::string& kind, const std::string& message, bool print) const;
  /// The exit for an exception run() caught: its kind from its type, 3 for NoDevice, else 1.
  int report(const std::exception& e) const;
  /// The error exit for a wrong command or family name among the arguments nobody took, if there is one.
  std::optional<int> unknown_name(bool print) const;
  /// Why a tune command line holds an option that would be ignored (--arch without --dry-run, ...); empty if none.
  std::string ignored_tune_options() const;
  /// The tune strategy the command line asks for: --effort's (quick: guided, else exhaustive) when given, else
  /// --strategy's.
  std::string resolved_strategy() const;
  static std::map<std::string, std::string> given(CLI::App* sub, const std::map<std::string, std::string>& values);
  /// The family subcommand chosen under `parent`, and its given options.
  std::pair<std::string, std::map<std::string, std::string>> chosen(const FamilyOptions& f) const;

  CLI::App app_{"jitune: NVRTC kernel templates tuned per GPU and problem, results kept in SQLite"};
  Common common_;
  TuneArgs tune_args_;
  WarmupArgs warmup_args_;
  CLI::App* devices_ = nullptr;
  CLI::App* warmup_ = nullptr;
  CLI::App* tune_ = nullptr;
  CLI::App* explain_ = nullptr;
  CLI::App* cache_ = nullptr;
  CLI::App* list_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* export_ = nullptr;
  CLI::App* import_ = nullptr;
  CLI::App* merge_ = nullptr;
  CLI::App* revalidate_ = nullptr;
  CLI::App* paths_ = nullptr;
  int runners_up_ = 2;
  bool force_ = false, current_ = false, trust_ = false, verify_ = false, majority_ = false;
  std::vector<std::string> merge_files_;
  double merge_noise_ = 0.03;
  bool json_requested_ = false;  ///< --json anywhere on the command line (errors then come as JSON too).
  FamilyOptions tune_families_, explain_families_, show_families_;
  std::string explain_signature_, show_signature_, list_family_, file_, explain_suite_, warmup_suite_;
};

}  // namespace jitune::cli
