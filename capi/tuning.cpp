// The C ABI's explain, tune and tuning-cache export / import: what `jitune explain`, `jitune tune` and
// `jitune cache export / import` do, for one problem or one file, through a runtime or a cache path.
#include <algorithm>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cache/store.hpp"
#include "capi/boundary.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/stores.hpp"
#include "tuner/tuner.hpp"

namespace jitune::capi {
namespace {

constexpr std::size_t kTuneResultV0 = JITUNE_V0_SIZE(jitune_tune_result, heuristic_config);
constexpr std::size_t kImportReportV0 = JITUNE_V0_SIZE(jitune_import_report, rejected);
// Rejected records listed in an import's message; the rest are counted.
constexpr std::size_t kIssuesListed = 20;

// The tuning database a cache argument names: the path, or the default user cache (as the CLI's --cache).
std::filesystem::path cache_arg(const char* cache) {
  return cache ? std::filesystem::path(cache) : default_cache_dir() / "tuning.sqlite";
}

std::string explanation_json(const Explanation& x, const Runtime& rt) {
  return nlohmann::json{{"family", x.family},
                        {"signature", x.signature},
                        {"config", x.config},
                        {"level", match_level_name(x.level)},
                        {"source", x.source},
                        {"matched_signature", x.matched_signature},
                        {"matched_device", x.matched_device},
                        {"time_us", x.time_us},
                        {"default_time_us", x.default_time_us},
                        {"heuristic_config", x.heuristic_config},
                        {"device", rt.device().name},
                        {"notes", x.notes}}
      .dump();
}

tuner::TuneOptions tune_options(std::int64_t budget) {
  tuner::TuneOptions o;
  if (budget >= 0) {
    o.strategy = tuner::Strategy::kRandom;
    o.budget = budget > 0 ? static_cast<std::size_t>(budget) : 48;
  }
  return o;
}

jitune_tune_result tune_result(const tuner::TuneReport& r) {
  jitune_tune_result out{};
  out.best_us = r.best_us;
  out.default_us = r.default_us;
  out.candidates = r.candidates.size();
  for (const tuner::CandidateResult& c : r.candidates) out.failed += c.status != "ok" && c.status != "cut";
  out.stored = r.stored ? 1 : 0;
  out.wall_s = r.wall_s;
  copy_fixed(out.config, r.best.text());
  copy_fixed(out.heuristic_config, r.heuristic.text());
  return out;
}

// Records in an exported file: one a line.
std::uint64_t lines_in(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return static_cast<std::uint64_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

// Why an import is an error: how many records were rejected and the first issues.
std::string rejected_message(const cache::ImportReport& r, const std::filesystem::path& file,
                             const char* fn) {
  std::string text = std::string(fn) + ": " + std::to_string(r.rejected) + " record(s) of " + file.string() +
                     " rejected (the valid ones were imported); the import reported:";
  for (std::size_t i = 0; i < r.issues.size() && i < kIssuesListed; ++i) text += "\n  " + r.issues[i].message;
  if (r.issues.size() > kIssuesListed)
    text += "\n  (and " + std::to_string(r.issues.size() - kIssuesListed) + " more)";
  return text;
}

}  // namespace
}  // namespace jitune::capi

using namespace jitune;
using namespace jitune::capi;

extern "C" {

JITUNE_API jitune_status jitune_explain(jitune_runtime* runtime, const char* family, const char* signature,
                                        char* out, size_t out_size, size_t* required) {
  return guarded("jitune_explain", [&](const char* fn) {
    Runtime& rt = runtime_arg(runtime, fn);
    const Explanation x = rt.explain(require(family, fn, "family"), require(signature, fn, "signature"));
    write_text(explanation_json(x, rt), out, out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_tune(jitune_runtime* runtime, const char* family, const char* signature,
                                     int64_t budget, jitune_tune_result* result) {
  return guarded("jitune_tune", [&](const char* fn) {
    Runtime& rt = runtime_arg(runtime, fn);
    const Family& f = jitune::family(require(family, fn, "family"));
    if (result) check_struct_size(result->struct_size, kTuneResultV0, fn, "result");
    const auto problem = f.parse_problem(require(signature, fn, "signature"));
    const tuner::TuneReport report = tuner::tune(rt, f, *problem, tune_options(budget));
    rt.reload();
    if (result) write_struct(result, tune_result(report), kTuneResultV0, fn, "result");
  });
}

JITUNE_API jitune_status jitune_cache_export(const char* cache, const char* file, uint64_t* n_records) {
  return guarded("jitune_cache_export", [&](const char* fn) {
    const std::filesystem::path out = require(file, fn, "file");
    const cache::Store store(cache_arg(cache), cache::OpenMode::kReadOnly);
    store.export_jsonl(out);
    if (n_records) *n_records = lines_in(out);
  });
}

JITUNE_API jitune_status jitune_cache_import(const char* cache, const char* file,
                                             jitune_import_report* report) {
  return guarded("jitune_cache_import", [&](const char* fn) {
    const std::filesystem::path in = require(file, fn, "file");
    if (report) check_struct_size(report->struct_size, kImportReportV0, fn, "report");
    cache::Store store(cache_arg(cache), cache::OpenMode::kReadWrite);
    const cache::ImportReport r = store.import_jsonl(in, check_with_registry);
    if (report) {
      jitune_import_report counts{};
      counts.added = r.added;
      counts.replaced = r.replaced;
      counts.kept = r.kept;
      counts.rejected = r.rejected;
      write_struct(report, counts, kImportReportV0, fn, "report");
    }
    if (r.rejected > 0) throw InvalidArgument(rejected_message(r, in, fn));
  });
}

}  // extern "C"
