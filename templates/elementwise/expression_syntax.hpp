// Internals of the elementwise expression parser shared by its three parts: the lexer (expression_lexer.cpp:
// tokens, number literals, diagnostics), the parser (expression_parser.cpp: names, syntax tree, the statement
// checks) and the host evaluator (expression_eval.cpp), which types and compiles the same syntax tree. Not
// part of the family's interface: include templates/elementwise/expression.hpp instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jitune::templates::elementwise::detail {

/// Hint for anything that is not a single C assignment.
inline constexpr std::string_view kStatementHint =
    "expressions are one C assignment like 'z = x * y'; statements, blocks and strings are not allowed";
/// Hint for a statement that does not assign the output.
inline constexpr std::string_view kAssignHint = "the expression must assign the output, e.g. 'z = x * y'";
/// Bounds the parser's recursion (no stack overflow on hostile input) and, with it, the evaluation stack.
inline constexpr int kMaxNesting = 256;
/// Deepest value stack the host evaluator runs with.
inline constexpr int kMaxStack = 256;

/// Throws InvalidArgument "invalid elementwise expression: <what> (column N)", the text with a caret under
/// byte `pos`, and `hint` on its own line when not empty.
[[noreturn]] void fail(std::string_view text, std::size_t pos, const std::string& what,
                       std::string_view hint);
/// `s` in single quotes, as the messages quote names and tokens.
std::string quoted(std::string_view s);
/// The whitespace C allows between tokens.
bool is_space(char c);

enum class TokenKind { kIdentifier, kNumber, kOperator };

/// One token of the expression text.
struct Token {
  TokenKind kind;
  std::string_view text;  ///< View into the parsed text.
  std::size_t pos;        ///< Byte offset of the first character.
};

/// Splits `text` into tokens; throws (via fail) on characters and operators expressions do not allow.
std::vector<Token> tokenize(std::string_view text);

/// The value of a number token: C's integer or floating type, its value.
struct Literal {
  bool is_float = false;
  std::int64_t i = 0;
  double f = 0;
};

/// Validates and converts a number token of `text` with C's rules (suffixes, octal, hex, binary, float
/// rounding).
Literal parse_number(std::string_view text, const Token& token);

enum class NodeKind { kLiteral, kConstant, kInput, kUnary, kBinary, kTernary, kCall, kCast };

/// A syntax tree node; children are indices into Statement::nodes.
struct AstNode {
  NodeKind kind;
  std::size_t token;  ///< Operator, name or literal token; the cast's type name.
  std::vector<int> args;
  Literal literal{};
  int input = -1;  ///< kInput: index into Statement::inputs.
};

/// A checked "output = right-hand side" statement: tokens, syntax tree and inputs.
struct Statement {
  std::string_view text;
  std::vector<Token> tokens;
  std::vector<AstNode> nodes;
  int root = -1;
  std::vector<std::string_view> inputs;  ///< In order of first appearance.
  std::vector<std::size_t> input_tokens;
};

/// C precedence of a binary operator token (1 for '||' up to 10 for '*'), 0 when it is none.
int binary_precedence(const Token& token);

/// Tokenizes, parses and checks `text` (everything parse_expression checks); the evaluator reuses it on the
/// canonical text. The statement views into `text`.
Statement parse_statement(std::string_view text);

}  // namespace jitune::templates::elementwise::detail
