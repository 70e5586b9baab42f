// jitune: tune kernels offline per device, explain what a call would run, and manage tuning caches.
#include <CLI/CLI.hpp>

#include <iostream>

#include <jitune/error.hpp>

#include "templates/family.hpp"
#include "tuner/cli/commands.hpp"

namespace {

// Adds one --<option> per problem option of every family to `sub`; values land in values[family][option].
void add_problem_options(CLI::App& app, std::map<std::string, std::map<std::string, std::string>>& values,
                         std::map<std::string, CLI::App*>& subs, const std::string& what) {
  for (const jitune::Family* f : jitune::families()) {
    const std::string name(f->name());
    CLI::App* sub = app.add_subcommand(name, what + " for the " + name + " family");
    sub->fallthrough();  // --json, --dry-run, ... may follow the family name
    for (const auto& opt : f->problem_options()) sub->add_option("--" + opt.name, values[name][opt.name], opt.help);
    subs[name] = sub;
  }
}

std::map<std::string, std::string> given(CLI::App* sub, const std::map<std::string, std::string>& values) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : values)
    if (sub->count("--" + k) > 0) out[k] = v;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = jitune::cli;
  CLI::App app{"jitune: NVRTC kernel templates tuned per GPU and problem, results kept in SQLite"};
  app.require_subcommand(1);
  app.fallthrough();
  cli::Common common;
  app.add_flag("--json", common.json, "machine-readable JSON on stdout");
  app.add_option("--cache", common.cache, "user tuning cache file (default $JITUNE_CACHE_DIR/tuning.sqlite or "
                                          "~/.cache/jitune/tuning.sqlite)");
  app.add_flag("--no-shipped", common.no_shipped, "ignore the shipped (pre-tuned) caches");
  app.add_option("--device", common.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);

  CLI::App* devices = app.add_subcommand("devices", "list CUDA devices and their facts");

  cli::TuneArgs targs;
  CLI::App* tune = app.add_subcommand("tune", "tune one problem (jitune tune elementwise --expr ... --dtype ... --n ...)"
                                              " or a suite (jitune tune --suite default)");
  tune->fallthrough();
  tune->add_option("--suite", targs.suite, "tune a named suite of public cases")->check(CLI::IsMember({"default"}));
  tune->add_option("--family", targs.only_families, "with --suite: only these families");
  tune->add_option("--strategy", targs.strategy, "exhaustive or random")->check(CLI::IsMember({"exhaustive", "random"}));
  tune->add_option("--budget", targs.budget, "random strategy: candidates to try")->check(CLI::PositiveNumber);
  tune->add_option("--seed", targs.seed, "seed for inputs and sampling (default: fresh)");
  tune->add_option("--min-time-ms", targs.min_time_ms, "minimum timed milliseconds per candidate")
      ->check(CLI::Range(0.01, 10000.0));
  tune->add_option("--threads", targs.threads, "NVRTC compile threads (default: all cores)");
  tune->add_flag("--dry-run", targs.dry_run, "compile the whole space with NVRTC (no GPU needed) and report "
                                             "registers / spills per config");
  tune->add_option("--arch", targs.arch, "dry run target architecture")->check([](const std::string& a) {
    return a.rfind("sm_", 0) == 0 && a.size() >= 5 ? std::string() : "expected sm_XY, e.g. sm_90";
  });
  tune->add_flag("--no-store", targs.no_store, "do not write results to the cache");
  tune->add_option("--signature", targs.signature, "problem signature instead of problem options");
  std::map<std::string, std::map<std::string, std::string>> tune_values;
  std::map<std::string, CLI::App*> tune_subs;
  add_problem_options(*tune, tune_values, tune_subs, "tune a problem");

  CLI::App* explain = app.add_subcommand("explain", "which config a call would use, from which level, and its time");
  std::string explain_signature;
  explain->fallthrough();
  explain->add_option("--signature", explain_signature, "problem signature instead of problem options");
  std::map<std::string, std::map<std::string, std::string>> explain_values;
  std::map<std::string, CLI::App*> explain_subs;
  add_problem_options(*explain, explain_values, explain_subs, "explain a problem");
  explain->require_subcommand(1);

  CLI::App* cache = app.add_subcommand("cache", "inspect and move tuning caches");
  cache->require_subcommand(1);
  cache->fallthrough();
  std::string list_family, file;
  CLI::App* list = cache->add_subcommand("list", "list the tuned records");
  list->add_option("--family", list_family, "only this family");
  CLI::App* show = cache->add_subcommand("show", "a problem's record and every measured candidate");
  std::string show_signature;
  show->fallthrough();
  show->add_option("--signature", show_signature, "problem signature instead of problem options");
  std::map<std::string, std::map<std::string, std::string>> show_values;
  std::map<std::string, CLI::App*> show_subs;
  add_problem_options(*show, show_values, show_subs, "show a problem");
  show->require_subcommand(1);
  CLI::App* exp = cache->add_subcommand("export", "write every record as JSON Lines (one record a line)");
  exp->add_option("file", file, "output .jsonl file")->required();
  CLI::App* imp = cache->add_subcommand("import", "read JSON Lines records (validated; the faster record of a key stays)");
  imp->add_option("file", file, "input .jsonl file")->required()->check(CLI::ExistingFile);
  CLI::App* merge = cache->add_subcommand("merge", "merge another SQLite cache (the faster record of a key stays)");
  merge->add_option("file", file, "other .sqlite cache")->required()->check(CLI::ExistingFile);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : cli::kExitUsage;
  }

  try {
    if (*devices) return cli::devices(common);
    if (*tune) {
      for (auto& [name, sub] : tune_subs)
        if (*sub) {
          targs.family = name;
          targs.problem = given(sub, tune_values[name]);
        }
      if (targs.family.empty() && targs.suite.empty()) {
        std::cerr << "jitune tune: name a family (jitune tune elementwise --expr 'z = x * y' --dtype float32 --n "
                     "1048576) or a suite (jitune tune --suite default)\n";
        return cli::kExitUsage;
      }
      return cli::tune(common, targs);
    }
    if (*explain)
      for (auto& [name, sub] : explain_subs)
        if (*sub) return cli::explain(common, name, given(sub, explain_values[name]), explain_signature);
    if (*cache) {
      if (*list) return cli::cache_list(common, list_family);
      if (*show)
        for (auto& [name, sub] : show_subs)
          if (*sub) return cli::cache_show(common, name, given(sub, show_values[name]), show_signature);
      if (*exp) return cli::cache_export(common, file);
      if (*imp) return cli::cache_import(common, file);
      if (*merge) return cli::cache_merge(common, file);
    }
  } catch (const jitune::NoDevice& e) {
    std::cerr << "jitune: no GPU: " << e.what() << "\n";
    return cli::kExitNoDevice;
  } catch (const jitune::CompileError& e) {
    std::cerr << "jitune: " << e.what() << "\n";
    return cli::kExitError;
  } catch (const std::exception& e) {
    std::cerr << "jitune: " << e.what() << "\n";
    return cli::kExitError;
  }
  std::cerr << app.help();
  return cli::kExitUsage;
}
