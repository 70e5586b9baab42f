// conv2d test helper (host and GPU tests): configs covering every value of the knobs of the space or of one algorithm.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "templates/conv2d/conv2d.hpp"

namespace jitune::test {

/// For each value of each knob (of algorithm `algo`'s knobs only where algo >= 0), a config of the space the kernel
/// can run with it on `device` (templates::conv2d::kernel_limits), scattered over the space, where one exists;
/// `seen` collects every (knob, value) of the sample.
inline std::vector<Config> conv2d_knob_sample(const templates::conv2d::ConvProblem& p, const DeviceInfo& device,
                                              std::int64_t algo, std::set<std::pair<std::string, std::int64_t>>& seen) {
  const Family& fam = templates::conv2d::conv2d_family();
  std::vector<Config> all, sample;
  fam.space().for_each([&](const Config& c) {
    if ((algo < 0 || c.at("algo") == algo) && templates::conv2d::kernel_limits(p, c, device).empty()) all.push_back(c);
  });
  if (all.empty()) return sample;  // nothing the kernels can run: no value to cover
  for (const Param& param : fam.space().params())
    if (algo < 0 || (param.when == "algo" && param.varies_under(algo)))
      for (std::int64_t value : param.values)
        if (!seen.count({param.name, value}))
          for (std::size_t i = (value * 7919u) % all.size(), n = 0; n < all.size(); ++n, i = (i + 7919) % all.size())
            if (all[i].at(param.name) == value) {
              sample.push_back(all[i]);
              for (const auto& [name, v] : all[i].values()) seen.insert({name, v});
              break;
            }
  return sample;
}

}  // namespace jitune::test
