// The family registry: adding a family is one line here plus its folder under templates/.
#include "templates/conv2d/conv2d.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "templates/elementwise/views.hpp"
#include "templates/family.hpp"
#include "templates/permute/permute.hpp"
#include "templates/reduce_rows/reduce_rows.hpp"
#include "templates/scatter_add/scatter_add.hpp"
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"

namespace jitune {

namespace {

std::vector<const Family*>& registered() {
  static std::vector<const Family*> all = {
      &elementwise_family(),        &conv2d_family(),      &scatter_add_family(), &permute_family(),
      &upsample_nearest2d_family(), &reduce_rows_family(), &templates::elementwise::elementwise_view_family(),
  };
  return all;
}

}  // namespace

const std::vector<const Family*>& families() {
  return registered();
}

void register_family(const Family& f) {
  if (!find_family(f.name())) registered().push_back(&f);
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

std::string check_tuned_config(std::string_view family_name, std::string_view signature,
                               std::string_view config) {
  const Family* f = find_family(family_name);
  if (!f) return "unknown family '" + std::string(family_name) + "'";
  try {
    auto problem = f->parse_problem(signature);
    if (problem->signature() != signature)
      return "signature '" + std::string(signature) + "' is not canonical (expected '" +
             problem->signature() + "')";
    const Config c = Config::parse(config);
    std::string why = f->space().why_not_contained(c);
    if (!why.empty())
      return "config " + std::string(config) + " is outside the " + std::string(f->name()) + " space: " + why;
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace jitune
