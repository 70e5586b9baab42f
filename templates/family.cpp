// Family helpers shared by every family: signature text and validation.
#include "templates/family.hpp"

namespace jitune {

std::map<std::string, std::string> split_signature(std::string_view signature) {
  std::map<std::string, std::string> items;
  std::string_view rest = signature;
  while (!rest.empty()) {
    std::size_t semi = rest.find(';');
    std::string_view item = rest.substr(0, semi);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw InvalidArgument("problem signature '" + std::string(signature) + "': item '" + std::string(item) +
                            "' is not name=value");
    items[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
    if (semi == std::string_view::npos) break;
    rest = rest.substr(semi + 1);
  }
  return items;
}

std::string join_signature(const std::map<std::string, std::string>& items) {
  std::string out;
  for (const auto& [name, value] : items) {
    if (!out.empty()) out += ';';
    out += name + "=" + value;
  }
  return out;
}

std::unique_ptr<Problem> Family::parse_problem(std::string_view signature) const {
  return make_problem(split_signature(signature));
}

std::string Family::validate(const Problem& problem, const Config& config, const DeviceInfo& device) const {
  std::string why = space().why_not_contained(config);
  if (!why.empty()) return why;
  return check(problem, config, device);
}

}  // namespace jitune
