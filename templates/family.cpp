// Family helpers shared by every family: signature text and validation.
#include "templates/family.hpp"

#include "templates/sources.hpp"

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

std::uint64_t BufferSpec::extent_bytes() const noexcept {
  std::uint64_t last = 0;  // offset of the last element, in elements
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0) return 0;
    std::uint64_t stride = 1;
    if (strides.empty())
      for (std::size_t e = d + 1; e < shape.size(); ++e) stride *= static_cast<std::uint64_t>(shape[e]);
    else
      stride = static_cast<std::uint64_t>(strides[d]);
    last += static_cast<std::uint64_t>(shape[d] - 1) * stride;
  }
  return (last + 1) * dtype_size(dtype);
}

std::uint8_t BufferSpec::stride_alignment() const noexcept {
  std::uint64_t bits = 16;
  const std::uint64_t es = dtype_size(dtype);
  std::uint64_t inner = 1;  // contiguous strides, innermost first
  for (std::size_t d = shape.size(); d-- > 0;) {
    const std::uint64_t stride = strides.empty() ? inner : static_cast<std::uint64_t>(strides[d]);
    if (shape[d] > 1 && stride != 1) bits |= stride * es;
    inner *= static_cast<std::uint64_t>(std::max<std::int64_t>(shape[d], 1));
  }
  return static_cast<std::uint8_t>(bits & (~bits + 1));
}

std::unique_ptr<Problem> Family::parse_problem(std::string_view signature) const {
  return make_problem(split_signature(signature));
}

std::string Family::validate(const Problem& problem, const Config& config, const DeviceInfo& device) const {
  std::string why = space().why_not_contained(config);
  if (!why.empty()) return why;
  return check(problem, config, device);
}

std::vector<std::string> template_hashes(const Family& family) {
  std::vector<std::string> out;
  for (std::string_view name : family.templates()) out.push_back(template_hash(name));
  return out;
}

std::string config_template_hash(const Family& family, const Config& config) {
  return template_hash(family.template_of(config));
}

bool record_current(const Family& family, std::string_view template_hash, std::string_view config) {
  try {
    const Config c = Config::parse(config);
    return family.space().contains(c) && config_template_hash(family, c) == template_hash;
  } catch (const Error&) {
    return false;  // a config this build cannot read belongs to another version of the template
  }
}

}  // namespace jitune
