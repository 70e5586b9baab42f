// Shared helpers of the permute family tests (permute_family_test.cpp, permute_kernel_test.cpp): the family,
// a problem from its options, and the PermuteProblem behind a Problem.
#pragma once

#include <memory>
#include <string>

#include "templates/permute/permute.hpp"

namespace jitune::permute_test {

inline const Family& fam() {
  return templates::permute::permute_family();
}

inline std::unique_ptr<Problem> problem(const std::string& dtype, const std::string& shape,
                                        const std::string& perm) {
  return fam().make_problem({{"dtype", dtype}, {"shape", shape}, {"perm", perm}});
}

inline const templates::permute::PermuteProblem& as_permute(const std::unique_ptr<Problem>& p) {
  return static_cast<const templates::permute::PermuteProblem&>(*p);
}

}  // namespace jitune::permute_test
