// Host-side output comparison (the device-side twin is templates/common/tuner_kernels.cuh).
#include <cmath>
#include <cstdio>

#include "templates/family.hpp"
#include "templates/host_float.hpp"

namespace jitune {

std::string CompareResult::describe(std::uint64_t count, const OutputCheck& check) const {
  if (ok()) return {};
  char buf[256];
  std::snprintf(buf, sizeof buf, "%llu of %llu elements differ; first at %llu: got %.9g, expected %.9g (%s, rtol %g, atol %g)",
                static_cast<unsigned long long>(mismatches), static_cast<unsigned long long>(count),
                static_cast<unsigned long long>(first_index), got, expected,
                std::string(dtype_name(check.dtype)).c_str(), check.rtol, check.atol);
  return buf;
}

CompareResult compare_host(const OutputCheck& check, const void* got, const void* expected, std::uint64_t count) {
  CompareResult r;
  for (std::uint64_t i = 0; i < count; ++i) {
    const double g = load_element(check.dtype, got, i);
    const double e = load_element(check.dtype, expected, i);
    bool bad;
    if (std::isnan(e) || std::isnan(g) || std::isinf(e) || std::isinf(g)) {
      bad = !(std::isnan(e) && std::isnan(g)) && g != e;
    } else {
      const double diff = std::fabs(g - e);
      bad = diff > check.atol + check.rtol * std::fabs(e);
      const double scale = std::fmax(std::fabs(e), check.rtol > 0 ? check.atol / check.rtol : 1.0);
      if (scale > 0) r.max_rel_error = std::fmax(r.max_rel_error, diff / scale);
    }
    if (bad) {
      if (r.mismatches == 0) {
        r.first_index = i;
        r.got = g;
        r.expected = e;
      }
      ++r.mismatches;
    }
  }
  return r;
}

}  // namespace jitune
