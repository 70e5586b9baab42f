// Space enumeration and membership.
#include "templates/space.hpp"

#include <algorithm>

namespace jitune {

std::uint64_t Space::size() const noexcept {
  std::uint64_t n = 1;
  for (const Param& p : params_) n *= p.values.size();
  return params_.empty() ? 0 : n;
}

std::vector<Config> Space::enumerate() const {
  std::vector<Config> out;
  if (params_.empty()) return out;
  std::vector<std::size_t> index(params_.size(), 0);
  while (true) {
    Config c;
    for (std::size_t i = 0; i < params_.size(); ++i) c.set(params_[i].name, params_[i].values[index[i]]);
    out.push_back(std::move(c));
    std::size_t i = params_.size();
    while (i > 0) {
      --i;
      if (++index[i] < params_[i].values.size()) break;
      index[i] = 0;
      if (i == 0) return out;
    }
  }
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
  for (const auto& entry : config.values()) {
    const std::string& name = entry.first;
    const bool known = std::any_of(params_.begin(), params_.end(), [&](const Param& p) { return p.name == name; });
    if (!known) return "unknown parameter '" + name + "'";
  }
  return {};
}

bool Space::contains(const Config& config) const { return why_not_contained(config).empty(); }

}  // namespace jitune
