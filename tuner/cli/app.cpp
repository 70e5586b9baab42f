// The jitune command line: options, subcommands, dispatch to the commands.
#include "tuner/cli/app.hpp"

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string_view>

#include <jitune/error.hpp>

#include "templates/family.hpp"

namespace jitune::cli {
namespace {

// A CLI11 check for whole numbers >= `minimum`, with a message in words (CLI11's own quotes a range up to 1.8e308).
CLI::Validator at_least(long long minimum, const std::string& what) {
  return CLI::Validator(
      [minimum, what](std::string& text) -> std::string {
        std::size_t used = 0;
        long long value = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || used == 0 || value < minimum)
          return "'" + text + "' is not " + what + " (a whole number >= " + std::to_string(minimum) + ")";
        return {};
      },
      ">= " + std::to_string(minimum));
}

// A CLI11 check for a number of seconds > 0, with a message in words (CLI11's PositiveNumber quotes 1.8e308 too).
CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::size_t used = 0;
        double value = 0;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || used == 0 || !(value > 0) || !std::isfinite(value))
          return "'" + text + "' is not a number of seconds (a number > 0, e.g. 30 or 2.5)";
        return {};
      },
      "> 0");
}

}  // namespace

void CliApp::add_problem_options(CLI::App& parent, FamilyOptions& into, const std::string& what) {
  for (const Family* f : families()) {
    const std::string name(f->name());
    CLI::App* sub = parent.add_subcommand(name, what + " for the " + name + " family");
    sub->fallthrough();  // --json, --dry-run, ... may follow the family name
    for (const auto& opt : f->problem_options()) sub->add_option("--" + opt.name, into.values[name][opt.name], opt.help);
    into.subs[name] = sub;
  }
}

std::map<std::string, std::string> CliApp::given(CLI::App* sub, const std::map<std::string, std::string>& values) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : values)
    if (sub->count("--" + k) > 0) out[k] = v;
  return out;
}

std::pair<std::string, std::map<std::string, std::string>> CliApp::chosen(const FamilyOptions& f) const {
  for (const auto& [name, sub] : f.subs)
    if (*sub) return {name, given(sub, f.values.at(name))};
  return {};
}

CliApp::CliApp() {
  app_.require_subcommand(1);
  app_.fallthrough();
  app_.allow_extras();  // parse() names what nobody took (a wrong family name gets the family list)
  app_.set_version_flag("--version", "jitune " JITUNE_VERSION);
  app_.add_flag("--json", common_.json, "machine-readable JSON on stdout");
  app_.add_option("--cache", common_.cache, "user tuning cache file (default $JITUNE_CACHE_DIR/tuning.sqlite or "
                                            "~/.cache/jitune/tuning.sqlite)");
  app_.add_flag("--no-shipped", common_.no_shipped, "ignore the shipped (pre-tuned) caches");
  app_.add_option("--device", common_.device, "CUDA device ordinal")->check(at_least(0, "a CUDA device ordinal"));
  app_.add_option("--device-name", common_.device_name, "explain for this device from the caches' records, without "
                                                        "a GPU (e.g. 'NVIDIA H100 80GB HBM3'; default: the only one)");

  devices_ = app_.add_subcommand("devices", "list CUDA devices and their facts");

  TuneArgs& t = tune_args_;
  tune_ = app_.add_subcommand("tune", "tune one problem (jitune tune elementwise --expr ... --dtype ... --n ...) or a "
                                      "suite (jitune tune --suite default)");
  tune_->fallthrough();
  tune_->add_option("--suite", t.suite, "tune a named suite of public cases")->check(CLI::IsMember({"default"}));
  tune_->add_option("--family", t.only_families, "with --suite: only these families");
  tune_->add_option("--strategy", t.strategy, "exhaustive (every legal config), random (the default and a sample of "
                                              "--budget) or guided (the default and configs tuned for nearby problems "
                                              "or on other GPUs, then rounds of neighbours of the fastest so far)")
      ->check(CLI::IsMember({"exhaustive", "random", "guided"}));
  tune_->add_option("--effort", t.effort, "shorthand for a strategy: quick (guided, a quarter of the legal configs, "
                                          "at least 8), default (today: exhaustive) or exhaustive")
      ->check(CLI::IsMember({"quick", "default", "exhaustive"}));
  tune_->add_option("--budget", t.budget, "random and guided strategies: candidates to try per problem, the default "
                                          "included (guided default: a quarter of the legal configs, at least 8)")
      ->check(at_least(1, "a candidate count"));
  tune_->add_option("--time", t.time_s, "guided strategy: seconds per problem after which no new search round starts "
                                        "(the round under way finishes)")
      ->check(positive_seconds());
  tune_->add_option("--seed", t.seed, "seed for inputs and sampling (default: fresh)");
  tune_->add_option("--min-time-ms", t.min_time_ms, "minimum timed milliseconds per candidate")
      ->check(CLI::Range(0.01, 10000.0));
  tune_->add_option("--threads", t.threads, "NVRTC compile threads (default: all cores)");
  tune_->add_flag("--dry-run", t.dry_run, "compile the whole space with NVRTC (no GPU needed) and report registers / "
                                          "spills per config");
  tune_->add_option("--arch", t.arch, "dry run target architecture")->check([](const std::string& a) {
    const bool ok = a.size() >= 5 && a.size() <= 7 && a.rfind("sm_", 0) == 0 &&
                    a.find_first_not_of("0123456789", 3) == std::string::npos;
    return ok ? std::string() : "expected sm_XY, e.g. sm_90";
  });
  tune_->add_flag("--no-store", t.no_store, "do not write results to the cache");
  tune_->add_option("--l2", t.l2, "how repetitions see the L2: auto (warm back-to-back below 4x L2, single launches "
                                  "above), warm, or flush (single launches, L2 flushed before each)")
      ->check(CLI::IsMember({"auto", "warm", "flush"}));
  tune_->add_flag("--in-process", t.in_process, "measure candidates in this process instead of a worker process "
                                                "(a faulting candidate then ends the run)");
  tune_->add_option("--shard", t.shard, "with --suite: tune only shard i of N (i/N, from 0), or 'auto' from a Slurm "
                                        "job array or RANK / WORLD_SIZE; every shard computes the same split");
  tune_->add_option("--devices", t.devices, "with --suite: tune on these GPUs of this host at once, 'all' or "
                                            "ordinals (0,1): a worker process per GPU takes a shard, the stores are "
                                            "merged into the cache at the end");
  tune_->add_option("--compile-share", t.compile_share,
                    "a folder of compiled programs shared with the other tuner processes of this run, e.g. the "
                    "--shard tasks of a Slurm array on a shared file system: a program is compiled once and read back "
                    "by the others (--devices gives its workers one)");
  tune_->add_option("--claims", t.claims,
                    "with --shard: a folder of work claims shared with the other shards' processes of this run (a "
                    "fresh folder per run, on a file system they all see): each case is claimed before it is tuned, "
                    "and a process done with its shard tunes the others' cases nobody has started (--devices gives "
                    "its workers one)");
  tune_->add_flag("--plan", t.plan, "with --suite: list the work items this shard would tune (estimated costs) and "
                                    "stop: no GPU, no compile");
  tune_->add_flag("--missing", t.missing, "with --suite: only the cases the caches do not serve exactly on this GPU "
                                          "(never tuned here, or tuned with a template that has changed since); with "
                                          "--plan and --device-name NAME, without a GPU");
  tune_->add_option("--signature", t.signature, "problem signature instead of problem options");
  tune_->add_option("--configs", t.configs, "time only these configs (';' between them) and the default, side by "
                                            "side, e.g. 'block=256,pack=4,unroll=1,waves=32;block=512,...'");
  add_problem_options(*tune_, tune_families_, "tune a problem");

  explain_ = app_.add_subcommand("explain", "which config a call would use, from which level, and its time");
  explain_->fallthrough();
  explain_->add_option("--signature", explain_signature_, "problem signature instead of problem options");
  explain_->add_option("--suite", explain_suite_, "explain every case of a suite (a table)")
      ->check(CLI::IsMember({"default"}));
  add_problem_options(*explain_, explain_families_, "explain a problem");
  explain_->require_subcommand(0, 1);

  warmup_ = app_.add_subcommand("warmup", "compile the kernel each default-suite case would run into the binary "
                                          "folder, so a new process's first call loads it without NVRTC (no GPU "
                                          "needed: without one, for --device-name or --all-devices)");
  warmup_->add_option("--suite", warmup_suite_, "the suite (default)")->check(CLI::IsMember({"default"}))->required();
  warmup_->add_option("--family", warmup_args_.only_families, "only these families");
  warmup_->add_option("--into", warmup_args_.into, "binary folder to fill (default: the runtime's, <user cache "
                                                   "folder>/kernels)");
  warmup_->add_flag("--all-devices", warmup_args_.all_devices, "without a GPU: every device the caches hold "
                                                              "records for (the build uses it for shipped kernels)");
  warmup_->add_option("--threads", warmup_args_.threads, "NVRTC compile threads (default: all cores)");
  warmup_->add_flag("--quiet", warmup_args_.quiet, "print only the summary line and failures");

  add_cache_commands();
}

void CliApp::add_cache_commands() {
  cache_ = app_.add_subcommand("cache", "inspect and move tuning caches");
  cache_->require_subcommand(1);
  cache_->fallthrough();
  list_ = cache_->add_subcommand("list", "list the tuned records");
  list_->add_option("--family", list_family_, "only this family");
  show_ = cache_->add_subcommand("show", "a problem's record and every measured candidate");
  show_->fallthrough();
  show_->add_option("--signature", show_signature_, "problem signature instead of problem options");
  add_problem_options(*show_, show_families_, "show a problem");
  show_->require_subcommand(1);
  export_ = cache_->add_subcommand("export", "write every record as JSON Lines (one record a line)");
  export_->add_option("file", file_, "output .jsonl file (only a regular file is replaced)")->required();
  export_->add_flag("--force", force_, "replace a symbolic link at the path (the link itself, not its target)");
  export_->add_flag("--current", current_, "only the records this build can serve: records of a changed template "
                                           "(stale) or an unknown family are left out (refreshing a shipped file)");
  import_ = cache_->add_subcommand("import", "read JSON Lines records (validated; new keys added, stored records kept "
                                             "unless --trust)");
  import_->add_option("file", file_, "input .jsonl file")->required()->check(CLI::ExistingFile);
  auto* trust = import_->add_flag("--trust", trust_, "let a faster incoming record replace a stored one (its time is "
                                                     "taken on faith: it was measured elsewhere)");
  import_->add_flag("--verify", verify_, "re-time each record of this GPU here (its config beside the stored "
                                         "winner and the default) and store what wins here (needs the GPU)")
      ->excludes(trust);
  merge_ = cache_->add_subcommand("merge", "merge other SQLite caches, in order (new keys added, stored records kept "
                                           "unless --trust or --majority)");
  merge_->add_option("files", merge_files_, "other .sqlite caches")->required()->check(CLI::ExistingFile);
  auto* merge_trust = merge_->add_flag("--trust", trust_, "let a faster incoming record replace a stored one");
  merge_->add_flag("--majority", majority_,
                   "repeated tunings of the same keys (shards, reruns): per key the stored and incoming records "
                   "vote; the config most of them chose among those within --noise of the fastest wins")
      ->excludes(merge_trust);
  merge_->add_option("--noise", merge_noise_, "with --majority: relative time within which configs tie (default 0.03)")
      ->check(CLI::Range(0.0, 0.5));
  revalidate_ = cache_->add_subcommand("revalidate", "re-time each stored winner and its best runners-up on this "
                                                     "device, driver and toolkit; update the records (no full re-tune)");
  revalidate_->add_option("--family", list_family_, "only this family");
  revalidate_->add_option("--runners-up", runners_up_, "runners-up re-timed with each winner")->check(CLI::Range(0, 16));
  paths_ = cache_->add_subcommand("paths", "where this jitune finds the user cache, the shipped caches and the "
                                          "tuner's worker (no GPU needed)");
}

namespace {

std::string family_list() {
  std::string out;
  for (const Family* f : families()) out += (out.empty() ? "" : ", ") + std::string(f->name());
  return out;
}

}  // namespace

int CliApp::fail(int code, const std::string& kind, const std::string& message, bool print) const {
  if (!print) return code;
  if (json_requested_) {
    std::cout << nlohmann::json{{"error", {{"exit_code", code}, {"kind", kind}, {"message", message}}}}.dump(2)
              << "\n";
  } else {
    // Each thing said once: messages that already name jitune ("jitune store ...") get no second prefix.
    std::cerr << (message.rfind("jitune", 0) == 0 ? "" : "jitune: ") << message << "\n";
  }
  return code;
}

std::optional<int> CliApp::parse(int argc, const char* const* argv, bool print) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--json") json_requested_ = true;  // errors before parsing finishes too
  try {
    app_.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return print ? app_.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    if (std::optional<int> code = unknown_name(print)) return *code;
    return fail(kExitUsage, "usage", std::string(e.what()) + "; run with --help for the commands and options", print);
  }
  if (std::optional<int> code = unknown_name(print)) return *code;
  const std::vector<std::string> extra = app_.remaining(true);
  if (!extra.empty()) {
    std::string words;
    for (const std::string& w : extra) words += (words.empty() ? "" : " ") + w;
    return fail(kExitUsage, "usage", "unexpected argument(s): " + words + "; run with --help", print);
  }
  if (*tune_) {
    tune_args_.argv.assign(argv, argv + argc);
    auto [family, options] = chosen(tune_families_);
    tune_args_.family = family;
    tune_args_.problem = options;
    if (family.empty() && tune_args_.suite.empty())
      return fail(kExitUsage, "usage",
                  "jitune tune: name a family (jitune tune elementwise --expr 'z = x * y' --dtype float32 --n "
                  "1048576) or a suite (jitune tune --suite default)",
                  print);
    if (std::string why = ignored_tune_options(); !why.empty()) return fail(kExitUsage, "usage", why, print);
    tune_args_.strategy = resolved_strategy();
  }
  return std::nullopt;
}

int CliApp::report(const std::exception& e) const {
  if (dynamic_cast<const NoDevice*>(&e)) return fail(kExitNoDevice, "no_device", std::string("no GPU: ") + e.what(), true);
  const char* kind = dynamic_cast<const CompileError*>(&e)       ? "compile"
                     : dynamic_cast<const StoreError*>(&e)      ? "store"
                     : dynamic_cast<const InvalidArgument*>(&e) ? "invalid_argument"
                     : dynamic_cast<const CudaError*>(&e)       ? "cuda"
                                                                : "error";
  return fail(kExitError, kind, e.what(), true);
}

std::optional<int> CliApp::unknown_name(bool print) const {
  // Arguments nobody took: a first word that is no command, or after tune / explain / cache show a word that is no
  // family, is a wrong name: say which names there are.
  const std::vector<std::string> extra = app_.remaining(true);
  if (extra.empty() || extra.front().rfind("-", 0) == 0) return std::nullopt;
  const std::string& word = extra.front();
  if (!*devices_ && !*tune_ && !*explain_ && !*cache_ && !*warmup_)
    return fail(kExitUsage, "usage",
                "unknown command '" + word + "'; the commands are devices, tune, explain, warmup and cache", print);
  if (*cache_ && cache_->get_subcommands([](const CLI::App* sub) { return sub->parsed(); }).empty())
    return fail(kExitUsage, "usage", "unknown cache command '" + word + "'; they are list, show, export, import, "
                "merge, revalidate and paths", print);
  if ((*tune_ || *explain_ || *show_) && !find_family(word))
    return fail(kExitError, "invalid_argument", "unknown family '" + word + "'; the families are " + family_list(),
                print);
  return std::nullopt;
}

std::string CliApp::resolved_strategy() const {
  const std::string& effort = tune_args_.effort;
  if (effort.empty()) return tune_args_.strategy;
  return effort == "quick" ? "guided" : "exhaustive";
}

std::string CliApp::ignored_tune_options() const {
  const TuneArgs& t = tune_args_;
  const auto given = [&](const char* option) { return tune_->count(option) > 0; };
  if (given("--effort") && given("--strategy"))
    return "jitune tune: --effort " + t.effort + " is a shorthand for a strategy (quick: guided; default and "
           "exhaustive: exhaustive), and --strategy names one too; give one of them";
  const std::string strategy = resolved_strategy();
  if (given("--arch") && !t.dry_run) return "jitune tune: --arch names the target of a --dry-run compile; add --dry-run or drop it";
  if (t.dry_run)
    for (const char* option : {"--no-store", "--l2", "--in-process", "--min-time-ms", "--configs", "--compile-share"})
      if (given(option))
        return std::string("jitune tune: ") + option + " has no effect with --dry-run (nothing is timed or stored); drop one of them";
  if (given("--budget") && strategy != "random" && strategy != "guided")
    return "jitune tune: --budget is the random or guided strategy's candidate count; add --strategy random, "
           "--strategy guided or --effort quick, or drop it";
  if (given("--time") && strategy != "guided")
    return "jitune tune: --time bounds the rounds of the guided search (the other strategies time their whole "
           "list); add --strategy guided or --effort quick, or drop it";
  if (strategy == "guided" && t.dry_run)
    return "jitune tune: --dry-run compiles without timing, and the guided search chooses by timings; use --strategy "
           "random --budget N to compile a sample, or drop the guided strategy";
  if (strategy == "guided" && given("--configs"))
    return "jitune tune: --configs times exactly the listed configs, which leaves the guided search nothing to "
           "choose; drop --configs or the guided strategy";
  if ((given("--shard") || t.plan) && t.suite.empty())
    return std::string("jitune tune: ") + (t.plan ? "--plan" : "--shard") +
           " works on a suite; add --suite default (one problem is one work item)";
  if (t.plan && t.dry_run) return "jitune tune: --plan lists the work and stops; drop --dry-run or --plan";
  if (t.plan && (given("--claims") || given("--compile-share")))
    return "jitune tune: --plan lists a shard's own cases and stops, so --claims and --compile-share have no effect; "
           "drop them or --plan";
  if (t.missing && t.suite.empty())
    return "jitune tune: --missing picks the cases of a suite that the caches do not serve exactly; add --suite default";
  if (t.missing && !common_.device_name.empty() && !t.plan && !t.dry_run)
    return "jitune tune: --device-name names a device to plan for without a GPU; a tuning run tunes the GPU it runs on "
           "(--device N): drop --device-name, or add --plan";
  if (given("--devices")) {
    if (t.suite.empty())
      return "jitune tune: --devices shares a suite's cases among GPUs; add --suite default (one problem runs on one "
             "GPU: --device)";
    if (given("--shard"))
      return "jitune tune: --devices gives each GPU its shard of the suite itself; drop --shard (or run one process "
             "per shard with --device)";
    if (t.dry_run) return "jitune tune: --dry-run compiles without a GPU; drop --devices";
    if (given("--claims") || given("--compile-share"))
      return "jitune tune: --devices gives its workers their own claims and compile folders; drop --claims and "
             "--compile-share";
    if (given("--configs")) return "jitune tune: --configs times one problem's configs; drop --devices";
  }
  if (given("--family") && t.suite.empty())
    return "jitune tune: --family filters a suite; add --suite default, or name the family as the subcommand";
  // `--family a b` reads b as the family subcommand when b names one (CLI11 stops a list at a subcommand).
  if (!t.suite.empty())
    for (const auto& [name, sub] : tune_families_.subs)
      if (*sub)
        return "jitune tune: --suite tunes a suite, but '" + name +
               "' was read as a family subcommand; filter the suite with one --family per family (--family a "
               "--family " + name + ")";
  return {};
}

void CliApp::check_problem() const {
  const auto check = [](const FamilyOptions& f, const std::string& signature) {
    for (const auto& [name, sub] : f.subs)
      if (*sub) {
        const Family& fam = family(name);
        auto problem = signature.empty() ? fam.make_problem(given(sub, f.values.at(name))) : fam.parse_problem(signature);
        (void)problem->signature();
      }
  };
  if (*tune_) check(tune_families_, tune_args_.signature);
  if (*explain_) check(explain_families_, explain_signature_);
  if (*show_) check(show_families_, show_signature_);
}

int CliApp::run() {
  try {
    if (*devices_) return devices(common_);
    if (*tune_) return tune(common_, tune_args_);
    if (*warmup_) {
      if (warmup_args_.all_devices && !common_.device_name.empty())
        throw InvalidArgument("jitune warmup: --all-devices and --device-name both name devices; give one");
      return warmup(common_, warmup_args_);
    }
    if (*explain_) {
      auto [family, options] = chosen(explain_families_);
      if (family.empty()) {
        if (explain_suite_.empty()) throw InvalidArgument("jitune explain: name a family and its problem, or --suite default");
        return explain_suite(common_);
      }
      return explain(common_, family, options, explain_signature_);
    }
    if (*cache_) {
      if (*list_) return cache_list(common_, list_family_);
      if (*show_) {
        auto [family, options] = chosen(show_families_);
        return cache_show(common_, family, options, show_signature_);
      }
      if (*export_) return cache_export(common_, file_, force_, current_);
      if (*import_) return verify_ ? cache_import_verified(common_, file_) : cache_import(common_, file_, trust_);
      if (*merge_) return cache_merge(common_, merge_files_, trust_, majority_ ? merge_noise_ : -1.0);
      if (*revalidate_) return cache_revalidate(common_, list_family_, runners_up_);
      if (*paths_) return cache_paths(common_);
    }
  } catch (const std::exception& e) {
    return report(e);
  }
  return fail(kExitUsage, "usage", "no command given; run with --help", true);
}

}  // namespace jitune::cli
