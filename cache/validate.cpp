// Validation of incoming records against the family registry (import, merge).
#include "cache/store.hpp"
#include "templates/family.hpp"

namespace jitune::cache {

std::string validate_with_registry(const Record& r) {
  const Family* f = find_family(r.key.family);
  if (!f) return "unknown family '" + r.key.family + "'";
  try {
    auto problem = f->parse_problem(r.key.signature);
    if (problem->signature() != r.key.signature)
      return "signature '" + r.key.signature + "' is not canonical (expected '" + problem->signature() + "')";
    const Config c = Config::parse(r.config);
    std::string why = f->space().why_not_contained(c);
    if (!why.empty()) return "config " + r.config + " is outside the " + r.key.family + " space: " + why;
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace jitune::cache
