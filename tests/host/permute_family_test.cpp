// The permute problem without a GPU: simplification by rule (hand-worked cases and a randomized check against
// the unsimplified reference), validation messages, signature and group, workload, reference, default suite.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <set>

#include "permute_test_support.hpp"
#include "templates/sources.hpp"

namespace jitune {
namespace {

using namespace permute_test;
using templates::permute::Plan;

Plan simplify(std::vector<std::int64_t> shape, std::vector<int> perm, int es, int max_movement = 16) {
  templates::permute::validate(shape, perm, static_cast<std::size_t>(es));
  return templates::permute::simplify(shape, perm, es, max_movement);
}

std::vector<std::int64_t> dims_of(const Plan& p) {
  return {p.dims.begin(), p.dims.begin() + p.rank};
}
std::vector<int> perm_of(const Plan& p) {
  return {p.perm.begin(), p.perm.begin() + p.rank};
}

// Applies a plan to raw bytes, unit by unit, without any of the family's code.
std::vector<std::byte> apply_plan(const Plan& plan, const std::vector<std::byte>& in) {
  std::vector<std::byte> out(in.size());
  const auto unit = static_cast<std::size_t>(plan.unit);
  std::vector<std::int64_t> in_stride(plan.rank, 1);
  for (int d = plan.rank - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * plan.dims[d + 1];
  for (std::int64_t o = 0; o < plan.units; ++o) {
    std::int64_t rest = o, src = 0;
    for (int i = plan.rank - 1; i >= 0; --i) {
      const std::int64_t extent = plan.dims[plan.perm[i]];
      src += rest % extent * in_stride[plan.perm[i]];
      rest /= extent;
    }
    std::memcpy(out.data() + o * unit, in.data() + src * unit, unit);
  }
  return out;
}

}  // namespace

TEST_CASE("permute is registered and its template is embedded") {
  CHECK(&family("permute") == &fam());
  CHECK(template_source("permute/permute.cuh").find("permute_tiled") != std::string::npos);
  CHECK(template_source("permute/permute_params.cuh").find("TiledParams") != std::string::npos);
  CHECK(template_hash("permute/permute.cuh").size() == 16);
}

TEST_CASE("simplification: hand-worked cases") {
  SUBCASE("the issue's example: size-1 dims dropped, (0,1,3,4,2) becomes (0,2,1)") {
    const Plan p = simplify({1, 2, 2, 1, 2}, {0, 1, 3, 4, 2}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{2, 2, 2});
    CHECK(perm_of(p) == std::vector<int>{0, 2, 1});
    CHECK(p.unit == 4);
    CHECK(p.units == 8);
    CHECK(p.last_dim_moves());
  }
  SUBCASE("bench shapes") {
    Plan p = simplify({64, 64, 64, 64}, {2, 3, 0, 1}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{4096, 4096});
    CHECK(perm_of(p) == std::vector<int>{1, 0});
    p = simplify({16, 64, 128, 128}, {0, 2, 3, 1}, 2);
    CHECK(dims_of(p) == std::vector<std::int64_t>{16, 64, 16384});
    CHECK(perm_of(p) == std::vector<int>{0, 2, 1});
    p = simplify({16, 128, 128, 64}, {0, 3, 1, 2}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{16, 16384, 64});
    CHECK(perm_of(p) == std::vector<int>{0, 2, 1});
    p = simplify({128, 128, 3, 3, 64}, {4, 3, 2, 1, 0}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{128, 128, 3, 3, 64});
    CHECK(perm_of(p) == std::vector<int>{4, 3, 2, 1, 0});
    CHECK(p.unit == 4);
  }
  SUBCASE("the last dim stays: widest movement that divides its bytes") {
    Plan p = simplify({32, 512, 16, 128}, {0, 2, 1, 3}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{32, 512, 16, 32});
    CHECK(perm_of(p) == std::vector<int>{0, 2, 1, 3});
    CHECK(p.unit == 16);
    CHECK(p.units == 32 * 512 * 16 * 32);
    p = simplify({32, 512, 16, 128}, {0, 2, 1, 3}, 4, 4);  // movement capped by alignment
    CHECK(dims_of(p) == std::vector<std::int64_t>{32, 512, 16, 128});
    CHECK(p.unit == 4);
    p = simplify({5, 6, 3}, {1, 0, 2}, 4);  // 12 bytes: neither 16 nor 8 divides
    CHECK(p.unit == 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{5, 6, 3});
    p = simplify({5, 6, 6}, {1, 0, 2}, 1);  // 6 bytes: pairs
    CHECK(p.unit == 2);
    CHECK(dims_of(p) == std::vector<std::int64_t>{5, 6, 3});
    p = simplify({5, 6, 3}, {1, 0, 2}, 2);
    CHECK(p.unit == 2);
  }
  SUBCASE("a last dim of exactly one movement collapses and the plan becomes a transpose of wide units") {
    const Plan p = simplify({8, 16, 4}, {1, 0, 2}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{8, 16});
    CHECK(perm_of(p) == std::vector<int>{1, 0});
    CHECK(p.unit == 16);
    CHECK(p.units == 128);
    CHECK(p.last_dim_moves());
  }
  SUBCASE("movement is recomputed after merging") {
    // Unmerged, the last dim holds 8 bytes; merged with its neighbour, 16: one 16-byte unit.
    const Plan p = simplify({3, 5, 2, 2}, {1, 0, 2, 3}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{3, 5});
    CHECK(perm_of(p) == std::vector<int>{1, 0});
    CHECK(p.unit == 16);
  }
  SUBCASE("merges") {
    Plan p = simplify({2, 3, 4, 5}, {2, 3, 0, 1}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{6, 20});
    CHECK(perm_of(p) == std::vector<int>{1, 0});
    p = simplify({2, 3, 4, 5}, {0, 1, 3, 2}, 4);
    CHECK(dims_of(p) == std::vector<std::int64_t>{6, 4, 5});
    CHECK(perm_of(p) == std::vector<int>{0, 2, 1});
    p = simplify({2, 1, 3}, {2, 1, 0}, 8);
    CHECK(dims_of(p) == std::vector<std::int64_t>{2, 3});
    CHECK(perm_of(p) == std::vector<int>{1, 0});
    p = simplify({2, 3, 4, 5, 6}, {3, 4, 0, 1, 2}, 2);
    CHECK(dims_of(p) == std::vector<std::int64_t>{24, 30});
    CHECK(perm_of(p) == std::vector<int>{1, 0});
  }
  SUBCASE("identity, all ones, zero size, 0-d") {
    Plan p = simplify({3, 4, 5}, {0, 1, 2}, 4);
    CHECK(p.identity());
    CHECK(p.rank == 1);
    CHECK(p.unit == 16);
    CHECK(p.units == 15);
    p = simplify({3, 1, 5}, {1, 0, 2}, 4);  // moving a size-1 dim changes nothing
    CHECK(p.identity());
    CHECK(templates::permute::is_identity(std::vector<std::int64_t>{3, 1, 5}, std::vector<int>{1, 0, 2}));
    CHECK_FALSE(
        templates::permute::is_identity(std::vector<std::int64_t>{3, 2, 5}, std::vector<int>{1, 0, 2}));
    p = simplify({1, 1}, {1, 0}, 2);
    CHECK(p.rank == 0);
    CHECK(p.units == 1);
    CHECK(p.identity());
    p = simplify({3, 0, 2}, {2, 0, 1}, 4);
    CHECK(p.units == 0);
    p = simplify({}, {}, 8);
    CHECK(p.rank == 0);
    CHECK(p.units == 1);
  }
}

TEST_CASE(
    "simplification preserves the permute: random shapes, every movement, against the plain reference") {
  std::mt19937_64 rng(20261121);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6);
    std::vector<std::int64_t> shape(n);
    for (auto& e : shape) e = (rng() % 4 == 0) ? 1 : 1 + static_cast<std::int64_t>(rng() % 6);
    std::vector<int> perm(n);
    for (int i = 0; i < n; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    if (rng() % 5 == 0) std::sort(perm.begin() + n / 2, perm.end());  // make stay-together runs likely
    const DType dtype =
        std::array{DType::kInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64}[rng() % 4];
    std::string shape_text, perm_text;
    for (int i = 0; i < n; ++i) {
      shape_text += (i ? "x" : "") + std::to_string(shape[i]);
      perm_text += std::to_string(perm[i]);
    }
    auto p = problem(std::string(dtype_name(dtype)), shape_text, perm_text);
    const auto& pp = as_permute(p);
    const Workload w = fam().workload(pp, trial);
    const auto expected = fam().reference(pp, w)[0];
    for (int m = pp.element_size(); m <= pp.max_movement(); m *= 2) {
      const Plan& plan = pp.plan(m);
      INFO("shape ", shape_text, " perm ", perm_text, " dtype ", dtype_name(dtype), " movement ", m);
      REQUIRE(plan.units * plan.unit == pp.elements() * pp.element_size());
      for (int d = 0; d < plan.rank; ++d) CHECK(plan.dims[d] > 1);
      CHECK(apply_plan(plan, w.inputs[0]) == expected);
    }
  }
}

TEST_CASE("bad shapes and permutations are InvalidArgument saying what is wrong") {
  const auto bad = [](std::vector<std::int64_t> shape, std::vector<int> perm) {
    templates::permute::validate(shape, perm, 4);
  };
  CHECK_THROWS_WITH_AS(bad({2, 3}, {0, 0}), doctest::Contains("appears twice"), InvalidArgument);
  CHECK_THROWS_WITH_AS(bad({2, 3}, {0, 2}), doctest::Contains("permutation of 0..n-1"), InvalidArgument);
  CHECK_THROWS_WITH_AS(bad({2, 3}, {-1, 0}), doctest::Contains("outside"), InvalidArgument);
  CHECK_THROWS_WITH_AS(bad({2, 3, 4}, {1, 0}), doctest::Contains("2 entries for 3 dims"), InvalidArgument);
  CHECK_THROWS_WITH_AS(bad({2, -3}, {1, 0}), doctest::Contains("negative"), InvalidArgument);
  CHECK_THROWS_WITH_AS(bad({1, 1, 1, 1, 1, 1, 1, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7, 8}),
                       doctest::Contains("at most 8"), InvalidArgument);
  CHECK_THROWS_WITH_AS(bad({1 << 30, 1 << 30, 1 << 30}, {2, 1, 0}), doctest::Contains("2^62"),
                       InvalidArgument);
  CHECK_NOTHROW(bad({1 << 30, 0, 1 << 30}, {2, 1, 0}));  // empty: never overflows
  CHECK_THROWS_AS(problem("float32", "2x3", "0,0"), InvalidArgument);
  CHECK_THROWS_AS(problem("float32", "2x3", "abc"), InvalidArgument);
  CHECK_THROWS_AS(problem("float32", "2xq", "10"), InvalidArgument);
  CHECK_THROWS_AS(problem("complex", "2x3", "10"), InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"dtype", "float32"}, {"shape", "2x3"}}), InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"dtype", "float32"}, {"shape", "2x3"}, {"perm", "10"}, {"n", "1"}}),
                  InvalidArgument);
}

TEST_CASE("signature is canonical and parses back; group and features follow the simplified plan") {
  auto p = problem("half", "64,1024,1024", "021");
  CHECK(p->signature() == "dtype=float16;perm=0,2,1;shape=64x1024x1024");
  CHECK(fam().parse_problem(p->signature())->signature() == p->signature());
  CHECK(problem("float16", "64x1024x1024", "0,2,1")->signature() == p->signature());
  CHECK(p->group() == "bytes=2|perm=0,2,1");
  CHECK(p->features() == std::vector<double>{6, 10, 10});
  CHECK(p->bytes_moved() == 2.0 * 2 * 64 * 1024 * 1024);
  auto q = problem("float32", "32x512x16x128", "0213");
  CHECK(q->group() == "bytes=16|perm=0,2,1,3");
  CHECK(as_permute(q).max_movement() == 16);
  CHECK_THROWS_AS(as_permute(q).plan(2), InvalidArgument);
  CHECK_THROWS_AS(as_permute(q).plan(32), InvalidArgument);
  auto scalar = problem("float64", "", "");
  CHECK(scalar->signature() == "dtype=float64;perm=;shape=");
  CHECK(as_permute(scalar).elements() == 1);
}

TEST_CASE("workload is random with no element all 0xFF or all zero; reference is the plain permute") {
  for (const char* dtype : {"int8", "float16", "float32", "int64"}) {
    auto p = problem(dtype, "7x9x5", "201");
    const auto& pp = as_permute(p);
    const Workload w = fam().workload(pp, 11);
    REQUIRE(w.inputs.size() == 1);
    const auto es = static_cast<std::size_t>(pp.element_size());
    REQUIRE(w.inputs[0].size() == 315 * es);
    std::set<std::string> distinct;
    for (std::size_t i = 0; i < 315; ++i) {
      const std::string el(reinterpret_cast<const char*>(w.inputs[0].data()) + i * es, es);
      CHECK(el != std::string(es, '\xff'));
      CHECK(el != std::string(es, '\0'));
      distinct.insert(el);
    }
    CHECK(distinct.size() > (es == 1 ? 150u : 300u));
    CHECK(fam().workload(pp, 12).inputs[0] != w.inputs[0]);
    CHECK(w.output_bytes == std::vector<std::size_t>{315 * es});
  }
  auto t = problem("int32", "2x3", "10");
  Workload w;
  w.inputs.emplace_back(6 * 4);
  for (std::int32_t i = 0; i < 6; ++i) std::memcpy(w.inputs[0].data() + 4 * i, &i, 4);
  const auto out = fam().reference(*t, w)[0];
  std::int32_t got[6];
  std::memcpy(got, out.data(), sizeof got);
  CHECK(std::vector<std::int32_t>(got, got + 6) == std::vector<std::int32_t>{0, 3, 1, 4, 2, 5});
  CHECK(fam().output_check(*t, 0).dtype == DType::kInt32);
  CHECK(fam().output_check(*t, 0).rtol == 0);
  CHECK(fam().output_check(*problem("int64", "2x3", "10"), 0).dtype ==
        DType::kInt32);  // as 32-bit word pairs
  CHECK(fam().output_check(*problem("bfloat16", "2x3", "10"), 0).dtype == DType::kInt16);
  CHECK(fam().output_check(*problem("uint8", "2x3", "10"), 0).dtype == DType::kUInt8);
}

TEST_CASE("the default suite is the 14 public permute cases") {
  const auto suite = fam().default_suite();
  REQUIRE(suite.size() == 14);
  CHECK(suite.front().first == "permute_float32_8192x8192_10");
  CHECK(suite.front().second == "dtype=float32;perm=1,0;shape=8192x8192");
  CHECK(suite.back().first == "permute_float16_128x128x3x3x64_43210");
  for (const auto& [name, signature] : suite) CHECK(fam().parse_problem(signature)->signature() == signature);
}

}  // namespace jitune
