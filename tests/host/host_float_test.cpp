// Workload values: random_nonzero's range and sign, and fill_random_nonzero against the formula the families
// have always drawn their inputs with (the same seed must keep giving the same data).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"

namespace jitune {

TEST_CASE("random_nonzero: magnitude in [0.25, 4), sign from bit 2, never zero") {
  std::uint64_t state = 12345;
  int negative = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t bits = splitmix(state);
    const double v = random_nonzero(bits);
    CHECK(std::fabs(v) >= 0.25);
    CHECK(std::fabs(v) < 4.0);
    CHECK((v < 0) == ((bits & 4) != 0));
    negative += v < 0;
  }
  CHECK(negative > 45000);
  CHECK(negative < 55000);
  CHECK(random_nonzero(0) == 0.25);
  CHECK(random_nonzero(3) == 2.0);
  CHECK(random_nonzero(4) == -0.25);
}

TEST_CASE("fill_random_nonzero matches the hash of (seed, index) element by element, for every dtype") {
  // Large enough to be filled on several threads where there are several cores.
  constexpr std::uint64_t kCount = 300001;
  for (const DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{7}, ~std::uint64_t{0}}) {
      CAPTURE(seed);
      std::vector<std::byte> want(kCount * dtype_size(dtype)), got(want.size(), std::byte{0xAB});
      for (std::uint64_t i = 0; i < kCount; ++i) {
        const std::uint64_t r = mix64(seed * 0x2545f4914f6cdd1dull + i);
        const double mag =
            std::ldexp(1.0 + static_cast<double>(r >> 40) / double(1ull << 24), int(r & 3) - 2);
        store_element(dtype, want.data(), i, (r & 4) ? -mag : mag);
      }
      fill_random_nonzero(dtype, got.data(), kCount, seed);
      CHECK(std::memcmp(want.data(), got.data(), want.size()) == 0);
    }
  }
}

}  // namespace jitune
