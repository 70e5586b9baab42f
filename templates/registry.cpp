// The family registry: adding a family is one line here plus its folder under templates/.
#include "templates/conv2d/conv2d.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "templates/family.hpp"
#include "templates/scatter_add/scatter_add.hpp"
#include "templates/permute/permute.hpp"
#include "templates/reduce_rows/reduce_rows.hpp"
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"

namespace jitune {

namespace {

std::vector<const Family*>& registered() {
  static std::vector<const Family*> all = {
      &elementwise_family(),
      &conv2d_family(),
      &scatter_add_family(),
      &permute_family(),
      &upsample_nearest2d_family(),
      &reduce_rows_family(),
  };
  return all;
}

}  // namespace

const std::vector<const Family*>& families() { return registered(); }

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

}  // namespace jitune
