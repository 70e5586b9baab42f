// Tuning on first use: the TuningPolicy the runtime calls for a problem with no exact record.
#include <jitune/tuner.hpp>

#include "tuner/tuner.hpp"

namespace jitune::tuner {
namespace {

class FirstUsePolicy final : public TuningPolicy {
 public:
  explicit FirstUsePolicy(FirstUseOptions options) : options_(options) {}

  std::optional<Explanation> tune(Runtime& runtime, const Family& family, const Problem& problem) override {
    TuneOptions t;
    t.strategy = options_.budget > 0 ? Strategy::kRandom : Strategy::kExhaustive;
    t.budget = options_.budget;
    t.min_time_ms = options_.min_time_ms;
    const TuneReport report = tuner::tune(runtime, family, problem, t);
    if (report.best.empty()) return std::nullopt;
    Explanation x;
    x.family = report.family;
    x.signature = report.signature;
    x.config = report.best.text();
    x.level = MatchLevel::kExact;
    x.source = report.stored ? runtime.options().user_cache.string() : "tuned in this process (not stored)";
    x.matched_signature = report.signature;
    x.matched_device = runtime.device().name;
    x.time_us = report.best_us;
    x.default_time_us = report.default_us;
    x.heuristic_config = report.heuristic.text();
    if (!report.stored)
      x.notes.push_back("tuned on first use, but the result could not be stored: " +
                        (report.store_error.empty() ? std::string("no writable user cache") : report.store_error) +
                        "; it is used in this process only");
    return x;
  }

 private:
  FirstUseOptions options_;
};

}  // namespace

std::shared_ptr<TuningPolicy> tune_on_first_use(FirstUseOptions options) {
  return std::make_shared<FirstUsePolicy>(options);
}

}  // namespace jitune::tuner
