// Tuning on first use: the TuningPolicy the runtime calls for a problem with no exact record.
#include <jitune/tuner.hpp>

#include "tuner/tuner.hpp"

namespace jitune::tuner {
namespace {

class FirstUsePolicy final : public TuningPolicy {
 public:
  explicit FirstUsePolicy(FirstUseOptions options) : options_(options) {}

  bool tune(Runtime& runtime, const Family& family, const Problem& problem) override {
    TuneOptions t;
    t.strategy = options_.budget > 0 ? Strategy::kRandom : Strategy::kExhaustive;
    t.budget = options_.budget;
    t.min_time_ms = options_.min_time_ms;
    return tuner::tune(runtime, family, problem, t).stored;
  }

 private:
  FirstUseOptions options_;
};

}  // namespace

std::shared_ptr<TuningPolicy> tune_on_first_use(FirstUseOptions options) {
  return std::make_shared<FirstUsePolicy>(options);
}

}  // namespace jitune::tuner
