// Config text form: "name=value" items joined by ',' with names sorted.
#include "templates/config.hpp"

#include <charconv>

#include <jitune/error.hpp>

namespace jitune {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

}  // namespace

Config Config::parse(std::string_view text) {
  Config config;
  std::string_view rest = trim(text);
  if (rest.empty()) return config;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw InvalidArgument("config '" + std::string(text) + "': item '" + std::string(item) +
                            "' is not name=value; write e.g. 'block=256,pack=4'");
    std::string_view name = trim(item.substr(0, eq));
    std::string_view value = trim(item.substr(eq + 1));
    std::int64_t number = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (!valid_name(name) || ec != std::errc() || end != value.data() + value.size())
      throw InvalidArgument("config '" + std::string(text) + "': item '" + std::string(item) +
                            "' needs a parameter name and an integer value, e.g. 'pack=4'");
    if (!config.values_.emplace(std::string(name), number).second)
      throw InvalidArgument("config '" + std::string(text) + "' names '" + std::string(name) + "' twice");
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return config;
}

std::string Config::text() const {
  std::string out;
  for (const auto& [name, value] : values_) {
    if (!out.empty()) out += ',';
    out += name;
    out += '=';
    out += std::to_string(value);
  }
  return out;
}

void Config::throw_missing(std::string_view name) const {
  throw InvalidArgument("config '" + text() + "' has no parameter '" + std::string(name) + "'");
}

std::int64_t Config::at(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw_missing(name);
  return it->second;
}

std::int64_t* Config::slot(std::string_view name) {
  auto it = values_.find(name);
  if (it == values_.end()) throw_missing(name);
  return &it->second;
}

std::optional<std::int64_t> Config::find(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

}  // namespace jitune
