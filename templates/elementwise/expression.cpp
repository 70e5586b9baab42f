// Elementwise expressions. One tokenizer and one recursive-descent parser (C precedence and associativity)
// serve both parse_expression (validation, canonical text, input names) and Evaluator, which types the tree
// with C's rules for integer and floating operands and flattens it into a postfix program run on a small
// fixed-size stack (no allocation per call; safe to call from several threads).
//
// Host semantics where C is undefined or the device differs (tested in tests/host/expression_test.cpp):
//   - Integers are 64-bit and wrap on overflow. Division or remainder by zero gives 0, INT64_MIN / -1 wraps,
//     a shift by a negative count gives 0 and by 64 or more gives 0 (-1 for '>>' of a negative value).
//   - '%', '~', '&', '|', '^', '<<' and '>>' need integer operands. Types are known statically (inputs are
//     floating), so the Evaluator constructor rejects misuse instead of producing NaN at evaluation time.
//   - Float-suffixed literals (0.1f) and (float) casts take their float value; other arithmetic is double.
//   - (int) truncates toward zero, saturating at the 32-bit int range with NaN -> 0, like the GPU's cvt.
//   - Unsigned and long suffixes (10u, 10ul) are accepted and evaluated as signed 64-bit integers.
#include "templates/elementwise/expression.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <jitune/error.hpp>

namespace jitune::ew {
namespace {

constexpr std::string_view kStatementHint =
    "expressions are one C assignment like 'z = x * y'; statements, blocks and strings are not allowed";
constexpr std::string_view kAssignHint = "the expression must assign the output, e.g. 'z = x * y'";
constexpr std::string_view kNumberHint = "write numbers as C literals, e.g. 2, 0.5f, 1e-3f, 0x1F";
// Bounds the parser's recursion (no stack overflow on hostile input) and, with it, the evaluation stack.
constexpr int kMaxNesting = 256;
constexpr int kMaxStack = 256;

// ---------------------------------------------------------------------------------------------------------------
// Diagnostics

std::string caret_block(std::string_view text, size_t pos) {
  std::string line(text);
  // Newlines and tabs would break the caret's alignment.
  for (char& c : line)
    if (c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') c = ' ';
  return "  " + line + "\n  " + std::string(std::min(pos, text.size()), ' ') + "^";
}

[[noreturn]] void fail(std::string_view text, size_t pos, const std::string& what, std::string_view hint) {
  std::string message = "invalid elementwise expression: " + what + " (column " + std::to_string(pos + 1) +
                        ")\n" + caret_block(text, pos);
  if (!hint.empty()) message += "\n" + std::string(hint);
  throw InvalidArgument(message);
}

std::string describe_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  constexpr char kHex[] = "0123456789ABCDEF";
  const std::string code = std::string("0x") + kHex[u >> 4] + kHex[u & 15];
  if (u >= 0x80) return "non-ASCII byte " + code;
  if (u < 0x20 || u == 0x7f) return "control character " + code;
  return std::string("'") + c + "'";
}

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// ---------------------------------------------------------------------------------------------------------------
// Tokens

enum class TokenKind { kIdentifier, kNumber, kOperator };

struct Token {
  TokenKind kind;
  std::string_view text;  // view into the parsed text
  size_t pos;             // byte offset of the first character
};

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

struct OperatorSpelling {
  std::string_view text;
  std::string_view rejection;  // empty: allowed
};

constexpr std::string_view kCompound =
    "compound assignments are not allowed; write the full assignment, e.g. 'z = z + x'";
constexpr std::string_view kIncrement = "increment and decrement are not allowed; write e.g. 'z = x + 1'";

// Longest spellings first so that "<<=" is not read as "<<" and "=".
constexpr OperatorSpelling kOperators[] = {
    {"<<=", kCompound},
    {">>=", kCompound},
    {"++", kIncrement},
    {"--", kIncrement},
    {"+=", kCompound},
    {"-=", kCompound},
    {"*=", kCompound},
    {"/=", kCompound},
    {"%=", kCompound},
    {"&=", kCompound},
    {"|=", kCompound},
    {"^=", kCompound},
    {"->", "member access is not allowed; inputs are plain values"},
    {"::", "qualified names like std::exp are not allowed; call the function directly, e.g. expf(x)"},
    {"<<", ""},
    {">>", ""},
    {"<=", ""},
    {">=", ""},
    {"==", ""},
    {"!=", ""},
    {"&&", ""},
    {"||", ""},
    {"+", ""},
    {"-", ""},
    {"*", ""},
    {"/", ""},
    {"%", ""},
    {"<", ""},
    {">", ""},
    {"!", ""},
    {"~", ""},
    {"&", ""},
    {"|", ""},
    {"^", ""},
    {"?", ""},
    {":", ""},
    {"(", ""},
    {")", ""},
    {",", ""},
    {"=", ""},
};

// A C preprocessing number: digits, letters, '_', '.', and a sign right after a decimal exponent. Validated
// later.
size_t number_end(std::string_view text, size_t i) {
  const bool hex = text.size() > i + 1 && text[i] == '0' && (text[i + 1] == 'x' || text[i + 1] == 'X');
  size_t j = i;
  while (j < text.size()) {
    const char c = text[j];
    if (is_alpha(c) || is_digit(c) || c == '.') {
      ++j;
    } else if ((c == '+' || c == '-') && !hex && (text[j - 1] == 'e' || text[j - 1] == 'E')) {
      ++j;
    } else {
      break;
    }
  }
  return j;
}

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    if (is_alpha(c)) {
      size_t j = i;
      while (j < text.size() && (is_alpha(text[j]) || is_digit(text[j]))) ++j;
      tokens.push_back({TokenKind::kIdentifier, text.substr(i, j - i), i});
      i = j;
      continue;
    }
    if (is_digit(c) || (c == '.' && i + 1 < text.size() && is_digit(text[i + 1]))) {
      const size_t j = number_end(text, i);
      tokens.push_back({TokenKind::kNumber, text.substr(i, j - i), i});
      i = j;
      continue;
    }
    bool matched = false;
    for (const OperatorSpelling& op : kOperators) {
      if (text.substr(i, op.text.size()) != op.text) continue;
      if (!op.rejection.empty())
        fail(text, i, "operator " + quoted(op.text) + " is not allowed", op.rejection);
      tokens.push_back({TokenKind::kOperator, op.text, i});
      i += op.text.size();
      matched = true;
      break;
    }
    if (!matched) fail(text, i, "unexpected " + describe_char(c), kStatementHint);
  }
  return tokens;
}

// ---------------------------------------------------------------------------------------------------------------
// Literals

struct Literal {
  bool is_float = false;
  std::int64_t i = 0;
  double f = 0;
};

bool valid_integer_suffix(std::string_view s) {
  if (!s.empty() && (s.front() == 'u' || s.front() == 'U')) {
    s.remove_prefix(1);
  } else if (!s.empty() && (s.back() == 'u' || s.back() == 'U')) {
    s.remove_suffix(1);
  }
  return s.empty() || s == "l" || s == "L" || s == "ll" || s == "LL";
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

Literal parse_number(std::string_view text, const Token& token) {
  const std::string_view s = token.text;
  auto bad = [&](const std::string& why) {
    fail(text, token.pos, "malformed number " + quoted(s) + why, kNumberHint);
  };
  auto too_large = [&] {
    fail(text, token.pos, "integer literal " + quoted(s) + " does not fit in 64 bits",
         "write it as a floating literal, e.g. 1e20f");
  };
  Literal literal;

  int base = 10;
  size_t j = 0;
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'b' || s[1] == 'B')) {
    base = (s[1] == 'x' || s[1] == 'X') ? 16 : 2;
    j = 2;
    std::uint64_t value = 0;
    const size_t first = j;
    while (j < s.size() && digit_value(s[j]) < base) {
      const auto digit = static_cast<std::uint64_t>(digit_value(s[j]));
      if (value > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) / base)
        too_large();
      value = value * base + digit;
      ++j;
    }
    if (j == first) bad(": no digits after the base prefix");
    if (!valid_integer_suffix(s.substr(j))) bad(": unexpected " + quoted(s.substr(j)));
    literal.i = static_cast<std::int64_t>(value);
    return literal;
  }

  while (j < s.size() && is_digit(s[j])) ++j;
  size_t mantissa_digits = j;
  const size_t integer_digits = j;
  if (j < s.size() && s[j] == '.') {
    literal.is_float = true;
    ++j;
    const size_t first = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    mantissa_digits += j - first;
  }
  if (mantissa_digits == 0) bad("");
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    literal.is_float = true;
    ++j;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    const size_t first = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    if (j == first) bad(": the exponent has no digits");
  }
  const std::string_view body = s.substr(0, j);
  const std::string_view suffix = s.substr(j);

  if (literal.is_float) {
    if (!(suffix.empty() || suffix == "f" || suffix == "F" || suffix == "l" || suffix == "L"))
      bad(": unexpected " + quoted(suffix));
    const auto [end, error] = std::from_chars(body.data(), body.data() + body.size(), literal.f);
    if (error != std::errc() || end != body.data() + body.size())
      fail(text, token.pos, "floating literal " + quoted(s) + " is out of the range of double", kNumberHint);
    // A float literal's value is its float rounding: 0.1f is not 0.1.
    if (suffix == "f" || suffix == "F") literal.f = static_cast<float>(literal.f);
    return literal;
  }

  if (!valid_integer_suffix(suffix)) {
    if (suffix == "f" || suffix == "F")
      bad(": an integer cannot take the suffix 'f'; write " + std::string(body) + ".0f");
    bad(": unexpected " + quoted(suffix));
  }
  if (integer_digits > 1 && body[0] == '0') {
    base = 8;  // C reads a leading 0 as octal: 010 == 8
    for (char c : body)
      if (c > '7') bad(": a leading 0 makes it octal, which has no digit " + quoted(std::string(1, c)));
  }
  const auto [end, error] = std::from_chars(body.data(), body.data() + body.size(), literal.i, base);
  if (error == std::errc::result_out_of_range) too_large();
  if (error != std::errc() || end != body.data() + body.size()) bad("");
  return literal;
}

// ---------------------------------------------------------------------------------------------------------------
// Names

constexpr std::string_view kConstants[] = {"true", "false", "INFINITY", "NAN", "M_PI", "M_E"};
constexpr std::string_view kCastTypes[] = {"float", "double", "int"};

// C, C++ and their alternative operator spellings ("and" is "&&" in C++, so it cannot be a name either).
// clang-format off
constexpr std::string_view kKeywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "co_await", "co_return", "co_yield", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "decltype", "default", "delete", "do",
    "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "restrict", "return",
    "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "wchar_t", "while", "xor", "xor_eq",
};
// clang-format on

template <size_t N>
bool contains(const std::string_view (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

void check_name(std::string_view text, const Token& token, bool is_output) {
  const std::string_view name = token.text;
  if (name.starts_with("__") || name.starts_with("jitune"))
    fail(text, token.pos, "name " + quoted(name) + " is reserved",
         "names starting with '__' or 'jitune' belong to the generated kernel; rename it");
  if (contains(kKeywords, name))
    fail(text, token.pos, quoted(name) + " is a C++ keyword and cannot be used as a name",
         "rename it; the only keywords allowed are the casts (float), (double), (int) and true/false");
  if (is_output && contains(kConstants, name))
    fail(text, token.pos, "cannot assign to the constant " + quoted(name), kAssignHint);
}

// ---------------------------------------------------------------------------------------------------------------
// Syntax tree

enum class NodeKind { kLiteral, kConstant, kInput, kUnary, kBinary, kTernary, kCall, kCast };

struct AstNode {
  NodeKind kind;
  size_t token;  // operator, name or literal token; the cast's type name
  std::vector<int> args;
  Literal literal{};
  int input = -1;  // kInput: index into Statement::inputs
};

struct Statement {
  std::string_view text;
  std::vector<Token> tokens;
  std::vector<AstNode> nodes;
  int root = -1;
  std::vector<std::string_view> inputs;  // first appearance order
  std::vector<size_t> input_tokens;
};

int binary_precedence(const Token& token) {
  if (token.kind != TokenKind::kOperator) return 0;
  const std::string_view op = token.text;
  if (op == "||") return 1;
  if (op == "&&") return 2;
  if (op == "|") return 3;
  if (op == "^") return 4;
  if (op == "&") return 5;
  if (op == "==" || op == "!=") return 6;
  if (op == "<" || op == "<=" || op == ">" || op == ">=") return 7;
  if (op == "<<" || op == ">>") return 8;
  if (op == "+" || op == "-") return 9;
  if (op == "*" || op == "/" || op == "%") return 10;
  return 0;
}

class Parser {
 public:
  Parser(Statement& statement, size_t first) : s_(statement), next_(first) {}

  int parse() {
    const int root = ternary();
    if (next_ < s_.tokens.size()) {
      const Token& t = s_.tokens[next_];
      if (t.kind == TokenKind::kIdentifier) check_name(s_.text, t, false);  // "x and y" is a keyword problem
      if (t.text == ")") fail_at(t, "unbalanced parentheses: this ')' has no matching '('", kStatementHint);
      if (t.text == ",") fail_at(t, "',' is only allowed between function arguments", kStatementHint);
      if (t.text == ":") fail_at(t, "':' without a matching '?'", "a conditional is written 'c ? a : b'");
      fail_at(t, "expected an operator before " + quoted(t.text), kStatementHint);
    }
    return root;
  }

 private:
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& parser) : parser_(parser) {
      if (++parser_.depth_ > kMaxNesting) {
        const size_t pos = parser_.next_ < parser_.s_.tokens.size() ? parser_.s_.tokens[parser_.next_].pos
                                                                    : parser_.end_pos();
        fail(parser_.s_.text, pos,
             "the expression nests more than " + std::to_string(kMaxNesting) + " levels deep",
             "split it or remove redundant parentheses");
      }
    }
    ~DepthGuard() { --parser_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& parser_;
  };

  size_t end_pos() const {
    const Token& last = s_.tokens.back();
    return last.pos + last.text.size();
  }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    const size_t i = next_ + ahead;
    return i < s_.tokens.size() && s_.tokens[i].kind == TokenKind::kOperator && s_.tokens[i].text == op;
  }
  [[noreturn]] void fail_at(const Token& token, const std::string& what, std::string_view hint) const {
    fail(s_.text, token.pos, what, hint);
  }
  [[noreturn]] void fail_here(const std::string& what, std::string_view hint) const {
    if (next_ < s_.tokens.size())
      fail(s_.text, s_.tokens[next_].pos, what + ", found " + quoted(s_.tokens[next_].text), hint);
    fail(s_.text, end_pos(), what + ", but the expression ends", hint);
  }
  std::string column_of(size_t token) const { return "column " + std::to_string(s_.tokens[token].pos + 1); }

  int add(NodeKind kind, size_t token, std::vector<int> args = {}) {
    s_.nodes.push_back(AstNode{kind, token, std::move(args)});
    return static_cast<int>(s_.nodes.size()) - 1;
  }

  int ternary() {
    DepthGuard guard(*this);
    const int condition = binary(1);
    if (!at_operator("?")) return condition;
    const size_t question = next_++;
    const int if_true = ternary();
    if (!at_operator(":"))
      fail_here("expected ':' for the '?' at " + column_of(question), "write 'c ? a : b'");
    ++next_;
    const int if_false = ternary();
    return add(NodeKind::kTernary, question, {condition, if_true, if_false});
  }

  // Precedence climbing: every operator in C's binary table is left-associative.
  int binary(int min_precedence) {
    int lhs = unary();
    while (next_ < s_.tokens.size()) {
      const int precedence = binary_precedence(s_.tokens[next_]);
      if (precedence == 0 || precedence < min_precedence) break;
      const size_t op = next_++;
      const int rhs = binary(precedence + 1);
      lhs = add(NodeKind::kBinary, op, {lhs, rhs});
    }
    return lhs;
  }

  int unary() {
    DepthGuard guard(*this);
    if (at_operator("+") || at_operator("-") || at_operator("!") || at_operator("~")) {
      const size_t op = next_++;
      const int operand = unary();
      return add(NodeKind::kUnary, op, {operand});
    }
    if (at_operator("(") && next_ + 2 < s_.tokens.size() && at_operator(")", 2) &&
        contains(kCastTypes, s_.tokens[next_ + 1].text)) {
      const size_t type = next_ + 1;
      next_ += 3;
      const int operand = unary();
      return add(NodeKind::kCast, type, {operand});
    }
    return primary();
  }

  int primary() {
    if (next_ >= s_.tokens.size()) fail_here("expected a value", kStatementHint);
    const size_t index = next_;
    const Token& token = s_.tokens[index];
    if (token.kind == TokenKind::kNumber) {
      ++next_;
      const int node = add(NodeKind::kLiteral, index);
      s_.nodes[node].literal = parse_number(s_.text, token);
      return node;
    }
    if (token.kind == TokenKind::kIdentifier) {
      ++next_;
      if (token.text != "true" && token.text != "false") check_name(s_.text, token, false);
      if (at_operator("(")) return call(index);
      if (contains(kConstants, token.text)) return add(NodeKind::kConstant, index);
      const int node = add(NodeKind::kInput, index);
      const auto found = std::find(s_.inputs.begin(), s_.inputs.end(), token.text);
      s_.nodes[node].input = static_cast<int>(found - s_.inputs.begin());
      if (found == s_.inputs.end()) {
        s_.inputs.push_back(token.text);
        s_.input_tokens.push_back(index);
      }
      return node;
    }
    if (at_operator("(")) {
      ++next_;
      const int inner = ternary();
      if (!at_operator(")"))
        fail_here("missing ')' for the '(' at " + column_of(index), "balance the parentheses");
      ++next_;
      return inner;
    }
    fail_here("expected a value (a name, a number or '(')", kStatementHint);
  }

  int call(size_t name) {
    const size_t open = next_++;
    std::vector<int> args;
    if (at_operator(")")) {
      ++next_;
      return add(NodeKind::kCall, name);
    }
    while (true) {
      args.push_back(ternary());
      if (at_operator(",")) {
        ++next_;
        continue;
      }
      if (at_operator(")")) break;
      fail_here("expected ',' or ')' in the call to " + quoted(s_.tokens[name].text) + " opened at " +
                    column_of(open),
                "balance the parentheses");
    }
    ++next_;
    return add(NodeKind::kCall, name, std::move(args));
  }

  Statement& s_;
  size_t next_;
  int depth_ = 0;
};

// Everything parse_expression checks; Evaluator reuses it on the canonical text.
Statement parse_statement(std::string_view text) {
  Statement s;
  s.text = text;
  if (std::all_of(text.begin(), text.end(), is_space))
    throw InvalidArgument("invalid elementwise expression: the text is empty\n" + std::string(kAssignHint));
  s.tokens = tokenize(text);

  const auto& tokens = s.tokens;
  if (tokens[0].kind != TokenKind::kIdentifier)
    fail(text, tokens[0].pos, "expected the output name, found " + quoted(tokens[0].text), kAssignHint);
  if (tokens.size() < 2)
    fail(text, tokens[0].pos + tokens[0].text.size(), "expected '=' after the output name", kAssignHint);
  if (tokens[1].text != "=")
    fail(text, tokens[1].pos, "expected '=' after the output name, found " + quoted(tokens[1].text),
         kAssignHint);
  check_name(text, tokens[0], true);
  for (size_t i = 2; i < tokens.size(); ++i)
    if (tokens[i].text == "=")
      fail(text, tokens[i].pos, "a second assignment '='",
           "only one output can be assigned; " + std::string(kStatementHint));
  if (tokens.size() == 2) fail(text, tokens[1].pos + 1, "the right-hand side is empty", kAssignHint);

  s.root = Parser(s, 2).parse();

  if (s.inputs.empty())
    fail(text, tokens[2].pos, "the right-hand side reads no input",
         "an elementwise expression computes its output from input tensors, e.g. 'z = x * 2'");
  if (s.inputs.size() > static_cast<size_t>(kMaxInputs)) {
    std::string names;
    for (std::string_view name : s.inputs) names += (names.empty() ? "" : ", ") + std::string(name);
    fail(text, tokens[s.input_tokens[kMaxInputs]].pos,
         "the expression reads " + std::to_string(s.inputs.size()) + " inputs (" + names + ")",
         "at most " + std::to_string(kMaxInputs) + " inputs are supported; split the computation");
  }
  return s;
}

std::string join_tokens(const std::vector<Token>& tokens, size_t first) {
  std::string out;
  for (size_t i = first; i < tokens.size(); ++i) {
    if (i > first) out += ' ';
    out += tokens[i].text;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Host evaluation

enum class Type { kInt, kFloat };

// clang-format off
enum class Fn : std::uint8_t {
  kExp, kExp2, kExpm1, kLog, kLog2, kLog10, kLog1p, kSqrt, kRsqrt, kCbrt,
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kTanh, kAsinh, kAcosh, kAtanh,
  kErf, kErfc, kFabs, kFloor, kCeil, kRound, kTrunc,
  kPow, kFmin, kFmax, kFmod, kAtan2, kCopysign, kHypot, kFma,
  kAbs, kMin, kMax,
};
// clang-format on

struct FunctionInfo {
  std::string_view name;
  Fn fn;
  int arity;
  bool float_variant;  // also spelled with an 'f' suffix (expf)
};

constexpr FunctionInfo kFunctions[] = {
    {"exp", Fn::kExp, 1, true},     {"exp2", Fn::kExp2, 1, true},         {"expm1", Fn::kExpm1, 1, true},
    {"log", Fn::kLog, 1, true},     {"log2", Fn::kLog2, 1, true},         {"log10", Fn::kLog10, 1, true},
    {"log1p", Fn::kLog1p, 1, true}, {"sqrt", Fn::kSqrt, 1, true},         {"rsqrt", Fn::kRsqrt, 1, true},
    {"cbrt", Fn::kCbrt, 1, true},   {"sin", Fn::kSin, 1, true},           {"cos", Fn::kCos, 1, true},
    {"tan", Fn::kTan, 1, true},     {"asin", Fn::kAsin, 1, true},         {"acos", Fn::kAcos, 1, true},
    {"atan", Fn::kAtan, 1, true},   {"sinh", Fn::kSinh, 1, true},         {"cosh", Fn::kCosh, 1, true},
    {"tanh", Fn::kTanh, 1, true},   {"asinh", Fn::kAsinh, 1, true},       {"acosh", Fn::kAcosh, 1, true},
    {"atanh", Fn::kAtanh, 1, true}, {"erf", Fn::kErf, 1, true},           {"erfc", Fn::kErfc, 1, true},
    {"fabs", Fn::kFabs, 1, true},   {"floor", Fn::kFloor, 1, true},       {"ceil", Fn::kCeil, 1, true},
    {"round", Fn::kRound, 1, true}, {"trunc", Fn::kTrunc, 1, true},       {"pow", Fn::kPow, 2, true},
    {"fmin", Fn::kFmin, 2, true},   {"fmax", Fn::kFmax, 2, true},         {"fmod", Fn::kFmod, 2, true},
    {"atan2", Fn::kAtan2, 2, true}, {"copysign", Fn::kCopysign, 2, true}, {"hypot", Fn::kHypot, 2, true},
    {"fma", Fn::kFma, 3, true},     {"abs", Fn::kAbs, 1, false},          {"min", Fn::kMin, 2, false},
    {"max", Fn::kMax, 2, false},
};

const FunctionInfo* find_function(std::string_view name) {
  for (const FunctionInfo& f : kFunctions) {
    if (name == f.name) return &f;
    if (f.float_variant && name.size() == f.name.size() + 1 && name.starts_with(f.name) && name.back() == 'f')
      return &f;
  }
  return nullptr;
}

std::string supported_functions() {
  std::string out;
  for (const FunctionInfo& f : kFunctions) {
    if (!out.empty()) out += ", ";
    out += std::string(f.name) + (f.float_variant ? "(f)" : "");
  }
  return out + "; '(f)' means both spellings, e.g. exp and expf";
}

// clang-format off
enum class Op : std::uint8_t {
  kInput, kPushInt, kPushFloat,
  kIntToFloat, kFloatToInt, kRoundToFloat, kFloatTruth,
  kNegI, kNegF, kNotI, kBitNot, kAbsI, kMath1,
  kAddI, kSubI, kMulI, kDivI, kModI, kShl, kShr, kBitAnd, kBitOr, kBitXor,
  kLtI, kLeI, kGtI, kGeI, kEqI, kNeI,
  kAddF, kSubF, kMulF, kDivF,
  kLtF, kLeF, kGtF, kGeF, kEqF, kNeF,
  kLogicalAnd, kLogicalOr, kMinI, kMaxI, kMath2,
  kSelect, kMath3,
};
// clang-format on

struct Instruction {
  Op op;
  Fn fn = Fn::kExp;        // kMath*
  std::int32_t input = 0;  // kInput
  std::int64_t i = 0;      // kPushInt
  double f = 0;            // kPushFloat
};

union Slot {
  std::int64_t i;
  double f;
};

// Integer arithmetic through uint64 wraps instead of being undefined on overflow.
std::int64_t wrap(std::uint64_t v) {
  return static_cast<std::int64_t>(v);
}
std::uint64_t bits(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

std::int64_t int_div(std::int64_t a, std::int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap(0 - bits(a));  // INT64_MIN / -1 traps on x86
  return a / b;
}

std::int64_t int_mod(std::int64_t a, std::int64_t b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}

std::int64_t shift_left(std::int64_t a, std::int64_t n) {
  if (n < 0 || n >= 64) return 0;
  return wrap(bits(a) << n);
}

std::int64_t shift_right(std::int64_t a, std::int64_t n) {
  if (n < 0) return 0;
  if (n >= 64) return a < 0 ? -1 : 0;
  return a >> n;
}

std::int64_t saturate_to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483647.0) return 2147483647;
  if (v <= -2147483648.0) return -2147483648LL;
  return static_cast<std::int64_t>(v);
}

// clang-format off
double math1(Fn fn, double x) {
  switch (fn) {
    case Fn::kExp: return std::exp(x);
    case Fn::kExp2: return std::exp2(x);
    case Fn::kExpm1: return std::expm1(x);
    case Fn::kLog: return std::log(x);
    case Fn::kLog2: return std::log2(x);
    case Fn::kLog10: return std::log10(x);
    case Fn::kLog1p: return std::log1p(x);
    case Fn::kSqrt: return std::sqrt(x);
    case Fn::kRsqrt: return 1.0 / std::sqrt(x);
    case Fn::kCbrt: return std::cbrt(x);
    case Fn::kSin: return std::sin(x);
    case Fn::kCos: return std::cos(x);
    case Fn::kTan: return std::tan(x);
    case Fn::kAsin: return std::asin(x);
    case Fn::kAcos: return std::acos(x);
    case Fn::kAtan: return std::atan(x);
    case Fn::kSinh: return std::sinh(x);
    case Fn::kCosh: return std::cosh(x);
    case Fn::kTanh: return std::tanh(x);
    case Fn::kAsinh: return std::asinh(x);
    case Fn::kAcosh: return std::acosh(x);
    case Fn::kAtanh: return std::atanh(x);
    case Fn::kErf: return std::erf(x);
    case Fn::kErfc: return std::erfc(x);
    case Fn::kFabs: case Fn::kAbs: return std::fabs(x);
    case Fn::kFloor: return std::floor(x);
    case Fn::kCeil: return std::ceil(x);
    case Fn::kRound: return std::round(x);
    case Fn::kTrunc: return std::trunc(x);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

double math2(Fn fn, double a, double b) {
  switch (fn) {
    case Fn::kPow: return std::pow(a, b);
    case Fn::kFmin: case Fn::kMin: return std::fmin(a, b);
    case Fn::kFmax: case Fn::kMax: return std::fmax(a, b);
    case Fn::kFmod: return std::fmod(a, b);
    case Fn::kAtan2: return std::atan2(a, b);
    case Fn::kCopysign: return std::copysign(a, b);
    case Fn::kHypot: return std::hypot(a, b);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}
// clang-format on

// Types the tree (rejecting what the host cannot evaluate) and emits postfix code with explicit conversions.
class Compiler {
 public:
  Compiler(const Statement& statement, const std::vector<int>& input_slots)
      : s_(statement), input_slots_(input_slots), types_(statement.nodes.size(), Type::kFloat) {}

  std::vector<Instruction> compile(Type& result) {
    result = check(s_.root);
    emit(s_.root);
    return std::move(code_);
  }

 private:
  const Token& token(int node) const { return s_.tokens[s_.nodes[node].token]; }
  [[noreturn]] void reject(int node, const std::string& what, std::string_view hint) const {
    fail(s_.text, token(node).pos, what, hint);
  }

  static Type common(Type a, Type b) {
    return a == Type::kInt && b == Type::kInt ? Type::kInt : Type::kFloat;
  }

  Type check(int n) {
    const AstNode& node = s_.nodes[n];
    const std::string_view text = token(n).text;
    Type type = Type::kFloat;
    std::vector<Type> args;
    for (int arg : node.args) args.push_back(check(arg));
    switch (node.kind) {
      case NodeKind::kLiteral:
        type = node.literal.is_float ? Type::kFloat : Type::kInt;
        break;
      case NodeKind::kConstant:
        type = (text == "true" || text == "false") ? Type::kInt : Type::kFloat;
        break;
      case NodeKind::kInput:
        type = Type::kFloat;
        break;
      case NodeKind::kCast:
        type = text == "int" ? Type::kInt : Type::kFloat;
        break;
      case NodeKind::kTernary:
        type = common(args[1], args[2]);
        break;
      case NodeKind::kUnary:
        if (text == "~" && args[0] != Type::kInt)
          reject(n, "operator '~' needs an integer operand, but this one is floating point",
                 "inputs are floating point; cast with (int) if integer bits are meant");
        type = text == "!" ? Type::kInt : args[0];
        break;
      case NodeKind::kBinary: {
        const bool integer_only =
            text == "%" || text == "&" || text == "|" || text == "^" || text == "<<" || text == ">>";
        if (integer_only && common(args[0], args[1]) != Type::kInt)
          reject(n, "operator " + quoted(text) + " needs integer operands, but one is floating point",
                 text == "%" ? "use fmodf(a, b) for floating values"
                             : "inputs are floating point; cast with (int) if integer bits are meant");
        const int precedence = binary_precedence(token(n));
        const bool boolean = precedence == 1 || precedence == 2 || precedence == 6 || precedence == 7;
        type = boolean ? Type::kInt : common(args[0], args[1]);
        break;
      }
      case NodeKind::kCall: {
        const FunctionInfo* f = find_function(text);
        if (f == nullptr)
          reject(n, "the host evaluator does not support the function " + quoted(text),
                 "the GPU may still compile it, but the CPU reference cannot check it. Supported: " +
                     supported_functions());
        if (static_cast<int>(args.size()) != f->arity)
          reject(n,
                 "function " + quoted(text) + " takes " + std::to_string(f->arity) + " argument" +
                     (f->arity == 1 ? "" : "s") + " but is called with " + std::to_string(args.size()),
                 "check the call's arguments");
        const bool all_int = std::all_of(args.begin(), args.end(), [](Type t) { return t == Type::kInt; });
        type = (!f->float_variant && all_int) ? Type::kInt : Type::kFloat;  // abs, min, max keep integers
        break;
      }
    }
    types_[n] = type;
    return type;
  }

  void push(Instruction instruction, int pushed) {
    code_.push_back(instruction);
    depth_ += pushed;
    if (depth_ > kMaxStack)
      fail(s_.text, 0,
           "the expression is too large for the host evaluator (stack deeper than " +
               std::to_string(kMaxStack) + ")",
           "split it into smaller expressions");
  }
  void op(Op o, int pushed = 0) { push(Instruction{o}, pushed); }

  void emit_as(int n, Type want) {
    emit(n);
    if (types_[n] == Type::kInt && want == Type::kFloat) op(Op::kIntToFloat);
  }
  void emit_truth(int n) {
    emit(n);
    if (types_[n] == Type::kFloat) op(Op::kFloatTruth);
  }

  void emit(int n) {
    const AstNode& node = s_.nodes[n];
    const std::string_view text = token(n).text;
    switch (node.kind) {
      case NodeKind::kLiteral:
        if (node.literal.is_float) {
          push(Instruction{.op = Op::kPushFloat, .f = node.literal.f}, 1);
        } else {
          push(Instruction{.op = Op::kPushInt, .i = node.literal.i}, 1);
        }
        return;
      case NodeKind::kConstant: {
        if (text == "true" || text == "false") {
          push(Instruction{.op = Op::kPushInt, .i = text == "true" ? 1 : 0}, 1);
          return;
        }
        double value = std::numeric_limits<double>::quiet_NaN();
        if (text == "INFINITY") value = std::numeric_limits<double>::infinity();
        if (text == "M_PI") value = 3.14159265358979323846;
        if (text == "M_E") value = 2.71828182845904523536;
        push(Instruction{.op = Op::kPushFloat, .f = value}, 1);
        return;
      }
      case NodeKind::kInput:
        push(Instruction{.op = Op::kInput, .input = input_slots_[node.input]}, 1);
        return;
      case NodeKind::kCast: {
        const int operand = node.args[0];
        emit(operand);
        if (text == "int") {
          if (types_[operand] == Type::kFloat) op(Op::kFloatToInt);
        } else {
          if (types_[operand] == Type::kInt) op(Op::kIntToFloat);
          if (text == "float") op(Op::kRoundToFloat);
        }
        return;
      }
      case NodeKind::kTernary:
        emit_truth(node.args[0]);
        emit_as(node.args[1], types_[n]);
        emit_as(node.args[2], types_[n]);
        op(Op::kSelect, -2);
        return;
      case NodeKind::kUnary: {
        const int operand = node.args[0];
        if (text == "!") {
          emit_truth(operand);
          op(Op::kNotI);
        } else {
          emit(operand);
          if (text == "-") op(types_[operand] == Type::kInt ? Op::kNegI : Op::kNegF);
          if (text == "~") op(Op::kBitNot);
        }
        return;
      }
      case NodeKind::kBinary:
        emit_binary(n, text);
        return;
      case NodeKind::kCall: {
        const FunctionInfo* f = find_function(text);
        const Type type = types_[n];
        for (int arg : node.args) emit_as(arg, type);
        if (type == Type::kInt) {
          op(f->fn == Fn::kAbs ? Op::kAbsI : f->fn == Fn::kMin ? Op::kMinI : Op::kMaxI, 1 - f->arity);
          return;
        }
        const Op math = f->arity == 1 ? Op::kMath1 : f->arity == 2 ? Op::kMath2 : Op::kMath3;
        push(Instruction{.op = math, .fn = f->fn}, 1 - f->arity);
        return;
      }
    }
  }

  void emit_binary(int n, std::string_view text) {
    const AstNode& node = s_.nodes[n];
    if (text == "&&" || text == "||") {
      emit_truth(node.args[0]);
      emit_truth(node.args[1]);
      op(text == "&&" ? Op::kLogicalAnd : Op::kLogicalOr, -1);
      return;
    }
    const Type operands = common(types_[node.args[0]], types_[node.args[1]]);
    emit_as(node.args[0], operands);
    emit_as(node.args[1], operands);
    struct Pair {
      std::string_view text;
      Op integer, floating;
    };
    static constexpr Pair kOps[] = {
        {"+", Op::kAddI, Op::kAddF},     {"-", Op::kSubI, Op::kSubF},     {"*", Op::kMulI, Op::kMulF},
        {"/", Op::kDivI, Op::kDivF},     {"%", Op::kModI, Op::kModI},     {"<<", Op::kShl, Op::kShl},
        {">>", Op::kShr, Op::kShr},      {"&", Op::kBitAnd, Op::kBitAnd}, {"|", Op::kBitOr, Op::kBitOr},
        {"^", Op::kBitXor, Op::kBitXor}, {"<", Op::kLtI, Op::kLtF},       {"<=", Op::kLeI, Op::kLeF},
        {">", Op::kGtI, Op::kGtF},       {">=", Op::kGeI, Op::kGeF},      {"==", Op::kEqI, Op::kEqF},
        {"!=", Op::kNeI, Op::kNeF},
    };
    for (const Pair& pair : kOps) {
      if (pair.text != text) continue;
      op(operands == Type::kInt ? pair.integer : pair.floating, -1);
      return;
    }
  }

  const Statement& s_;
  const std::vector<int>& input_slots_;
  std::vector<Type> types_;
  std::vector<Instruction> code_;
  int depth_ = 0;
};

}  // namespace

Expression parse_expression(std::string_view text) {
  const Statement s = parse_statement(text);
  Expression expression;
  expression.canonical = join_tokens(s.tokens, 0);
  expression.output = std::string(s.tokens[0].text);
  expression.rhs = join_tokens(s.tokens, 2);
  for (std::string_view name : s.inputs) expression.inputs.emplace_back(name);
  return expression;
}

// The header's opaque node is the whole compiled program: a flat postfix list, cheap to run 2^27 times.
struct Evaluator::Node {
  std::vector<Instruction> program;
  bool int_result = false;
};

Evaluator::Evaluator(const Expression& expression) : root_(std::make_unique<Node>()) {
  const Statement s = parse_statement(expression.canonical);
  std::vector<int> slots;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const auto found = std::find(expression.inputs.begin(), expression.inputs.end(), s.inputs[i]);
    if (found == expression.inputs.end())
      fail(s.text, s.tokens[s.input_tokens[i]].pos,
           "the input " + quoted(s.inputs[i]) + " is missing from Expression::inputs",
           "build the Expression with parse_expression, or list every input it reads");
    slots.push_back(static_cast<int>(found - expression.inputs.begin()));
  }
  Type result = Type::kFloat;
  root_->program = Compiler(s, slots).compile(result);
  root_->int_result = result == Type::kInt;
}

Evaluator::~Evaluator() = default;
Evaluator::Evaluator(Evaluator&&) noexcept = default;
Evaluator& Evaluator::operator=(Evaluator&&) noexcept = default;

double Evaluator::operator()(const double* inputs) const {
  // Two unused slots below the first value keep `stack[top - 1]` inside the array when it is not read.
  Slot stack[kMaxStack + 2];
  int top = 1;
  for (const Instruction& in : root_->program) {
    Slot& l = stack[top - 1];
    Slot& r = stack[top];
    // clang-format off
    switch (in.op) {
      case Op::kInput: stack[++top].f = inputs[in.input]; break;
      case Op::kPushInt: stack[++top].i = in.i; break;
      case Op::kPushFloat: stack[++top].f = in.f; break;
      case Op::kIntToFloat: r.f = static_cast<double>(r.i); break;
      case Op::kFloatToInt: r.i = saturate_to_int(r.f); break;
      case Op::kRoundToFloat: r.f = static_cast<float>(r.f); break;
      case Op::kFloatTruth: r.i = r.f != 0.0; break;
      case Op::kNegI: r.i = wrap(0 - bits(r.i)); break;
      case Op::kNegF: r.f = -r.f; break;
      case Op::kNotI: r.i = r.i == 0; break;
      case Op::kBitNot: r.i = ~r.i; break;
      case Op::kAbsI: r.i = r.i < 0 ? wrap(0 - bits(r.i)) : r.i; break;
      case Op::kMath1: r.f = math1(in.fn, r.f); break;
      case Op::kAddI: l.i = wrap(bits(l.i) + bits(r.i)), --top; break;
      case Op::kSubI: l.i = wrap(bits(l.i) - bits(r.i)), --top; break;
      case Op::kMulI: l.i = wrap(bits(l.i) * bits(r.i)), --top; break;
      case Op::kDivI: l.i = int_div(l.i, r.i), --top; break;
      case Op::kModI: l.i = int_mod(l.i, r.i), --top; break;
      case Op::kShl: l.i = shift_left(l.i, r.i), --top; break;
      case Op::kShr: l.i = shift_right(l.i, r.i), --top; break;
      case Op::kBitAnd: l.i = l.i & r.i, --top; break;
      case Op::kBitOr: l.i = l.i | r.i, --top; break;
      case Op::kBitXor: l.i = l.i ^ r.i, --top; break;
      case Op::kLtI: l.i = l.i < r.i, --top; break;
      case Op::kLeI: l.i = l.i <= r.i, --top; break;
      case Op::kGtI: l.i = l.i > r.i, --top; break;
      case Op::kGeI: l.i = l.i >= r.i, --top; break;
      case Op::kEqI: l.i = l.i == r.i, --top; break;
      case Op::kNeI: l.i = l.i != r.i, --top; break;
      case Op::kAddF: l.f = l.f + r.f, --top; break;
      case Op::kSubF: l.f = l.f - r.f, --top; break;
      case Op::kMulF: l.f = l.f * r.f, --top; break;
      case Op::kDivF: l.f = l.f / r.f, --top; break;
      case Op::kLtF: l.i = l.f < r.f, --top; break;
      case Op::kLeF: l.i = l.f <= r.f, --top; break;
      case Op::kGtF: l.i = l.f > r.f, --top; break;
      case Op::kGeF: l.i = l.f >= r.f, --top; break;
      case Op::kEqF: l.i = l.f == r.f, --top; break;
      case Op::kNeF: l.i = l.f != r.f, --top; break;
      case Op::kLogicalAnd: l.i = l.i != 0 && r.i != 0, --top; break;
      case Op::kLogicalOr: l.i = l.i != 0 || r.i != 0, --top; break;
      case Op::kMinI: l.i = std::min(l.i, r.i), --top; break;
      case Op::kMaxI: l.i = std::max(l.i, r.i), --top; break;
      case Op::kMath2: l.f = math2(in.fn, l.f, r.f), --top; break;
      case Op::kSelect:  // condition, if_true, if_false
        top -= 2;
        stack[top] = stack[top].i != 0 ? stack[top + 1] : stack[top + 2];
        break;
      case Op::kMath3:  // fma is the only three-argument function
        top -= 2;
        stack[top].f = std::fma(stack[top].f, stack[top + 1].f, stack[top + 2].f);
        break;
    }
    // clang-format on
  }
  return root_->int_result ? static_cast<double>(stack[2].i) : stack[2].f;
}

}  // namespace jitune::ew
