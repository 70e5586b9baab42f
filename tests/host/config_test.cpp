// Config text form, Space enumeration and membership, problem signature text.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include <jitune/error.hpp>
#include <jitune/tensor.hpp>

#include "templates/family.hpp"
#include "templates/host_float.hpp"

namespace jitune {

TEST_CASE("config text is canonical and round-trips") {
  Config c = Config::parse(" unroll=2, block=256 ,pack=4");
  CHECK(c.text() == "block=256,pack=4,unroll=2");
  CHECK(Config::parse(c.text()) == c);
  CHECK(c.at("pack") == 4);
  CHECK_FALSE(c.find("waves").has_value());
  CHECK(Config::parse("").empty());
  CHECK(Config::parse("x=-3").at("x") == -3);
}

TEST_CASE("malformed config text is a clear error") {
  CHECK_THROWS_WITH_AS(Config::parse("block"), doctest::Contains("name=value"), InvalidArgument);
  CHECK_THROWS_WITH_AS(Config::parse("block=2x"), doctest::Contains("integer"), InvalidArgument);
  CHECK_THROWS_WITH_AS(Config::parse("a=1,a=2"), doctest::Contains("twice"), InvalidArgument);
  CHECK_THROWS_WITH_AS(Config::parse("b-c=1"), doctest::Contains("parameter name"), InvalidArgument);
  Config one{{"a", 1}};
  CHECK_THROWS_WITH_AS(one.at("b"), doctest::Contains("no parameter 'b'"), InvalidArgument);
  // slot: the stored value, changed in place; a missing name is the same clear error.
  *one.slot("a") = 5;
  CHECK(one.at("a") == 5);
  CHECK(one.text() == "a=5");
  CHECK_THROWS_WITH_AS(one.slot("b"), doctest::Contains("no parameter 'b'"), InvalidArgument);
}

TEST_CASE("space enumerates the full product, distinct, and knows membership") {
  Space s({{"a", {1, 2, 3}, ""}, {"b", {10, 20}, ""}, {"c", {7}, ""}});
  CHECK(s.size() == 6);
  auto all = s.enumerate();
  REQUIRE(all.size() == 6);
  std::set<std::string> texts;
  for (const Config& c : all) {
    texts.insert(c.text());
    CHECK(s.contains(c));
  }
  CHECK(texts.size() == 6);
  const Config bad_value{{"a", 4}, {"b", 10}, {"c", 7}}, missing{{"a", 1}, {"b", 10}}, extra{{"a", 1}, {"b", 10}, {"c", 7}, {"d", 1}};
  CHECK(s.why_not_contained(bad_value).find("not a candidate") != std::string::npos);
  CHECK(s.why_not_contained(missing).find("missing parameter 'c'") != std::string::npos);
  CHECK(s.why_not_contained(extra).find("unknown parameter 'd'") !=
        std::string::npos);
  CHECK(Space().size() == 0);
  CHECK(Space().enumerate().empty());
}

TEST_CASE("conditional parameters vary only under their condition") {
  // algo 0 tunes a and b, algo 1 tunes t; the other algorithm's knobs hold their first value.
  Space s({{"algo", {0, 1}, ""},
           {"a", {1, 2, 3}, "", "algo", {0}},
           {"b", {5, 6}, "", "algo", {0}},
           {"t", {32, 64, 128, 256}, "", "algo", {1}}});
  CHECK(s.size() == 6 + 4);
  const auto all = s.enumerate();
  REQUIRE(all.size() == 10);
  std::set<Config> distinct(all.begin(), all.end());
  CHECK(distinct.size() == 10);
  // for_each (which enumerate uses) visits them in parameter order, the last parameter fastest, inactive ones at
  // their first value, one Config changed in place (copies kept here).
  std::vector<Config> expected;
  for (std::int64_t a : {1, 2, 3})
    for (std::int64_t b : {5, 6}) expected.push_back({{"algo", 0}, {"a", a}, {"b", b}, {"t", 32}});
  for (std::int64_t t : {32, 64, 128, 256}) expected.push_back({{"algo", 1}, {"a", 1}, {"b", 5}, {"t", t}});
  std::vector<Config> visited;
  const Config* first = nullptr;
  bool one_object = true;
  s.for_each([&](const Config& c) {
    if (!first) first = &c;
    one_object = one_object && &c == first;
    visited.push_back(c);
  });
  CHECK(visited == expected);
  CHECK(all == expected);
  CHECK(one_object);
  std::size_t none = 0;
  Space().for_each([&](const Config&) { ++none; });
  CHECK(none == 0);
  int direct = 0;
  for (const Config& c : all) {
    CHECK(s.contains(c));
    if (c.at("algo") == 0) {
      ++direct;
      CHECK(c.at("t") == 32);
    } else {
      CHECK(c.at("a") == 1);
      CHECK(c.at("b") == 5);
    }
  }
  CHECK(direct == 6);
  const Config outside{{"algo", 1}, {"a", 2}, {"b", 5}, {"t", 64}};
  CHECK(s.why_not_contained(outside).find("a=2 applies only where algo=0 (here algo=1); set it to 1") !=
        std::string::npos);
  CHECK(s.canonical(outside) == Config{{"algo", 1}, {"a", 1}, {"b", 5}, {"t", 64}});
  CHECK(s.contains(s.canonical(outside)));
  CHECK_THROWS_WITH_AS(Space({{"a", {1}, "", "later", {1}}, {"later", {1}, ""}}),
                       doctest::Contains("not an earlier parameter"), InvalidArgument);
  CHECK_THROWS_WITH_AS(Space({{"a", {}, ""}}), doctest::Contains("no values"), InvalidArgument);
  CHECK_THROWS_WITH_AS(Space({{"algo", {0, 1}, ""}, {"a", {1, 2}, "", "algo", {}}}),
                       doctest::Contains("names no value of it"), InvalidArgument);
}

TEST_CASE("a conditional parameter shared by two values of its condition") {
  // algo 0 tunes a; algo 1 and 2 (two kernels of one shape) share w; algo 3 tunes neither.
  Space s({{"algo", {0, 1, 2, 3}, ""}, {"a", {1, 2}, "", "algo", {0}}, {"w", {8, 16, 32}, "", "algo", {1, 2}}});
  CHECK(s.size() == 2 + 3 + 3 + 1);
  std::vector<Config> expected{{{"algo", 0}, {"a", 1}, {"w", 8}}, {{"algo", 0}, {"a", 2}, {"w", 8}}};
  for (std::int64_t algo : {1, 2})
    for (std::int64_t w : {8, 16, 32}) expected.push_back({{"algo", algo}, {"a", 1}, {"w", w}});
  expected.push_back({{"algo", 3}, {"a", 1}, {"w", 8}});
  CHECK(s.enumerate() == expected);
  CHECK(s.params()[2].varies_under(2));
  CHECK_FALSE(s.params()[2].varies_under(3));
  const Config outside{{"algo", 3}, {"a", 1}, {"w", 16}};
  CHECK(s.why_not_contained(outside).find("w=16 applies only where algo=1 or algo=2 (here algo=3); set it to 8") !=
        std::string::npos);
  CHECK(s.canonical(outside) == Config{{"algo", 3}, {"a", 1}, {"w", 8}});
  CHECK(s.canonical(Config{{"algo", 2}, {"a", 1}, {"w", 16}}) == Config{{"algo", 2}, {"a", 1}, {"w", 16}});
}

TEST_CASE("signatures split and join; values may contain '='") {
  auto m = split_signature("dtype=float32;expr=z = x * y;n=5");
  CHECK(m.at("expr") == "z = x * y");
  CHECK(join_signature(m) == "dtype=float32;expr=z = x * y;n=5");
  CHECK_THROWS_AS(split_signature("dtype"), InvalidArgument);
}

TEST_CASE("dtype names parse, alias, and reject unknown names with the list") {
  CHECK(parse_dtype("half") == DType::kFloat16);
  CHECK(parse_dtype("bf16") == DType::kBFloat16);
  CHECK(dtype_name(parse_dtype("float32")) == "float32");
  CHECK(dtype_size(DType::kBFloat16) == 2);
  CHECK_THROWS_WITH_AS(parse_dtype("fp8"), doctest::Contains("float16"), InvalidArgument);
}

TEST_CASE("half and bfloat16 host conversions round to nearest even") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(half_bits_to_float(0x3c00) == 1.0f);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(float_to_half_bits(70000.0f) == 0x7c00);             // overflow to inf
  CHECK(half_bits_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie to even (down)
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie to even (up)
  for (std::uint32_t h = 0; h < 0x7c00; h += 7) CHECK(float_to_half_bits(half_bits_to_float(h)) == h);
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(bf16_bits_to_float(float_to_bf16_bits(3.140625f)) == 3.140625f);
  CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // tie to even
}

TEST_CASE("host comparison flags poison, NaN and tolerance violations") {
  std::vector<float> got = {1.0f, 2.0f, 3.0f}, exp = {1.0f, 2.0f, 3.0f};
  OutputCheck check{DType::kFloat32, 1e-5, 1e-6};
  CHECK(compare_host(check, got.data(), exp.data(), 3).ok());
  got[1] = 2.001f;
  auto r = compare_host(check, got.data(), exp.data(), 3);
  CHECK(r.mismatches == 1);
  CHECK(r.first_index == 1);
  std::uint32_t poison = 0xffffffffu;
  std::memcpy(&got[2], &poison, 4);
  CHECK(compare_host(check, got.data(), exp.data(), 3).mismatches == 2);
  CHECK(r.describe(3, check).find("first at 1") != std::string::npos);
}

}  // namespace jitune
