// Permute simplification by rule: size-1 dims dropped, adjacent dims merged, the movement size widened.
#include "templates/permute/permute_detail.hpp"

namespace jitune::templates::permute {
namespace {

// Drops size-1 dims and merges runs of input dims that stay adjacent and in order in the output. dims/perm of
// rank n in, the plan's rank, dims and perm out (unit and units untouched). Every extent must be >= 1.
void collapse(int n, const std::int64_t* dims, const int* perm, Plan& out) {
  out.dims.fill(0);
  out.perm.fill(0);
  int index[kMaxRank];
  std::int64_t kept_dims[kMaxRank];
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    index[i] = dims[i] == 1 ? -1 : kept;
    if (dims[i] != 1) kept_dims[kept++] = dims[i];
  }
  int kept_perm[kMaxRank];
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (index[perm[i]] >= 0) kept_perm[m++] = index[perm[i]];
  // Groups of consecutive output dims whose input dims are consecutive and ascending.
  int first[kMaxRank], last[kMaxRank];
  int groups = 0;
  for (int i = 0; i < m; ++i) {
    if (groups > 0 && kept_perm[i] == last[groups - 1] + 1) {
      last[groups - 1] = kept_perm[i];
    } else {
      first[groups] = last[groups] = kept_perm[i];
      ++groups;
    }
  }
  out.rank = groups;
  for (int g = 0; g < groups; ++g) {
    int position = 0;  // the group's place in input order
    for (int h = 0; h < groups; ++h) position += first[h] < first[g];
    std::int64_t extent = 1;
    for (int d = first[g]; d <= last[g]; ++d) extent *= kept_dims[d];
    out.dims[position] = extent;
    out.perm[g] = position;
  }
}

}  // namespace

Plan simplify(std::span<const std::int64_t> shape, std::span<const int> perm, int element_size,
              int max_movement) {
  Plan plan;
  plan.unit = element_size;
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  if (count == 0) return plan;  // rank 0, units 0: nothing to move
  collapse(static_cast<int>(shape.size()), shape.data(), perm.data(), plan);
  plan.units = count;
  if (plan.rank >= 1 && plan.perm[plan.rank - 1] == plan.rank - 1) {
    const std::int64_t last_bytes = plan.dims[plan.rank - 1] * element_size;
    for (int movement = 16; movement > element_size; movement /= 2) {
      if (movement > max_movement || last_bytes % movement != 0) continue;
      Plan widened = plan;
      widened.dims[widened.rank - 1] = last_bytes / movement;
      collapse(widened.rank, widened.dims.data(), widened.perm.data(), plan);
      plan.unit = movement;
      plan.units = count * element_size / movement;
      break;
    }
  }
  return plan;
}

bool is_identity(std::span<const std::int64_t> shape, std::span<const int> perm) noexcept {
  int last = -1;
  for (int d : perm) {
    if (shape[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

}  // namespace jitune::templates::permute
