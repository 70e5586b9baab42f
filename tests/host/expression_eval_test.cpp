// Elementwise expressions evaluated on the host: C's integer and floating semantics, precedence, casts,
// constants and functions against <cmath>, and random expressions checked by independent lambdas.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "expression_test_support.hpp"

using namespace expression_test;

TEST_CASE("integer literals follow C integer semantics") {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> dist(-100, 100);
  for (int i = 0; i < 20; ++i) {
    const double x = dist(rng);
    CHECK(eval("z = x * (1 / 2)", {x}) == 0.0);
    CHECK(eval("z = x * (1.0f / 2)", {x}) == x / 2);
    CHECK(eval("z = x * (1 / 2.0)", {x}) == x / 2);
    CHECK(eval("z = x * ((float)1 / 2)", {x}) == x / 2);
    CHECK(eval("z = x / 2", {x}) == x / 2);
  }
  CHECK(eval("z = x + 7 / 2", {0.5}) == 3.5);
  CHECK(eval("z = x + -7 / 2", {0}) == -3.0);  // truncation toward zero
  CHECK(eval("z = x + 7 % 3", {0}) == 1.0);
  CHECK(eval("z = x + -7 % 3", {0}) == -1.0);
  CHECK(eval("z = x + (1 << 3)", {0}) == 8.0);
  CHECK(eval("z = x + (-8 >> 1)", {0}) == -4.0);
  CHECK(eval("z = x + (6 & 3) * 100 + (6 | 3) * 10 + (6 ^ 3)", {0}) == 2 * 100 + 7 * 10 + 5);
  CHECK(eval("z = x + ~0", {0}) == -1.0);
  CHECK(eval("z = x + (int)x / 2", {7.9}) == 7.9 + 3);
  CHECK(eval("z = (int)x", {-3.7}) == -3.0);
  CHECK(eval("z = (int)x % 4", {-7.2}) == -3.0);
  CHECK(eval("z = (double)((int)x >> 1)", {9}) == 4.0);
  CHECK(eval("z = x + 3000000000 * 4", {0}) == 12000000000.0);  // integers are 64-bit on the host
}

TEST_CASE("undefined integer cases give documented results without crashing") {
  CHECK(eval("z = x + 1 / 0", {2}) == 2.0);
  CHECK(eval("z = x + 5 % 0", {2}) == 2.0);
  CHECK(eval("z = x + (int)x / 0", {9}) == 9.0);
  CHECK(eval("z = x + (-9223372036854775807 - 1) / -1", {0}) == -9223372036854775808.0);  // wraps
  CHECK(eval("z = x + (-9223372036854775807 - 1) % -1", {0}) == 0.0);
  CHECK(eval("z = x + (9223372036854775807 + 1)", {0}) == -9223372036854775808.0);
  CHECK(eval("z = x + (1 << 64)", {0}) == 0.0);
  CHECK(eval("z = x + (1 << -1)", {0}) == 0.0);
  CHECK(eval("z = x + (-1 >> 70)", {0}) == -1.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(eval("z = (int)x", {nan}) == 0.0);
  CHECK(eval("z = (int)x", {1e20}) == 2147483647.0);
  CHECK(eval("z = (int)x", {-1e20}) == -2147483648.0);
}

TEST_CASE("integer-only operators on floating operands are rejected by the evaluator") {
  struct Case {
    std::string text;
    size_t pos;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"z = x << 1", 6, "operator '<<' needs integer operands"},
      {"z = 1 >> x", 6, "operator '>>' needs integer operands"},
      {"z = x & 1", 6, "operator '&' needs integer operands"},
      {"z = x | 1", 6, "operator '|' needs integer operands"},
      {"z = x ^ 1", 6, "operator '^' needs integer operands"},
      {"z = x % 2", 6, "fmodf"},
      {"z = 1.5 % (int)x", 8, "operator '%' needs integer operands"},
      {"z = ~x", 4, "operator '~' needs an integer operand"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string message = evaluator_error(c.text);
    CHECK(message.find(c.says) != std::string::npos);
    // The evaluator quotes the canonical text.
    CHECK(message.find(caret(parse_expression(c.text).canonical, c.pos)) != std::string::npos);
  }
  CHECK(eval("z = (int)x & 6", {7.5}) == 6.0);
}

TEST_CASE("comparisons and the conditional operator") {
  const double slope = static_cast<double>(0.1f);
  for (double x : {2.5, -2.0, 0.0, -1e-3, 1e-30}) {
    CAPTURE(x);
    CHECK(eval("y = x > 0 ? x : 0.1f * x", {x}) == (x > 0 ? x : slope * x));
    CHECK(eval("y = x < 0 ? -1 : x > 0 ? 1 : 0", {x}) == (x < 0 ? -1 : x > 0 ? 1 : 0));
    CHECK(eval("y = (x > 0) + 10 * (x >= 0) + 100 * (x == 0) + 1000 * (x != 0) + 10000 * (x <= 0)", {x}) ==
          (x > 0) + 10 * (x >= 0) + 100 * (x == 0) + 1000 * (x != 0) + 10000 * (x <= 0));
  }
  // The conditional's type is the common type of its branches.
  CHECK(eval("y = x > 0 ? 1 / 2 : 1.0 / 2", {1}) == 0.0);
  CHECK(eval("y = x > 0 ? 3 : 1.5", {1}) == 3.0);
  CHECK(eval("y = (x > 0 ? 3 : 1.5) / 2", {1}) == 1.5);
  CHECK(eval("y = (x > 0 ? 3 : 1) / 2", {1}) == 1.0);
  // A floating condition is true when nonzero.
  CHECK(eval("y = x ? 5 : 6", {0.25}) == 5.0);
  CHECK(eval("y = x ? 5 : 6", {0.0}) == 6.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(eval("y = x == x", {nan}) == 0.0);
  CHECK(eval("y = x != x", {nan}) == 1.0);
  CHECK(eval("y = x < 1 || x >= 1", {nan}) == 0.0);
  CHECK(eval("y = !x", {nan}) == 0.0);
}

TEST_CASE("operator precedence and associativity follow C") {
  CHECK(eval("y = a + b * c", {2, 3, 4}) == 14.0);
  CHECK(eval("y = a * b + c", {2, 3, 4}) == 10.0);
  CHECK(eval("y = a - b - c", {10, 3, 2}) == 5.0);
  CHECK(eval("y = a / b / c", {64, 4, 2}) == 8.0);
  CHECK(eval("y = a - b + c", {10, 3, 2}) == 9.0);
  CHECK(eval("y = -a * b", {2, 3}) == -6.0);
  CHECK(eval("y = -a + b", {2, 3}) == 1.0);
  CHECK(eval("y = - -a", {2}) == 2.0);
  CHECK(eval("y = +a", {-2}) == -2.0);
  CHECK(eval("y = !a", {0}) == 1.0);
  CHECK(eval("y = !a", {2.5}) == 0.0);
  CHECK(eval("y = !a + 1", {0}) == 2.0);  // unary binds tighter than '+'
  CHECK(eval("y = a || b && c", {1, 0, 0}) == 1.0);
  CHECK(eval("y = (a || b) && c", {1, 0, 0}) == 0.0);
  CHECK(eval("y = a < b == c < a", {1, 2, 3}) == 0.0);  // (1 < 2) == (3 < 1)
  CHECK(eval("y = (int)a + 1 << 1", {2}) == 6.0);       // '+' binds tighter than '<<'
  CHECK(eval("y = 1 << (int)a + 1", {1}) == 4.0);
  CHECK(eval("y = 1 << 2 < (int)a", {3}) == 0.0);  // '<<' binds tighter than '<'
  CHECK(eval("y = (int)a | 6 ^ 3 & 5", {8}) == (8 | (6 ^ (3 & 5))));
  CHECK(eval("y = (int)a & 2 == 2", {2}) == 0.0);                    // a & (2 == 2), not (a & 2) == 2
  CHECK(eval("y = a > 0 ? b : c > 0 ? 7 : 8", {-1, 5, -1}) == 8.0);  // right-associative
  CHECK(eval("y = a ? b ? 1 : 2 : 3", {1, 0}) == 2.0);
  CHECK(eval("y = (float)a / 2", {3}) == 1.5);
  CHECK(eval("y = (int)a / 2", {3}) == 1.0);
  CHECK(eval("y = -(int)a / 2", {3}) == -1.0);
  CHECK(eval("y = (int)-a / 2", {3}) == -1.0);
}

TEST_CASE("casts convert like C") {
  CHECK(eval("y = (float)x", {0.1}) == static_cast<double>(0.1f));
  CHECK(eval("y = (double)x", {0.1}) == 0.1);
  CHECK(eval("y = (float)(x * 3)", {0.1}) == static_cast<double>(static_cast<float>(0.1 * 3)));
  CHECK(eval("y = (double)(1 / 2) + x", {0}) == 0.0);
}

TEST_CASE("constants evaluate to their values") {
  CHECK(eval("y = x * M_PI", {2}) == 2 * 3.14159265358979323846);
  CHECK(eval("y = x * M_E", {1}) == 2.71828182845904523536);
  CHECK(eval("y = x + INFINITY", {1}) == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(eval("y = x + NAN", {1})));
  CHECK(eval("y = x * true + false", {4}) == 4.0);
  CHECK(eval("y = x + true / 2", {0}) == 0.0);  // true is an integer
}

TEST_CASE("every supported function matches <cmath>") {
  struct Function {
    std::string name;
    int arity;
    bool float_variant;
    double lo, hi;
    std::function<double(double, double, double)> reference;
  };
  const std::vector<Function> functions = {
      {"exp", 1, true, -3, 3, [](double a, double, double) { return std::exp(a); }},
      {"exp2", 1, true, -3, 3, [](double a, double, double) { return std::exp2(a); }},
      {"expm1", 1, true, -1, 1, [](double a, double, double) { return std::expm1(a); }},
      {"log", 1, true, 0.1, 5, [](double a, double, double) { return std::log(a); }},
      {"log2", 1, true, 0.1, 5, [](double a, double, double) { return std::log2(a); }},
      {"log10", 1, true, 0.1, 5, [](double a, double, double) { return std::log10(a); }},
      {"log1p", 1, true, -0.5, 5, [](double a, double, double) { return std::log1p(a); }},
      {"sqrt", 1, true, 0, 9, [](double a, double, double) { return std::sqrt(a); }},
      {"rsqrt", 1, true, 0.1, 9, [](double a, double, double) { return 1 / std::sqrt(a); }},
      {"cbrt", 1, true, -9, 9, [](double a, double, double) { return std::cbrt(a); }},
      {"sin", 1, true, -4, 4, [](double a, double, double) { return std::sin(a); }},
      {"cos", 1, true, -4, 4, [](double a, double, double) { return std::cos(a); }},
      {"tan", 1, true, -1.5, 1.5, [](double a, double, double) { return std::tan(a); }},
      {"asin", 1, true, -1, 1, [](double a, double, double) { return std::asin(a); }},
      {"acos", 1, true, -1, 1, [](double a, double, double) { return std::acos(a); }},
      {"atan", 1, true, -5, 5, [](double a, double, double) { return std::atan(a); }},
      {"sinh", 1, true, -3, 3, [](double a, double, double) { return std::sinh(a); }},
      {"cosh", 1, true, -3, 3, [](double a, double, double) { return std::cosh(a); }},
      {"tanh", 1, true, -3, 3, [](double a, double, double) { return std::tanh(a); }},
      {"asinh", 1, true, -3, 3, [](double a, double, double) { return std::asinh(a); }},
      {"acosh", 1, true, 1, 5, [](double a, double, double) { return std::acosh(a); }},
      {"atanh", 1, true, -0.9, 0.9, [](double a, double, double) { return std::atanh(a); }},
      {"erf", 1, true, -2, 2, [](double a, double, double) { return std::erf(a); }},
      {"erfc", 1, true, -2, 2, [](double a, double, double) { return std::erfc(a); }},
      {"fabs", 1, true, -5, 5, [](double a, double, double) { return std::fabs(a); }},
      {"abs", 1, false, -5, 5, [](double a, double, double) { return std::fabs(a); }},
      {"floor", 1, true, -5, 5, [](double a, double, double) { return std::floor(a); }},
      {"ceil", 1, true, -5, 5, [](double a, double, double) { return std::ceil(a); }},
      {"round", 1, true, -5, 5, [](double a, double, double) { return std::round(a); }},
      {"trunc", 1, true, -5, 5, [](double a, double, double) { return std::trunc(a); }},
      {"pow", 2, true, 0.1, 3, [](double a, double b, double) { return std::pow(a, b); }},
      {"fmin", 2, true, -5, 5, [](double a, double b, double) { return std::fmin(a, b); }},
      {"fmax", 2, true, -5, 5, [](double a, double b, double) { return std::fmax(a, b); }},
      {"min", 2, false, -5, 5, [](double a, double b, double) { return std::fmin(a, b); }},
      {"max", 2, false, -5, 5, [](double a, double b, double) { return std::fmax(a, b); }},
      {"fmod", 2, true, -5, 5, [](double a, double b, double) { return std::fmod(a, b); }},
      {"atan2", 2, true, -5, 5, [](double a, double b, double) { return std::atan2(a, b); }},
      {"copysign", 2, true, -5, 5, [](double a, double b, double) { return std::copysign(a, b); }},
      {"hypot", 2, true, -5, 5, [](double a, double b, double) { return std::hypot(a, b); }},
      {"fma", 3, true, -5, 5, [](double a, double b, double c) { return std::fma(a, b, c); }},
  };
  std::mt19937 rng(7);
  for (const Function& f : functions) {
    std::uniform_real_distribution<double> dist(f.lo, f.hi);
    Strings names = {f.name};
    if (f.float_variant) names.push_back(f.name + "f");
    for (const std::string& name : names) {
      const std::string args = f.arity == 1 ? "a" : f.arity == 2 ? "a, b" : "a, b, c";
      const std::string text = "y = " + name + "(" + args + ")";
      CAPTURE(text);
      const Evaluator evaluator(parse_expression(text));
      for (int i = 0; i < 4; ++i) {
        const double in[3] = {dist(rng), dist(rng), dist(rng)};
        CAPTURE(in[0]);
        const double want = f.reference(in[0], in[1], in[2]);
        CHECK(!std::isnan(want));
        CHECK(same(evaluator(in), want));
      }
    }
  }
}

TEST_CASE("function arguments are converted and abs, min, max keep integers") {
  CHECK(eval("y = x + expf(0)", {1}) == 2.0);
  CHECK(eval("y = x + powf(2, 3)", {0}) == 8.0);
  CHECK(eval("y = x + sqrtf(9 / 2)", {0}) == 2.0);  // the argument is the integer 4
  CHECK(eval("y = x + abs(-3) / 2", {0}) == 1.0);
  CHECK(eval("y = x + min(3, 4) / 2", {0}) == 1.0);
  CHECK(eval("y = x + max(5, 4) / 2", {0}) == 2.0);
  CHECK(eval("y = x + max(1, 2.0f) / 4", {0}) == 0.5);
  CHECK(eval("y = x + fabs(-3) / 2", {0}) == 1.5);
  CHECK(eval("y = abs(x)", {-2.5}) == 2.5);
  CHECK(eval("y = min(x, 1) + max(x, 1)", {-2.5}) == -1.5);
}

TEST_CASE("unsupported functions and wrong argument counts are rejected by the evaluator") {
  const std::string unknown = evaluator_error("y = sigmoidf(x) + 1");
  CHECK(unknown.find("does not support the function 'sigmoidf'") != std::string::npos);
  CHECK(unknown.find("GPU may still compile it") != std::string::npos);
  CHECK(unknown.find("exp(f)") != std::string::npos);
  CHECK(unknown.find("tanh(f)") != std::string::npos);
  CHECK(unknown.find(caret("y = sigmoidf ( x ) + 1", 4)) != std::string::npos);  // quotes the canonical text
  CHECK(evaluator_error("y = absf(x)").find("'absf'") != std::string::npos);

  const std::string arity = evaluator_error("y = powf(x)");
  CHECK(arity.find("'powf' takes 2 arguments but is called with 1") != std::string::npos);
  CHECK(evaluator_error("y = expf(x, x)").find("'expf' takes 1 argument but is called with 2") !=
        std::string::npos);
  CHECK(evaluator_error("y = x + tanhf()").find("called with 0") != std::string::npos);
}

TEST_CASE("inputs are read in Expression::inputs order") {
  Expression e = parse_expression("z = a - b");
  CHECK(e.inputs == Strings{"a", "b"});
  const double in[2] = {10, 3};
  CHECK(Evaluator(e)(in) == 7.0);
  e.inputs = {"b", "a"};
  CHECK(Evaluator(e)(in) == -7.0);
  e.inputs = {"a"};
  CHECK_THROWS_AS(Evaluator{e}, InvalidArgument);
}

TEST_CASE("an evaluator can be moved") {
  Evaluator first(parse_expression("y = x * 3"));
  Evaluator second(std::move(first));
  const double in[1] = {2};
  CHECK(second(in) == 6.0);
  Evaluator third(parse_expression("y = x + 1"));
  third = std::move(second);
  CHECK(third(in) == 6.0);
}

TEST_CASE("fixed expressions match hand-written lambdas on random inputs") {
  struct Case {
    std::string text;
    std::function<double(double, double, double)> reference;
  };
  const float slope = 0.1f;
  const std::vector<Case> cases = {
      {"out = a * b + c", [](double a, double b, double c) { return a * b + c; }},
      {"y = (a - b) / (c + 2.5f)", [](double a, double b, double c) { return (a - b) / (c + 2.5); }},
      {"y = a > b ? sqrtf(fabsf(a)) : expf(-b * b)",
       [](double a, double b, double) { return a > b ? std::sqrt(std::fabs(a)) : std::exp(-b * b); }},
      {"y = fmaxf(a, 0.0f) + 0.5f * tanhf(b) - c / 4",
       [](double a, double b, double c) { return std::fmax(a, 0.0) + 0.5 * std::tanh(b) - c / 4; }},
      {"y = (int)(a * 10) % 3 + b",
       [](double a, double b, double) { return static_cast<double>(static_cast<int>(a * 10) % 3) + b; }},
      {"y = a * a * a - 3 * a * b + c",
       [](double a, double b, double c) { return a * a * a - 3 * a * b + c; }},
      {"y = a > 0 ? a : 0.1f * a", [slope](double a, double, double) { return a > 0 ? a : slope * a; }},
      {"y = -a * b - -c / 2 * a", [](double a, double b, double c) { return -a * b - -c / 2 * a; }},
      {"y = (a < b) * a + !(a < b) * b + (c > 0 && a > 0) - (c < 0 || b < 0)",
       [](double a, double b, double c) {
         return (a < b) * a + !(a < b) * b + (c > 0 && a > 0) - (c < 0 || b < 0);
       }},
      {"y = 1.0f / (1.0f + expf(-a)) * b + c * (1 / 3)",
       [](double a, double b, double) { return 1.0 / (1.0 + std::exp(-a)) * b; }},
  };
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> dist(-4, 4);
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const Evaluator evaluator(parse_expression(c.text));
    int mismatches = 0;
    for (int i = 0; i < 10000; ++i) {
      const double in[3] = {dist(rng), dist(rng), dist(rng)};
      if (!close(evaluator(in), c.reference(in[0], in[1], in[2]))) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}

namespace {

// A random expression as text and as an independent evaluation of the same tree.
struct Generated {
  std::string text;
  std::function<double(const double*)> value;
};

Generated generate(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  if (depth == 0 || pick(4) == 0) {
    switch (pick(3)) {
      case 0: {
        const int k = pick(3);
        return {std::string(1, static_cast<char>('a' + k)), [k](const double* in) { return in[k]; }};
      }
      case 1: {
        const int k = pick(9) + 1;
        return {std::to_string(k) + ".5f", [k](const double*) { return k + 0.5; }};
      }
      default: {
        const int n = pick(20) - 10, d = pick(4) + 1;  // an integer division with C semantics
        return {"(" + std::to_string(n) + " / " + std::to_string(d) + ")",
                [n, d](const double*) { return static_cast<double>(n / d); }};
      }
    }
  }
  const Generated l = generate(rng, depth - 1);
  const Generated r = generate(rng, depth - 1);
  const auto lv = l.value, rv = r.value;
  switch (pick(9)) {
    case 0:
      return {"(" + l.text + " + " + r.text + ")", [=](const double* in) { return lv(in) + rv(in); }};
    case 1:
      return {"(" + l.text + " - " + r.text + ")", [=](const double* in) { return lv(in) - rv(in); }};
    case 2:
      return {"(" + l.text + " * " + r.text + ")", [=](const double* in) { return lv(in) * rv(in); }};
    case 3:
      return {"(" + l.text + " / (fabsf(" + r.text + ") + 1))",
              [=](const double* in) { return lv(in) / (std::fabs(rv(in)) + 1); }};
    case 4:
      return {"(" + l.text + " < " + r.text + " ? " + r.text + " : " + l.text + ")",
              [=](const double* in) { return lv(in) < rv(in) ? rv(in) : lv(in); }};
    case 5:
      return {"sinf(" + l.text + ")", [=](const double* in) { return std::sin(lv(in)); }};
    case 6:
      return {"fminf(" + l.text + ", " + r.text + ")",
              [=](const double* in) { return std::fmin(lv(in), rv(in)); }};
    case 7:
      return {"-(" + l.text + ")", [=](const double* in) { return -lv(in); }};
    default:
      return {"tanhf(" + l.text + " * 0.25f)", [=](const double* in) { return std::tanh(lv(in) * 0.25); }};
  }
}

}  // namespace

TEST_CASE("random expressions match an independent evaluation of the same tree") {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> dist(-3, 3);
  for (int trial = 0; trial < 300; ++trial) {
    const Generated g = generate(rng, 5);
    const std::string text = "y = a * 0 + " + g.text;  // every expression reads at least 'a'
    CAPTURE(text);
    const Expression expression = parse_expression(text);
    REQUIRE(expression.inputs.front() == "a");
    // Evaluate by input name, since the order of first appearance varies.
    const Evaluator evaluator(expression);
    int mismatches = 0;
    for (int i = 0; i < 200; ++i) {
      const double named[3] = {dist(rng), dist(rng), dist(rng)};  // a, b, c
      double ordered[3] = {};
      for (size_t k = 0; k < expression.inputs.size(); ++k) ordered[k] = named[expression.inputs[k][0] - 'a'];
      if (!close(evaluator(ordered), named[0] * 0 + g.value(named))) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}
