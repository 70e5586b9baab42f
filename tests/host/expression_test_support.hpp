// Shared helpers of the elementwise expression tests (expression_test.cpp, expression_eval_test.cpp): the
// message a rejected text throws, the caret line, and evaluation of a text on given inputs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <jitune/error.hpp>

#include "templates/elementwise/expression.hpp"

using jitune::InvalidArgument;
using jitune::templates::elementwise::Evaluator;
using jitune::templates::elementwise::Expression;
using jitune::templates::elementwise::parse_expression;

namespace expression_test {

using Strings = std::vector<std::string>;

// Message of the InvalidArgument that parse_expression(text) throws; fails the test if it does not throw.
inline std::string parse_error(const std::string& text) {
  try {
    parse_expression(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("parse_expression accepted '" << text << "'");
  return {};
}

// Message of the InvalidArgument that Evaluator throws for a text parse_expression accepts.
inline std::string evaluator_error(const std::string& text) {
  const Expression expression = parse_expression(text);
  try {
    Evaluator evaluator(expression);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("Evaluator accepted '" << text << "'");
  return {};
}

// The quoted text with a caret under byte `pos`, as the messages show it.
inline std::string caret(const std::string& text, size_t pos) {
  return "  " + text + "\n  " + std::string(pos, ' ') + "^";
}

inline double eval(const std::string& text, std::vector<double> inputs) {
  const Evaluator evaluator(parse_expression(text));
  return evaluator(inputs.data());
}

inline bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

inline bool close(double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= 1e-12 * std::max(1.0, std::fabs(want));
}

}  // namespace expression_test
