// Elementwise expressions ("z = x * y"): tokenizing, validation, the canonical form, input names, a memo of parsed
// expressions, and a host evaluator used as the CPU reference when verifying candidates. Implemented in
// expression_lexer.cpp, expression_parser.cpp, expression_cache.cpp and expression_eval.cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace jitune::templates::elementwise {

/// Most inputs an expression may read.
inline constexpr int kMaxInputs = 8;

/// A parsed "output = right-hand side" statement.
struct Expression {
  std::string canonical;             ///< Tokens joined by single spaces: "z = x * y".
  std::string output;                ///< Assigned name ("z").
  std::string rhs;                   ///< Canonical right-hand side ("x * y").
  std::vector<std::string> inputs;   ///< Names read on the right-hand side, in order of first appearance.
};

/// Parses and validates `text`. Throws InvalidArgument quoting the text, the offending position (with a caret line)
/// and what to do: empty text, no assignment, characters outside C expression syntax (';', '{', '"', '#', ...),
/// unbalanced parentheses, more than kMaxInputs inputs, no input at all, reserved names (jitune_*, __*).
/// Identifiers followed by '(' are functions; every other identifier is an input, except the literals/constants
/// `true`, `false`, `INFINITY`, `NAN`, `M_PI`, `M_E` (constants are accepted by the device code too).
Expression parse_expression(std::string_view text);

/// Texts parse_expression_cached remembers at most; past that the memo is emptied and starts again.
inline constexpr std::size_t kExpressionCacheLimit = 4096;

/// parse_expression through a process-wide memo keyed by the exact text: the same text gives the same shared,
/// immutable Expression without parsing it again. Thread-safe. A text that fails throws as parse_expression does,
/// every time, and is not remembered. An Expression handed out stays valid after the memo is emptied (it is shared,
/// never borrowed).
std::shared_ptr<const Expression> parse_expression_cached(std::string_view text);

/// Evaluates an expression on the host in double precision with C's typing rules for integer literals
/// (1 / 2 == 0, 1.0f / 2 == 0.5), used as the CPU reference.
class Evaluator {
 public:
  /// Throws InvalidArgument naming the construct when the expression uses something the host evaluator does not
  /// support (the GPU may still compile it; the tuner then cannot verify it and says so).
  explicit Evaluator(const Expression& expression);
  ~Evaluator();
  Evaluator(Evaluator&&) noexcept;
  Evaluator& operator=(Evaluator&&) noexcept;

  /// Value of the output for input values in Expression::inputs order.
  double operator()(const double* inputs) const;

 private:
  struct Node;
  std::unique_ptr<Node> root_;
};

}  // namespace jitune::templates::elementwise
