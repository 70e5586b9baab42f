// The family registry: adding a family is one line here plus its folder under templates/.
#include "templates/elementwise/elementwise.hpp"
#include "templates/family.hpp"

namespace jitune {

const std::vector<const Family*>& families() {
  static const std::vector<const Family*> all = {
      &elementwise_family(),
  };
  return all;
}

const Family* find_family(std::string_view name) noexcept {
  for (const Family* f : families())
    if (f->name() == name) return f;
  return nullptr;
}

const Family& family(std::string_view name) {
  if (const Family* f = find_family(name)) return *f;
  std::string known;
  for (const Family* f : families()) known += (known.empty() ? "" : ", ") + std::string(f->name());
  throw InvalidArgument("unknown kernel family '" + std::string(name) + "'; known families: " + known);
}

}  // namespace jitune
