// The dispatcher's decisions: the store key of a problem, the search user store -> shipped stores -> nearest
// tuned problem -> same architecture -> heuristic, the in-memory decision per (family, problem), and adopting
// a tuning policy's winner.
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "runtime/runtime_impl.hpp"
#include "templates/sources.hpp"

namespace jitune {

cache::RecordKey record_key(const Family& family, const Problem& problem, const Config& config,
                            const DeviceInfo& device, const std::string& nvrtc_version) {
  return {std::string(family.name()),
          config_template_hash(family, config),
          problem.signature(),
          device.name,
          device.cc(),
          device.sm_count,
          nvrtc_version};
}

cache::RecordKey Runtime::Impl::record_key(const Family& family, const Problem& problem, const Config& config) const {
  return jitune::record_key(family, problem, config, device, compiler.nvrtc_version());
}

double feature_distance(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(d);
}

namespace {

// One run of the search behind lookup_decision: the stores in order, each record checked for legality here.
class DecisionSearch {
 public:
  DecisionSearch(const Family& family, const Problem& problem, const DeviceInfo& device,
                 const std::string& nvrtc_version, const std::vector<const cache::Store*>& stores)
      : family_(family),
        problem_(problem),
        device_(device),
        stores_(stores),
        key_{std::string(family.name()), {}, problem.signature(), device.name, device.cc(), device.sm_count,
             nvrtc_version},
        hashes_(template_hashes(family)) {
    decision_.explanation.family = key_.family;
    decision_.explanation.signature = key_.signature;
  }

  Decision run() {
    const Config heuristic = family_.heuristic(problem_, device_);
    decision_.explanation.heuristic_config = heuristic.text();
    if (exact() || nearest(MatchLevel::kNearestProblem) || nearest(MatchLevel::kSameArchitecture))
      return std::move(decision_);
    Explanation& x = decision_.explanation;
    decision_.config = heuristic;
    x.config = heuristic.text();
    x.level = MatchLevel::kHeuristic;
    x.source = "heuristic";
    return std::move(decision_);
  }

 private:
  void note(std::string text) { decision_.explanation.notes.push_back(std::move(text)); }

  // A stored config is used only if it is still legal here (the space or the constraints may have changed) and
  // was timed with its kernel's current template.
  bool usable(const cache::Record& r, Config& out) {
    try {
      out = Config::parse(r.config);
    } catch (const Error& e) {
      note("record for " + r.key.signature + " has unreadable config: " + e.what());
      return false;
    }
    if (config_template_hash(family_, out) != r.key.template_hash) {
      note("record config " + r.config + " skipped: it was timed with another version of its kernel template");
      return false;
    }
    std::string why = family_.validate(problem_, out, device_);
    if (!why.empty()) note("record config " + r.config + " skipped: " + why);
    return why.empty();
  }

  void take(const cache::Record& r, const cache::Store* s, MatchLevel level, Config c) {
    Explanation& x = decision_.explanation;
    decision_.config = std::move(c);
    x.config = decision_.config.text();
    x.level = level;
    x.source = s->path().string();
    x.matched_signature = r.key.signature;
    x.matched_device = r.key.device_name;
    x.time_us = r.time_us;
    x.default_time_us = r.default_time_us;
  }

  bool exact() {
    for (const cache::Store* s : stores_) {
      try {
        auto r = s->find_exact(key_.family, hashes_, key_.signature, key_.device_name, key_.cc,
                               key_.sm_count, key_.nvrtc_version);
        Config c;
        if (!r || !usable(*r, c)) continue;
        take(*r, s, MatchLevel::kExact, std::move(c));
        if (r->key.nvrtc_version != key_.nvrtc_version)
          note("tuned with NVRTC " + r->key.nvrtc_version + ", running NVRTC " + key_.nvrtc_version +
               " (jitune cache revalidate re-times it)");
        return true;
      } catch (const Error& e) {
        note(std::string("lookup in ") + s->path().string() + " failed: " + e.what());
      }
    }
    return false;
  }

  std::vector<cache::Record> candidates(const cache::Store& s, MatchLevel level) const {
    if (level == MatchLevel::kNearestProblem)
      return s.find_group(key_.family, hashes_, problem_.group(), key_.device_name, key_.cc,
                          key_.sm_count);
    return s.find_same_arch(key_.family, hashes_, problem_.group(), key_.cc, key_.device_name);
  }

  // The legal record closest to the problem (by feature distance; the same signature first) at `level`.
  bool nearest(MatchLevel level) {
    const std::vector<double> features = problem_.features();
    double best = std::numeric_limits<double>::infinity();
    std::optional<std::pair<cache::Record, const cache::Store*>> pick;
    Config pick_config;
    for (const cache::Store* s : stores_) {
      try {
        for (auto& r : candidates(*s, level)) {
          const double dist =
              r.key.signature == key_.signature ? -1.0 : feature_distance(features, r.features);
          Config c;
          if (dist < best && usable(r, c)) {
            best = dist;
            pick.emplace(std::move(r), s);
            pick_config = std::move(c);
          }
        }
      } catch (const Error& e) {
        note(std::string("lookup in ") + s->path().string() + " failed: " + e.what());
      }
    }
    if (pick) take(pick->first, pick->second, level, std::move(pick_config));
    return pick.has_value();
  }

  const Family& family_;
  const Problem& problem_;
  const DeviceInfo& device_;
  const std::vector<const cache::Store*>& stores_;
  const cache::RecordKey key_;             // without a template hash: the family's templates are hashes_
  const std::vector<std::string> hashes_;  // template_hashes(family_)
  Decision decision_;
};

}  // namespace

Decision lookup_decision(const Family& family, const Problem& problem, const DeviceInfo& device,
                         const std::string& nvrtc_version, const std::vector<const cache::Store*>& stores) {
  return DecisionSearch(family, problem, device, nvrtc_version, stores).run();
}

Decision Runtime::Impl::lookup(const Family& family, const Problem& problem) const {
  std::vector<const cache::Store*> stores;
  if (user_store) stores.push_back(user_store.get());
  for (const auto& s : shipped_stores) stores.push_back(s.get());
  return lookup_decision(family, problem, device, compiler.nvrtc_version(), stores);
}

const Decision& Runtime::Impl::decide(const Family& family, const Problem& problem, bool in_capture) {
  const std::string map_key = std::string(family.name()) + '\n' + problem.signature();
  {
    std::shared_lock lock(mutex_);
    if (auto it = decisions_.find(map_key); it != decisions_.end()) return *it->second;
  }
  auto decision = std::make_unique<Decision>(lookup(family, problem));
  if (decision->explanation.level != MatchLevel::kExact && options.tuning) {
    if (in_capture) refuse_in_capture(std::string(family.name()), problem.signature(), "tune on first use");
    std::lock_guard tune_lock(tune_mutex_);
    try {
      if (std::optional<Explanation> tuned = options.tuning->tune(self, family, problem))
        adopt_tuned(family, problem, std::move(*tuned), *decision);
    } catch (const std::exception& e) {
      decision->explanation.notes.push_back(std::string("tuning on first use failed: ") + e.what());
    }
  }
  std::unique_lock lock(mutex_);
  return *decisions_.try_emplace(map_key, std::move(decision)).first->second;
}

void Runtime::Impl::adopt_tuned(const Family& family, const Problem& problem, Explanation tuned,
                                Decision& decision) const {
  Config config;
  try {
    config = Config::parse(tuned.config);
  } catch (const Error& e) {
    decision.explanation.notes.push_back("tuning on first use returned an unreadable config: " +
                                         std::string(e.what()));
    return;
  }
  if (const std::string why = family.validate(problem, config, device); !why.empty()) {
    decision.explanation.notes.push_back("tuning on first use returned config " + tuned.config +
                                         ", which is not legal here: " + why);
    return;
  }
  tuned.notes.insert(tuned.notes.begin(), decision.explanation.notes.begin(),
                     decision.explanation.notes.end());
  decision.config = std::move(config);
  decision.explanation = std::move(tuned);
}

}  // namespace jitune
