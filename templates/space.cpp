// Space enumeration and membership.
#include "templates/space.hpp"

#include <algorithm>
#include <functional>

#include <jitune/error.hpp>

namespace jitune {
namespace {

// Index of the parameter called `name` in params[0, end), or end.
std::size_t index_of(const std::vector<Param>& params, std::string_view name, std::size_t end) {
  for (std::size_t i = 0; i < end; ++i)
    if (params[i].name == name) return i;
  return end;
}

}  // namespace

bool Param::varies_under(std::int64_t value) const {
  return std::find(is.begin(), is.end(), value) != is.end();
}

Space::Space(std::vector<Param> params) : params_(std::move(params)) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].values.empty()) throw InvalidArgument("space parameter '" + params_[i].name + "' has no values");
    if (!params_[i].when.empty() && index_of(params_, params_[i].when, i) == i)
      throw InvalidArgument("space parameter '" + params_[i].name + "' depends on '" + params_[i].when +
                            "', which is not an earlier parameter");
    if (!params_[i].when.empty() && params_[i].is.empty())
      throw InvalidArgument("space parameter '" + params_[i].name + "' depends on '" + params_[i].when +
                            "' but names no value of it");
  }
}

std::uint64_t Space::size() const noexcept {
  if (params_.empty()) return 0;
  std::uint64_t n = 0;
  std::vector<std::int64_t> chosen(params_.size(), 0);
  std::function<void(std::size_t)> walk = [&](std::size_t i) {
    if (i == params_.size()) {
      ++n;
      return;
    }
    const Param& p = params_[i];
    const bool active = p.when.empty() || p.varies_under(chosen[index_of(params_, p.when, i)]);
    for (std::size_t v = 0; v < (active ? p.values.size() : 1); ++v) {
      chosen[i] = p.values[v];
      walk(i + 1);
    }
  };
  walk(0);
  return n;
}

void Space::for_each(const std::function<void(const Config&)>& visit) const {
  if (params_.empty()) return;
  Config c;
  for (const Param& p : params_) c.set(p.name, p.values.front());
  // Each parameter's slot in c, found once; the walk then writes values in place.
  std::vector<std::int64_t*> slot;
  std::vector<std::size_t> when(params_.size(), params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    slot.push_back(c.slot(params_[i].name));
    if (!params_[i].when.empty()) when[i] = index_of(params_, params_[i].when, i);
  }
  std::function<void(std::size_t)> walk = [&](std::size_t i) {
    if (i == params_.size()) {
      visit(c);
      return;
    }
    const Param& p = params_[i];
    const bool active = when[i] == params_.size() || p.varies_under(*slot[when[i]]);
    for (std::size_t v = 0; v < (active ? p.values.size() : 1); ++v) {
      *slot[i] = p.values[v];
      walk(i + 1);
    }
  };
  walk(0);
}

std::vector<Config> Space::enumerate() const {
  std::vector<Config> out;
  for_each([&](const Config& c) { out.push_back(c); });
  return out;
}

std::string Space::why_not_contained(const Config& config) const {
  for (const Param& p : params_) {
    auto v = config.find(p.name);
    if (!v) return "missing parameter '" + p.name + "'";
    if (std::find(p.values.begin(), p.values.end(), *v) == p.values.end()) {
      std::string list;
      for (auto x : p.values) list += (list.empty() ? "" : ", ") + std::to_string(x);
      return p.name + "=" + std::to_string(*v) + " is not a candidate (allowed: " + list + ")";
    }
  }
  for (const Param& p : params_) {
    if (p.when.empty() || p.varies_under(config.at(p.when)) || config.at(p.name) == p.values.front()) continue;
    std::string where;
    for (std::int64_t v : p.is) where += (where.empty() ? "" : " or ") + p.when + "=" + std::to_string(v);
    return p.name + "=" + std::to_string(config.at(p.name)) + " applies only where " + where + " (here " + p.when +
           "=" + std::to_string(config.at(p.when)) + "); set it to " +
           std::to_string(p.values.front());
  }
  for (const auto& entry : config.values()) {
    const std::string& name = entry.first;
    const bool known = std::any_of(params_.begin(), params_.end(), [&](const Param& p) { return p.name == name; });
    if (!known) return "unknown parameter '" + name + "'";
  }
  return {};
}

bool Space::contains(const Config& config) const { return why_not_contained(config).empty(); }

Config Space::canonical(Config config) const {
  for (const Param& p : params_) {
    if (p.when.empty() || !config.find(p.name)) continue;
    if (const auto w = config.find(p.when); !w || !p.varies_under(*w)) config.set(p.name, p.values.front());
  }
  return config;
}

}  // namespace jitune
