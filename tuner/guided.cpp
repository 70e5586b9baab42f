// Seed ranking and neighbour generation of the guided search.
#include "tuner/guided.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <jitune/error.hpp>

#include "runtime/runtime_impl.hpp"

namespace jitune::tuner {

std::vector<Seed> rank_seeds(const std::vector<cache::Record>& records, const std::string& signature,
                             const std::vector<double>& features, const std::string& device_name,
                             const std::set<Config>& legal, std::size_t max_seeds) {
  std::vector<Seed> ranked;
  for (const cache::Record& r : records) {
    Seed s;
    try {
      s.config = Config::parse(r.config);
    } catch (const Error&) {
      continue;  // a record another version wrote; the lookup reports it, a seed is only a hint
    }
    if (!legal.contains(s.config)) continue;
    s.signature = r.key.signature;
    s.device_name = r.key.device_name;
    s.same_signature = r.key.signature == signature;
    s.other_device = r.key.device_name != device_name;
    s.distance = s.same_signature ? 0.0 : feature_distance(features, r.features);
    ranked.push_back(std::move(s));
  }
  const auto rank = [](const Seed& s) {
    return std::tuple<bool, double, bool, const std::string&, const std::string&, std::string>(
        !s.same_signature, s.distance, s.other_device, s.signature, s.device_name, s.config.text());
  };
  std::sort(ranked.begin(), ranked.end(), [&](const Seed& a, const Seed& b) { return rank(a) < rank(b); });
  std::vector<Seed> out;
  std::set<Config> taken;
  for (Seed& s : ranked) {
    if (out.size() >= max_seeds) break;
    if (taken.insert(s.config).second) out.push_back(std::move(s));
  }
  return out;
}

std::vector<Config> neighbours_at(const Space& space, const Config& center, std::size_t step) {
  std::vector<Config> out;
  if (step == 0) return out;
  for (const Param& p : space.params()) {
    const auto value = center.find(p.name);
    if (!value) continue;
    const auto at = std::find(p.values.begin(), p.values.end(), *value);
    if (at == p.values.end()) continue;
    const auto pos = static_cast<std::size_t>(at - p.values.begin());
    if (pos >= step) {
      Config c = center;
      c.set(p.name, p.values[pos - step]);
      if (Config k = space.canonical(std::move(c)); k != center) out.push_back(std::move(k));
    }
    if (pos + step < p.values.size()) {
      Config c = center;
      c.set(p.name, p.values[pos + step]);
      if (Config k = space.canonical(std::move(c)); k != center) out.push_back(std::move(k));
    }
  }
  return out;
}

std::vector<Config> pair_neighbours(const Space& space, const Config& center) {
  // Per parameter: its position in its value list, or none when the center's value is not a candidate.
  const std::vector<Param>& params = space.params();
  std::vector<std::ptrdiff_t> pos(params.size(), -1);
  for (std::size_t i = 0; i < params.size(); ++i)
    if (const auto value = center.find(params[i].name)) {
      const auto at = std::find(params[i].values.begin(), params[i].values.end(), *value);
      if (at != params[i].values.end()) pos[i] = at - params[i].values.begin();
    }
  const auto moved = [&](std::size_t i, int delta) {
    const std::ptrdiff_t to = pos[i] + delta;
    return pos[i] >= 0 && to >= 0 && to < static_cast<std::ptrdiff_t>(params[i].values.size());
  };
  std::vector<Config> out;
  for (std::size_t i = 0; i < params.size(); ++i)
    for (std::size_t j = i + 1; j < params.size(); ++j)
      for (const int di : {-1, 1})
        for (const int dj : {-1, 1}) {
          if (!moved(i, di) || !moved(j, dj)) continue;
          Config c = center;
          c.set(params[i].name, params[i].values[static_cast<std::size_t>(pos[i] + di)]);
          c.set(params[j].name, params[j].values[static_cast<std::size_t>(pos[j] + dj)]);
          if (Config k = space.canonical(std::move(c)); k != center) out.push_back(std::move(k));
        }
  return out;
}

std::vector<Config> untried_neighbours(const Space& space, const std::vector<Config>& centers,
                                       const std::set<Config>& legal, const std::set<Config>& tried,
                                       std::size_t limit) {
  std::size_t widest = 0;  // no neighbour is farther than the longest value list
  for (const Param& p : space.params()) widest = std::max(widest, p.values.size());
  std::vector<Config> out;
  std::set<Config> taken;
  const auto take = [&](std::vector<Config> tier) {
    for (Config& c : tier) {
      if (out.size() >= limit) return;
      if (legal.contains(c) && !tried.contains(c) && taken.insert(c).second) out.push_back(std::move(c));
    }
  };
  for (std::size_t step = 1; step < widest && out.empty(); ++step)
    for (const Config& center : centers) take(neighbours_at(space, center, step));
  if (out.empty())
    for (const Config& center : centers) take(pair_neighbours(space, center));
  return out;
}

std::size_t default_guided_budget(std::size_t legal) {
  const auto quarter = static_cast<std::size_t>(std::ceil(0.25 * static_cast<double>(legal)));
  return std::min(legal, std::max<std::size_t>(8, quarter));
}

GuidedSearch::GuidedSearch(const Space& space, const std::vector<Config>& legal, std::size_t budget,
                           double time_budget_s, std::vector<Seed> seeds)
    : space_(space), legal_(legal.begin(), legal.end()), time_budget_s_(time_budget_s) {
  if (legal.empty()) throw InvalidArgument("a guided search needs at least one legal config");
  budget_ = std::clamp<std::size_t>(budget > 0 ? budget : default_guided_budget(legal.size()), 1, legal.size());
  first_round_.push_back(legal.front());
  tried_.insert(legal.front());
  for (Seed& s : seeds) {
    if (first_round_.size() >= budget_) break;
    if (!legal_.contains(s.config) || !tried_.insert(s.config).second) continue;
    first_round_.push_back(s.config);
    seeds_.push_back(std::move(s));
  }
  tried_order_ = first_round_;
  round_sizes_.push_back(first_round_.size());
}

void GuidedSearch::record(const Config& config, const std::string& status, double time_us) {
  if (status == "ok") timed_.emplace_back(time_us, config);
}

std::vector<Config> GuidedSearch::centers() const {
  if (timed_.empty()) return tried_order_;
  std::vector<std::pair<double, Config>> fastest = timed_;
  std::stable_sort(fastest.begin(), fastest.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Config> out;
  for (std::size_t k = 0; k < std::min(fastest.size(), kRoundCenters); ++k) out.push_back(fastest[k].second);
  return out;
}

std::vector<Config> GuidedSearch::next_round(double elapsed_s) {
  if (!stopped_.empty()) return {};
  if (tried_.size() >= budget_) {
    stopped_ = "budget";
    return {};
  }
  if (time_budget_s_ > 0 && elapsed_s >= time_budget_s_) {
    stopped_ = "time";
    return {};
  }
  std::vector<Config> round = untried_neighbours(space_, centers(), legal_, tried_, budget_ - tried_.size());
  if (round.empty()) {
    stopped_ = "no untried neighbour";
    return {};
  }
  tried_.insert(round.begin(), round.end());
  tried_order_.insert(tried_order_.end(), round.begin(), round.end());
  round_sizes_.push_back(round.size());
  return round;
}

}  // namespace jitune::tuner
