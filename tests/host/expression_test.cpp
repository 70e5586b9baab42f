// Elementwise expressions parsed: canonical form, input names, numeric literal forms, every rejection with
// its message, and the parse memo.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "expression_test_support.hpp"

using jitune::templates::elementwise::parse_expression_cached;
using namespace expression_test;

TEST_CASE("canonical form joins tokens with single spaces") {
  const Expression e = parse_expression("z=x*y");
  CHECK(e.canonical == "z = x * y");
  CHECK(e.output == "z");
  CHECK(e.rhs == "x * y");
  CHECK(e.inputs == Strings{"x", "y"});

  CHECK(parse_expression("  out\t=\n a*b +c ").canonical == "out = a * b + c");
  CHECK(parse_expression("y=x>0?x:0.1f*x").canonical == "y = x > 0 ? x : 0.1f * x");
  CHECK(parse_expression("y=(a<=b)&&!(c!=d)||a<<2>>1").rhs == "( a <= b ) && ! ( c != d ) || a << 2 >> 1");
  CHECK(parse_expression("y=-x- -1.5e-3f*tanhf(x)").rhs == "- x - - 1.5e-3f * tanhf ( x )");
  CHECK(parse_expression("y=(float)x/.5+0x1F+10u").rhs == "( float ) x / .5 + 0x1F + 10u");
}

TEST_CASE("the canonical form parses back to itself") {
  for (const char* text : {"z=x*y", "y = x>0 ? x : 0.1f*x", "o=fmaxf(a,b)-(int)c%3", "y=!a||~(int)b&1"}) {
    const Expression once = parse_expression(text);
    const Expression twice = parse_expression(once.canonical);
    CHECK(twice.canonical == once.canonical);
    CHECK(twice.rhs == once.rhs);
    CHECK(twice.inputs == once.inputs);
  }
}

TEST_CASE("inputs are listed in order of first appearance, once each") {
  CHECK(parse_expression("z = y * x").inputs == Strings{"y", "x"});
  CHECK(parse_expression("z = b * a + b - c * a").inputs == Strings{"b", "a", "c"});
  CHECK(parse_expression("out = a * b + c").inputs == Strings{"a", "b", "c"});
}

TEST_CASE("the output may also be read") {
  const Expression e = parse_expression("x = x * 2");
  CHECK(e.output == "x");
  CHECK(e.inputs == Strings{"x"});
  CHECK(eval("x = x * 2", {3.5}) == 7.0);
}

TEST_CASE("constants and functions are not inputs") {
  CHECK(parse_expression("y = x * M_PI + M_E - INFINITY * NAN + true - false").inputs == Strings{"x"});
  CHECK(parse_expression("y = expf(x) + powf(a, 2) + tanhf(x)").inputs == Strings{"x", "a"});
  // Unknown functions are still functions for parsing; only the evaluator rejects them.
  CHECK(parse_expression("y = my_func(x, w)").inputs == Strings{"x", "w"});
  // A function name used without a call is a plain name.
  CHECK(parse_expression("y = expf + x").inputs == Strings{"expf", "x"});
}

TEST_CASE("exactly kMaxInputs inputs are accepted") {
  const Expression e = parse_expression("y = a + b + c + d + e + f + g + h");
  CHECK(e.inputs.size() == static_cast<size_t>(jitune::templates::elementwise::kMaxInputs));
  CHECK(eval("y = a + b + c + d + e + f + g + h", {1, 2, 3, 4, 5, 6, 7, 8}) == 36.0);
}

TEST_CASE("numeric literal forms") {
  CHECK(eval("y = x * 1.5", {2}) == 3.0);
  CHECK(eval("y = x * .5", {2}) == 1.0);
  CHECK(eval("y = x * 1.", {2}) == 2.0);
  CHECK(eval("y = x * 1e-3", {2}) == 2e-3);
  CHECK(eval("y = x * 1.e2", {2}) == 200.0);
  CHECK(eval("y = x * 2.0f", {2}) == 4.0);
  CHECK(eval("y = x * 1.5e3f", {2}) == 3000.0);
  CHECK(eval("y = x + 1E+2F", {0}) == 100.0);
  CHECK(eval("y = x + 0x10", {0}) == 16.0);
  CHECK(eval("y = x + 0XfF", {0}) == 255.0);
  CHECK(eval("y = x + 0b101", {0}) == 5.0);
  CHECK(eval("y = x + 010", {0}) == 8.0);  // octal, as in C
  CHECK(eval("y = x + 10u + 10l + 10ull + 10LLU", {0}) == 40.0);
  CHECK(eval("y = x + 9223372036854775807 / 4611686018427387904", {0}) == 1.0);
  // f-suffixed literals have their float value; unsuffixed ones their double value.
  CHECK(eval("y = x * 0.1f", {1}) == static_cast<double>(0.1f));
  CHECK(eval("y = x * 0.1", {1}) == 0.1);
  CHECK(static_cast<double>(0.1f) != 0.1);
}

TEST_CASE("characters outside C expressions are rejected with a caret") {
  struct Case {
    std::string text;
    size_t pos;
    std::string shown;
  };
  const std::vector<Case> cases = {
      {"z = x * y; w = x", 9, "';'"},
      {"z = { x }", 4, "'{'"},
      {"z = x }", 6, "'}'"},
      {"z = \"x\"", 4, "'\"'"},
      {"z = 'x'", 4, "'''"},
      {"#define z", 0, "'#'"},
      {"z = x[0]", 5, "'['"},
      {"z = x]", 5, "']'"},
      {"z = x \\ y", 6, "'\\'"},
      {"z = x @ y", 6, "'@'"},
      {"z = $x", 4, "'$'"},
      {"z = `x`", 4, "'`'"},
      {"z = x . y", 6, "'.'"},
      {"z = x\x01", 5, "control character 0x01"},
      {"z = \xC3\xA9 * x", 4, "non-ASCII byte 0xC3"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string message = parse_error(c.text);
    CHECK(message.find("unexpected " + c.shown) != std::string::npos);
    CHECK(message.find(caret(c.text, c.pos)) != std::string::npos);
    CHECK(message.find("column " + std::to_string(c.pos + 1)) != std::string::npos);
    CHECK(message.find("statements, blocks and strings are not allowed") != std::string::npos);
  }
}

TEST_CASE("the caret stays aligned when the text has newlines and tabs") {
  const std::string message = parse_error("z =\tx *\ny;");
  CHECK(message.find(caret("z = x * y;", 9)) != std::string::npos);
}

TEST_CASE("empty text is rejected") {
  for (const char* text : {"", "   ", "\n\t"}) {
    const std::string message = parse_error(text);
    CHECK(message.find("empty") != std::string::npos);
    CHECK(message.find("z = x * y") != std::string::npos);
  }
}

TEST_CASE("the output must be assigned") {
  struct Case {
    std::string text;
    size_t pos;
  };
  for (const Case& c : std::vector<Case>{
           {"x * y", 2}, {"z == x", 2}, {"= x", 0}, {"3 = x", 0}, {"z", 1}, {"(z) = x", 0}, {"z x = y", 2}}) {
    CAPTURE(c.text);
    const std::string message = parse_error(c.text);
    CHECK(message.find("must assign the output, e.g. 'z = x * y'") != std::string::npos);
    CHECK(message.find(caret(c.text, c.pos)) != std::string::npos);
  }
}

TEST_CASE("only one assignment is allowed") {
  for (const std::string text : {"z = x = y", "z = (w = x) + 1", "z = x == y = 2"}) {
    CAPTURE(text);
    const std::string message = parse_error(text);
    CHECK(message.find("second assignment") != std::string::npos);
    CHECK(message.find(caret(text, text.rfind('='))) != std::string::npos);
  }
}

TEST_CASE("compound assignment, increments and member access are rejected by name") {
  CHECK(parse_error("z += x").find("operator '+='") != std::string::npos);
  CHECK(parse_error("z = x <<= 1").find("operator '<<='") != std::string::npos);
  CHECK(parse_error("z = x++").find("increment and decrement") != std::string::npos);
  CHECK(parse_error("z = --x").find(caret("z = --x", 4)) != std::string::npos);
  CHECK(parse_error("z = x->y").find("member access") != std::string::npos);
  CHECK(parse_error("z = std::exp(x)").find("qualified names") != std::string::npos);
}

TEST_CASE("an empty right-hand side is rejected") {
  for (const char* text : {"z =", "z =   "}) {
    const std::string message = parse_error(text);
    CHECK(message.find("right-hand side is empty") != std::string::npos);
    CHECK(message.find(caret(text, 3)) != std::string::npos);
  }
}

TEST_CASE("syntax errors in the right-hand side point at the problem") {
  struct Case {
    std::string text;
    size_t pos;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"z = x +", 7, "expected a value"},
      {"z = (x + y", 10, "missing ')' for the '(' at column 5"},
      {"z = x + y)", 9, "has no matching '('"},
      {"z = ((x) + y", 12, "missing ')'"},
      {"z = x y", 6, "expected an operator before 'y'"},
      {"z = 2 (y)", 6, "expected an operator before '('"},
      {"z = x and y", 6, "'and' is a C++ keyword"},
      {"z = x ? y", 9, "expected ':' for the '?' at column 7"},
      {"z = x : y", 6, "':' without a matching '?'"},
      {"z = * x", 4, "expected a value (a name, a number or '('), found '*'"},
      {"z = f(x,)", 8, "expected a value"},
      {"z = f(x y)", 8, "expected ',' or ')' in the call to 'f'"},
      {"z = f(x", 7, "expected ',' or ')'"},
      {"z = ()", 5, "expected a value"},
      {"z = x , y", 6, "',' is only allowed between function arguments"},
      {"z = (int)", 9, "expected a value"},
      {"z = x <", 7, "expected a value"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string message = parse_error(c.text);
    CHECK(message.find(c.says) != std::string::npos);
    CHECK(message.find(caret(c.text, c.pos)) != std::string::npos);
  }
}

TEST_CASE("malformed numbers are rejected") {
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"z = 1.5.3 * x", "malformed number '1.5.3'"},
      {"z = 2x", "malformed number '2x'"},
      {"z = 1e * x", "the exponent has no digits"},
      {"z = 1e+ * x", "the exponent has no digits"},
      {"z = 08 + x", "octal"},
      {"z = 0x + x", "no digits after the base prefix"},
      {"z = 2f * x", "write 2.0f"},
      {"z = 1.5u * x", "unexpected 'u'"},
      {"z = 10uu * x", "unexpected 'uu'"},
      {"z = 99999999999999999999 * x", "does not fit in 64 bits"},
      {"z = 0xFFFFFFFFFFFFFFFF * x", "does not fit in 64 bits"},
      {"z = 1e999 * x", "out of the range of double"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string message = parse_error(c.text);
    CHECK(message.find(c.says) != std::string::npos);
    CHECK(message.find(caret(c.text, 4)) != std::string::npos);
  }
}

TEST_CASE("too many inputs are rejected, naming them") {
  const std::string text = "y = a + b + c + d + e + f + g + h + i";
  const std::string message = parse_error(text);
  CHECK(message.find("reads 9 inputs (a, b, c, d, e, f, g, h, i)") != std::string::npos);
  CHECK(message.find("at most 8") != std::string::npos);
  CHECK(message.find(caret(text, text.find('i'))) != std::string::npos);
}

TEST_CASE("an expression that reads no input is rejected") {
  for (const char* text : {"z = 1 + 2", "z = expf(1.0f)", "z = M_PI * true", "z = (float)2"}) {
    CAPTURE(text);
    const std::string message = parse_error(text);
    CHECK(message.find("reads no input") != std::string::npos);
    CHECK(message.find(caret(text, 4)) != std::string::npos);
  }
}

TEST_CASE("reserved names are rejected") {
  struct Case {
    std::string text;
    size_t pos;
  };
  for (const Case& c : std::vector<Case>{{"z = __x + 1", 4},
                                         {"z = x * jitune_scale", 8},
                                         {"__z = x", 0},
                                         {"jitune_out = x", 0},
                                         {"y = __expf(x)", 4},
                                         {"y = jitunex + x", 4}}) {
    CAPTURE(c.text);
    const std::string message = parse_error(c.text);
    CHECK(message.find("is reserved") != std::string::npos);
    CHECK(message.find(caret(c.text, c.pos)) != std::string::npos);
  }
  CHECK_NOTHROW(parse_expression("y = x__ + _x + my_jitune"));
}

TEST_CASE("keywords cannot be names, but casts are allowed") {
  struct Case {
    std::string text;
    size_t pos;
    std::string name;
  };
  const std::vector<Case> cases = {
      {"z = float + x", 4, "float"}, {"z = x * int", 8, "int"},          {"return = x", 0, "return"},
      {"z = if", 4, "if"},           {"z = sizeof(x)", 4, "sizeof"},     {"z = x and y", 6, "and"},
      {"z = float(x)", 4, "float"},  {"z = (unsigned)x", 5, "unsigned"}, {"z = (float x)", 5, "float"},
      {"while = x", 0, "while"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string message = parse_error(c.text);
    CHECK(message.find("'" + c.name + "' is a C++ keyword") != std::string::npos);
    CHECK(message.find(caret(c.text, c.pos)) != std::string::npos);
  }
  CHECK(parse_expression("z = (float)x + (double)y + (int)w").inputs == Strings{"x", "y", "w"});
  CHECK(parse_error("NAN = x").find("cannot assign to the constant 'NAN'") != std::string::npos);
}

TEST_CASE("deep nesting is rejected instead of overflowing the stack") {
  const std::string deep = "z = " + std::string(5000, '(') + "x" + std::string(5000, ')');
  CHECK(parse_error(deep).find("nests more than") != std::string::npos);
  const std::string unary = "z = " + std::string(5000, '!') + "x";
  CHECK(parse_error(unary).find("nests more than") != std::string::npos);
  // Moderate nesting still works.
  CHECK(eval("z = " + std::string(50, '(') + "x" + std::string(50, ')'), {3}) == 3.0);
}

TEST_CASE("the parse memo returns one shared expression per text") {
  const std::string text = "memo_out = memo_a * memo_b + 1";
  const std::shared_ptr<const Expression> first = parse_expression_cached(text);
  REQUIRE(first != nullptr);
  CHECK(parse_expression_cached(text) == first);
  CHECK(parse_expression_cached(std::string(text)) == first);  // keyed by content, not by the caller's buffer
  const Expression fresh = parse_expression(text);
  CHECK(first->canonical == fresh.canonical);
  CHECK(first->output == fresh.output);
  CHECK(first->rhs == fresh.rhs);
  CHECK(first->inputs == fresh.inputs);
  // Another spelling of the same expression is another key (the key is the text, not the canonical form).
  const auto spaced = parse_expression_cached("memo_out=memo_a*memo_b+1");
  CHECK(spaced != first);
  CHECK(spaced->canonical == first->canonical);
}

TEST_CASE("the parse memo throws parse_expression's error every time and remembers nothing for it") {
  for (const std::string text : {"z = x +", "", "z = x; y", "y = a + b + c + d + e + f + g + h + i"}) {
    CAPTURE(text);
    const std::string want = parse_error(text);
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::string got;
      try {
        parse_expression_cached(text);
      } catch (const InvalidArgument& e) {
        got = e.what();
      }
      CHECK(got == want);
    }
  }
}

TEST_CASE("expressions from the parse memo stay valid after it starts again") {
  const auto held = parse_expression_cached("held = x * 3");
  const auto before = parse_expression_cached("held = x * 3");
  CHECK(before == held);
  for (std::size_t i = 0; i <= jitune::templates::elementwise::kExpressionCacheLimit; ++i)
    parse_expression_cached("y = x * " + std::to_string(i));
  // The memo was emptied on the way: the held expression is intact and the text parses again to an equal one.
  CHECK(held->canonical == "held = x * 3");
  CHECK(held->inputs == Strings{"x"});
  const double in[1] = {2};
  CHECK(Evaluator(*held)(in) == 6.0);
  const auto again = parse_expression_cached("held = x * 3");
  CHECK(again->canonical == held->canonical);
  CHECK(parse_expression_cached("held = x * 3") == again);
}

TEST_CASE("the parse memo gives every thread the same expression for a text") {
  constexpr std::size_t kThreads = 8, kTexts = 64;
  // seen[t][k]: what thread t got for text k. The threads start at different texts, so they race on new ones.
  using Row = std::vector<std::shared_ptr<const Expression>>;
  std::vector<Row> seen(kThreads, Row(kTexts));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&seen, t] {
      for (std::size_t step = 0; step < kTexts; ++step) {
        const std::size_t k = (step + t * 5) % kTexts;
        seen[t][k] = parse_expression_cached("threaded = x + " + std::to_string(k));
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (std::size_t k = 0; k < kTexts; ++k) {
    CAPTURE(k);
    REQUIRE(seen[0][k] != nullptr);
    CHECK(seen[0][k]->rhs == "x + " + std::to_string(k));
    for (std::size_t t = 1; t < kThreads; ++t) CHECK(seen[t][k] == seen[0][k]);
  }
}
